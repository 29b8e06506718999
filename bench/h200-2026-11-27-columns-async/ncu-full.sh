#!/usr/bin/env bash
# On the GPU machine: Nsight Compute's full sections for one launch each of
# the 256^3 Toeplitz product's kernels (build before this folder's change).
set -u
source scripts/cuda-libs.sh
o=/tmp/n; mkdir -p $o
for k in toeplitz_columns_512 fft_lines_512_wide fft_lines_512; do
  timeout 150 ncu --clock-control none --set full --kernel-name $k --launch-skip 12 --launch-count 1 \
    .gpu/recon-old bench --device cuda --variants 5 --engines nufft --matrix 256 --samples 1000000 --iterations 4 2>&1 | grep -v '^==PROF' > $o/full-$k.txt
done
tar czf $OUT/n.tgz -C $o .
grep -E "Duration|Memory Throughput|DRAM Throughput|Compute \(SM\)|Achieved Occupancy|Registers Per|Stall|Warp Cycles Per Issued|Issued Warp|No Eligible|Bank" $o/full-toeplitz_columns_512.txt | head -40
