#!/usr/bin/env bash
# On the GPU machine, from the repository root: Nsight Compute's full
# sections and source counters (per SASS instruction) of one launch each
# of the fixed-point spreading and the interpolation, 10^7 random points
# on 256^3 at 1e-5 (width 7), build .gpu/recon.
set -u
source scripts/cuda-libs.sh
o=${OUT:-/tmp/n}/n; mkdir -p $o
nvidia-smi --query-gpu=name,driver_version --format=csv > $o/gpu.txt
for k in ${KERNELS:-nufft_spread_fixed_point_7 nufft_interpolate_7}; do
  timeout 200 ncu --clock-control none --set full --import-source no --kernel-name $k --launch-count 1 -o $o/$k \
    .gpu/recon bench-nufft --device cuda --precision f32 --random-points 10000000 --matrix 256 --repeats 1 --tolerance 1e-5 > $o/$k.log 2>&1
  ncu --import $o/$k.ncu-rep --print-details all > $o/full-$k.txt 2>&1
  ncu --import $o/$k.ncu-rep --page source --csv --print-source sass > $o/sass-$k.csv 2>&1
  rm -f $o/$k.ncu-rep
done
cd $o && tar czf $OUT/n.tgz .
