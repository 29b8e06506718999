#!/usr/bin/env bash
# On the GPU machine, from the repository root: pdl.cu with the x lines'
# blocks (narrow kernels: fft_lines_pad, fft_lines_crop_dot) holding CX
# lines instead of columns_for's choice (8 at L = 256, 4 at 512), for each
# L:CX of $CASES, beside the tree's at each L (L:tree). The y lines keep
# their 8 a block (4 at 1024), through the _wide kernels (lines.cu's WIDE()
# takes L too then). Chained launches against plain, as run.sh.
set -u
source scripts/cuda-libs.sh
export PATH=/usr/local/cuda/bin:$PATH
d=bench/h100-2026-11-27-pdl
o=${OUT:-/tmp/narrow}; mkdir -p $o
for case in ${CASES:-256:tree 256:4 256:16}; do
  IFS=: read L cx <<< "$case"
  c=/tmp/narrow-$L-$cx; rm -rf $c; mkdir -p $c
  w=; case $L in 320|384|512) w=_wide;; esac
  if [ $cx = tree ]; then cp crates/cuda/kernels/lines.cu $c/; else
    sed "s/(L) == 512)/(L) == 512 || (L) == $L)/" crates/cuda/kernels/lines.cu > $c/lines.cu; w=_wide; fi
  e='{print}'
  [ $cx != tree ] && e="{print} /^__host__ __device__ constexpr int columns_for\\(int L, bool wide\\)/ {getline; print; print \"    if (!wide && L == $L) return $cx;\"}"
  awk "$e" crates/cuda/kernels/stockham.cuh > $c/stockham.cuh
  nvcc -O3 -std=c++17 -arch=sm_90 -I $c -I crates/cuda/kernels -DTOEPLITZ=$L -DTOEPLITZ_DOT=$L \
    -DTOEPLITZ_XPAD=fft_lines_pad_$L -DTOEPLITZ_YPAD=fft_lines_pad_$L$w -DTOEPLITZ_Z=toeplitz_columns_$L \
    -DTOEPLITZ_YCROP=fft_lines_crop_$L$w -DTOEPLITZ_XDOT=fft_lines_crop_dot_$L \
    $d/pdl.cu -o $c/pdl > $o/build-$L-$cx.log 2>&1 || { echo "build $case failed"; tail -20 $o/build-$L-$cx.log; continue; }
  $c/pdl 2>&1 | sed "s/^/C=$cx /" | tee $o/run-$L-$cx.txt
done
