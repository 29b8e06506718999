#!/usr/bin/env bash
# On the GPU machine, from the repository root: a warm radial-256 run's
# stages, this build (.gpu/recon) against the build before (.gpu/recon-old),
# alternating (the first run of each fills the caches).
set -u
source scripts/cuda-libs.sh
o=${OUT:-/tmp/peak}; mkdir -p $o
export RECON_CACHE_DIR=/tmp/peak-cache
nvidia-smi --query-gpu=name,driver_version --format=csv > $o/gpu.txt
scan=/tmp/radial-256.h5
.gpu/recon simulate --config scripts/peers/radial-256.toml --out $scan > /dev/null 2>&1
for round in 0 1 2 3; do
  for b in recon recon-old; do
    s=$(date +%s.%N)
    .gpu/$b $scan --out /tmp/peak-$b --set engine.device=cuda --set regulariser.kind=uniform --lambda 0.1 \
        --iterations 30 --set solver.tolerance=0 -q > /dev/null 2>&1
    e=$(date +%s.%N)
    [ $round = 0 ] && continue
    python3 -c "
import json
t = json.load(open('/tmp/peak-$b/report.json'))['seconds']
print(f'$b round $round wall {$e - $s:.3f} ' + ' '.join(f'{k} {v:.3f}' for k, v in t.items()))" >> $o/runs.txt
  done
done
cat $o/runs.txt
