#!/usr/bin/env bash
# On the GPU machine, from the repository root: warp.cu (the z columns
# with a warp per column against toeplitz_columns_L) for each L,blocks of
# $CASES (blocks: the warp kernel's launch bound, blocks of 256 threads an SM).
# The harness calls toeplitz_columns_L with the six arguments it had up
# to e9403e0 (bench/h100-2026-11-27-fold added three): on a later tree,
# first `zcat bench/h100-2026-11-27-fold/lines-old.cu.gz >
# crates/cuda/kernels/lines.cu` (and restore it after).
set -u
source scripts/cuda-libs.sh
export PATH=/usr/local/cuda/bin:$PATH
o=${OUT:-/tmp/warp}/r; mkdir -p $o
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $o/gpu.txt
d=bench/h100-2026-11-27-warp-columns
for c in ${CASES:-512,3 512,4 256,4 256,6}; do
  IFS=, read L b <<< "$c"
  exe=/tmp/warp-$L-$b
  nvcc -O3 -std=c++17 -arch=sm_90 -I crates/cuda/kernels -DTOEPLITZ=$L -DWBLOCKS=$b $d/warp.cu -o $exe -Xptxas -v > $o/build-$L-$b.log 2>&1 \
    || { echo "build $c failed"; tail -30 $o/build-$L-$b.log; continue; }
  grep -A3 "Compiling entry function 'columns_warp'" $o/build-$L-$b.log | grep -o "Used [0-9]* registers\|[0-9]* bytes spill stores" | tr '\n' ' ' | sed "s/^/$L,$b: /"; echo
  $exe 2>&1 | sed "s/^/$L,$b: /" | tee $o/run-$L-$b.txt
done
cd $o && tar czf ${OUT:-/tmp/warp}/r.tgz .
