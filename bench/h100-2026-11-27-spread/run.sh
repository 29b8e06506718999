#!/usr/bin/env bash
# On the GPU machine, from the repository root: type 1 of this build
# (.gpu/recon) against the build before (.gpu/recon-old), alternating,
# 10^7 random points on 256^3, three tolerances; then recon bench (F^H D
# and Q use type 1) at 128^3.
set -u
source scripts/cuda-libs.sh
o=${OUT:-/tmp/spread}; mkdir -p $o
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $o/gpu.txt
for round in 1 2 3; do
  for tol in 1e-5 1e-3 1e-6; do
    for b in recon recon-old; do
      echo "round $round tol $tol $b: $(.gpu/$b bench-nufft --device cuda --precision f32 --random-points 10000000 --matrix 256 --repeats 5 --tolerance $tol 2>&1 | tail -1)" >> $o/bench-nufft.txt
    done
  done
done
