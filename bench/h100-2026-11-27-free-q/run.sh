#!/usr/bin/env bash
# On the GPU machine, from the repository root: warm radial-256 runs
# (scripts/peers/radial-256.toml, 30 iterations, Q and kernels cached) by
# .gpu/recon (the build before) and .gpu/recon-free (Q's host copy freed on
# a thread of its own while the outputs are written), alternating.
set -u
source scripts/cuda-libs.sh
o=${OUT:-/tmp/freeq}/r; mkdir -p $o
export RECON_CACHE_DIR=/tmp/freeq-cache
nvidia-smi --query-gpu=name,driver_version --format=csv > $o/gpu.txt
scan=/tmp/radial-256.h5
.gpu/recon simulate --config scripts/peers/radial-256.toml --out $scan > $o/simulate.log 2>&1
run() { .gpu/$1 $scan --out $2 --set engine.device=cuda --set regulariser.kind=uniform \
          --lambda 0.1 --iterations 30 --set solver.tolerance=0 -q > $2.log 2>&1; }
run recon /tmp/freeq-warm
for round in 1 2 3 4 5; do
  for b in ${BUILDS:-recon recon-free}; do
    d=/tmp/freeq-$b-$round; t0=$(date +%s.%N); run $b $d; t1=$(date +%s.%N)
    python3 - "$b $round" $t0 $t1 $d/report.json >> $o/runs.txt <<'PY'
import json, sys
name, wall, s = sys.argv[1], float(sys.argv[3]) - float(sys.argv[2]), json.load(open(sys.argv[4]))["seconds"]
stages = sum(s[k] for k in ("read", "plan", "q", "fft_q", "fhd", "cg", "gridding"))
print(f"{name:14} wall {wall:.3f} total {s['total']:.3f} exit {wall - s['total']:.3f} stages {stages:.3f} "
      f"bound {1.3 * stages + 0.3:.3f} other {s['other']:.3f} outputs {s['outputs']:.3f} report {s['report']:.3f}")
PY
  done
done
cd $o && tar czf $OUT/r.tgz .
