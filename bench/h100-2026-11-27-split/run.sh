#!/usr/bin/env bash
# On the GPU machine, from the repository root: split.cu for each variant
# of $VARIANTS, the z columns at L = 512 with their columns a block (C),
# points a thread (P) and threads an SM (launch bounds) edited into a copy
# of lines.cu:
#   base         the tree's (C 8, P 8, 1536 threads an SM)
#   cC_pP_T      C columns, P points, T threads an SM
#   split        the tree's with split.diff applied (toeplitz_split_512 beside)
#   l2_B         the tree's, the loads of the columns and of FFT(Q) asking
#                L2 to fetch B bytes around each miss (ld.global.L2::B)
# The harness calls toeplitz_columns_L with the six arguments it had up
# to e9403e0 (bench/h100-2026-11-27-fold added three): on a later tree,
# first `zcat bench/h100-2026-11-27-fold/lines-old.cu.gz >
# crates/cuda/kernels/lines.cu` (and restore it after).
set -u
source scripts/cuda-libs.sh
export PATH=/usr/local/cuda/bin:$PATH
o=${OUT:-/tmp/split}/r; mkdir -p $o
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $o/gpu.txt
d=bench/h100-2026-11-27-split
k=crates/cuda/kernels
for v in ${VARIANTS:-base c16_p8_1024 c16_p16_1024 c16_p16_1536}; do
  flags="-DTOEPLITZ=512"
  case $v in
    base) cp $k/lines.cu $d/lines-$v.cu ;;
    split) cp $k/lines.cu $d/lines-$v.cu; patch -s $d/lines-$v.cu $d/split.diff; flags="$flags -DSPLIT -DSPLIT_BLOCKS=1024" ;;
    l2_*) b=${v#l2_}
        sed -E "s|^#include \"dft.cuh\"|#include \"dft.cuh\"\n__device__ __forceinline__ float2 ld_l2(const float2* p) { float2 v; asm volatile(\"ld.global.L2::${b}B.v2.f32 {%0, %1}, [%2];\" : \"=f\"(v.x), \"=f\"(v.y) : \"l\"(p)); return v; }\n__device__ __forceinline__ float ldf_l2(const float* p) { float v; asm volatile(\"ld.global.L2::${b}B.f32 %0, [%1];\" : \"=f\"(v) : \"l\"(p)); return v; }|;
                s|float2 v = src\[at\];|float2 v = ld_l2(src + at);|;
                s|scale \* fq\[k \* P \+ x\]|scale * ldf_l2(fq + k * P + x)|" $k/lines.cu > $d/lines-$v.cu
        n=$(diff $k/lines.cu $d/lines-$v.cu | grep -c '^>'); [ $n = 4 ] || echo "$v: $n lines edited, not 4" ;;
    c*) IFS=_ read c p t <<< "$v"; c=${c#c}; p=${p#p}
        sed -E "s|^    constexpr int C = columns_for\(L, true\);|    constexpr int C = L == 512 ? $c : columns_for(L, true);|;
                s|return L == 256 \? 16 : 8;|return L == 256 ? 16 : L == 512 ? $p : 8;|;
                s|#define COLUMN_THREADS\(L\) \(columns_for\(L, true\)|#define COLUMN_THREADS(L) ((L == 512 ? $c : columns_for(L, true))|;
                s|\(columns_points\(L\) > 8 \? 512 : 1536\)|(L == 512 ? $t : columns_points(L) > 8 ? 512 : 1536)|" \
          $k/lines.cu > $d/lines-$v.cu
        flags="$flags -DZC=$c" ;;
  esac
  exe=/tmp/split-$v
  nvcc -O3 -std=c++17 -arch=sm_90 -I $k -DLINES_CU="\"lines-$v.cu\"" $flags $d/split.cu -o $exe -Xptxas -v > $o/build-$v.log 2>&1 \
    || { echo "build $v failed"; tail -30 $o/build-$v.log; continue; }
  grep -A3 "Compiling entry function 'toeplitz_columns_512'" $o/build-$v.log | grep -o "Used [0-9]* registers\|[0-9]* bytes spill stores" | tr '\n' ' ' | sed "s/^/$v: /"; echo
  $exe 2>&1 | sed "s/^/$v: /" | tee $o/run-$v.txt
done
cd $o && tar czf ${OUT:-/tmp/split}/r.tgz .
