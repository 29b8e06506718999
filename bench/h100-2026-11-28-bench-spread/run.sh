#!/usr/bin/env bash
# On the GPU machine, from the repository root: `recon bench`'s CG time per
# iteration at 256^3 (10^6 samples, 30 iterations) and 128^3 (the book's
# problem, 60), $ROUNDS rounds alternating the builds of $BUILDS in .gpu/.
# Results in $OUT/o.tgz.
set -u
source scripts/cuda-libs.sh
o=/tmp/o-spread; rm -rf $o; mkdir -p $o
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $o/gpu.txt
show() { python3 -c "
import json,sys; d=json.load(open(sys.argv[1])); s=d['stages'][0]
print(sys.argv[2], 'CG %.4f ms' % s['cg_ms_per_iteration'])" "$@"; }
for i in $(seq ${ROUNDS:-4}); do
  for b in ${BUILDS:-recon}; do
    .gpu/$b bench --variants 5 --matrix 256 --samples 1000000 --iterations 30 --engines nufft --json $o/bench-256-$b-$i.json > /dev/null 2>&1
    show $o/bench-256-$b-$i.json "256 $b $i" | tee -a $o/table.txt
    .gpu/$b bench --variants 5 --engines nufft --json $o/bench-128-$b-$i.json > /dev/null 2>&1
    show $o/bench-128-$b-$i.json "128 $b $i" | tee -a $o/table.txt
  done
done
cp "$0" $o/
tar czf $OUT/o.tgz -C $o table.txt gpu.txt run.sh
