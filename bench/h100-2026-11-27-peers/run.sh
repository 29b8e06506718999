#!/usr/bin/env bash
# On the GPU machine, from the repository root, with .gpu/ and .whl/ (the
# peers' wheels): the peer comparison (scripts/peers/run.sh) on the
# current build, then recon bench at 128^3 and 256^3 twice each.
set -u
o=${OUT:-/tmp/peers}/r; mkdir -p $o
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $o/gpu.txt
git log -1 --format=%H > $o/commit.txt 2>/dev/null
PEERS_OUT=$o bash scripts/peers/run.sh > $o/peers.log 2>&1; echo "peers rc=$?" >> $o/peers.log
rm -f $o/*.h5
source scripts/cuda-libs.sh
for i in 1 2; do
  .gpu/recon bench --device cuda --engines nufft --matrix 128 --iterations 60 > $o/bench-128-$i.txt 2>&1
  .gpu/recon bench --device cuda --engines nufft --matrix 256 --samples 1000000 --iterations 30 > $o/bench-256-$i.txt 2>&1
done
cd $o && tar czf $OUT/r.tgz .
