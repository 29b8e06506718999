#!/usr/bin/env bash
# On the GPU machine, from the repository root: Nsight Compute's full
# sections (source counters included) for one launch each of the NUFFT's
# spreading and interpolation, 10^7 random points on 256^3 at 1e-5 (width 7).
set -u
source scripts/cuda-libs.sh
o=/tmp/n; mkdir -p $o
R=${R:-.gpu/recon}
nvidia-smi --query-gpu=name,driver_version --format=csv > $o/gpu.txt
for k in nufft_spread_shared_7 nufft_interpolate_7; do
  timeout 200 ncu --clock-control none --set full --import-source no --kernel-name $k --launch-count 1 -o $o/$k \
    $R bench-nufft --device cuda --precision f32 --random-points 10000000 --matrix 256 --repeats 1 --tolerance 1e-5 > $o/$k.log 2>&1
  ncu --import $o/$k.ncu-rep --print-details all > $o/full-$k.txt 2>&1
  ncu --import $o/$k.ncu-rep --page source --csv --print-source sass > $o/sass-$k.csv 2>&1
done
grep -v '^==PROF' -h $o/*.log | tail -3
for k in nufft_spread_shared_7 nufft_interpolate_7; do
  echo "== $k"; grep -E "Duration|Memory Throughput|DRAM Throughput|Compute \(SM\)|Achieved Occupancy|Registers Per|Warp Cycles Per Issued|Issued Warp|No Eligible|Executed Instructions  |L1/TEX Hit|Mem Busy|Max Bandwidth|Issue Slots Busy|Theoretical Occ" $o/full-$k.txt | head -30
done
wc -c $o/*
tar czf $OUT/n.tgz -C $o --exclude='*.ncu-rep' . ; cp $o/*.ncu-rep $OUT/ 2>/dev/null
