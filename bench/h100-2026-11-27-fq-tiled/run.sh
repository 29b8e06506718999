#!/usr/bin/env bash
# On the GPU machine, from the repository root: fq.cu for L = 512 and 256
# (the 256^3 and 128^3 products' z columns), FFT(Q) plain (lines.cu of
# e9403e0) and tiled (the same with the column's FFT(Q) index edited to
# the tiled layout).
set -u
source scripts/cuda-libs.sh
export PATH=/usr/local/cuda/bin:$PATH
o=${OUT:-/tmp/fq}/r; mkdir -p $o
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $o/gpu.txt
d=bench/h100-2026-11-27-fq-tiled
k=crates/cuda/kernels
# lines.cu as it was at e9403e0, the kernel's signature here (the fold's
# bench folder keeps it)
zcat bench/h100-2026-11-27-fold/lines-old.cu.gz > $d/lines-plain.cu
sed 's|load_prefetch(fq + k \* P + x)|load_prefetch(fq + ((long long)blockIdx.x * L + k) * C + c)|' $d/lines-plain.cu > $d/lines-tiled.cu
n=$(diff $d/lines-plain.cu $d/lines-tiled.cu | grep -c '^>'); [ $n = 1 ] || echo "tiled: $n lines edited, not 1"
for L in ${LENGTHS:-512 256}; do
  for v in plain tiled; do
    flags="-DTOEPLITZ=$L"; [ $v = tiled ] && flags="$flags -DTILED"
    exe=/tmp/fq-$L-$v
    nvcc -O3 -std=c++17 -arch=sm_90 -I $k -DLINES_CU="\"lines-$v.cu\"" $flags $d/fq.cu -o $exe -Xptxas -v > $o/build-$L-$v.log 2>&1 \
      || { echo "build $L $v failed"; tail -30 $o/build-$L-$v.log; continue; }
    grep -A3 "Compiling entry function 'toeplitz_columns_$L'" $o/build-$L-$v.log | grep -o "Used [0-9]* registers\|[0-9]* bytes spill stores" | tr '\n' ' ' | sed "s/^/$L $v: /"; echo
    $exe 2>&1 | sed "s/^/$L $v: /" | tee $o/run-$L-$v.txt
  done
done
rm -f $d/lines-plain.cu $d/lines-tiled.cu
cd $o && tar czf ${OUT:-/tmp/fq}/r.tgz .
