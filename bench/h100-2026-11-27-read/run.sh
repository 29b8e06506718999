#!/usr/bin/env bash
# On the GPU machine, from the repository root: a warm run's read stage and
# wall time, this build (.gpu/recon) against the one before (.gpu/recon-old),
# alternating, on the problems of scripts/peers/.
set -u
source scripts/cuda-libs.sh
o=${OUT:-/tmp/read}; mkdir -p $o
export RECON_CACHE_DIR=/tmp/read-cache
nvidia-smi --query-gpu=name,driver_version --format=csv > $o/gpu.txt
for p in radial-128 radial-256; do
  it=60; [ $p = radial-256 ] && it=30
  scan=/tmp/$p.h5
  [ -f $scan ] || .gpu/recon simulate --config scripts/peers/$p.toml --out $scan > /dev/null 2>&1
  for round in 0 1 2 3; do
    for b in recon recon-old; do
      d=/tmp/read-$p-$b
      s=$(date +%s.%N)
      .gpu/$b $scan --out $d --set engine.device=cuda --set regulariser.kind=uniform --lambda 0.1 \
          --iterations $it --set solver.tolerance=0 -q > /dev/null 2>&1
      e=$(date +%s.%N)
      # round 0 fills the caches
      [ $round = 0 ] && continue
      python3 - "$p $b round $round" $s $e $d/report.json >> $o/runs.txt <<'PY'
import json, sys
name, s, e, rep = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
t = json.load(open(rep))["seconds"]
keys = ["read", "plan", "q", "fft_q", "fhd", "cg", "gridding"]
stages = sum(t.get(k, 0) for k in keys)
print(f"{name:28} wall {e - s:.3f}  read {t['read']:.3f}  stages {stages:.3f}  bound {1.3 * stages + 0.3:.3f}  "
      + " ".join(f"{k} {v:.3f}" for k, v in t.items()))
PY
    done
  done
done
cat $o/runs.txt
