#!/usr/bin/env bash
# On the GPU machine, from the repository root: radial-256 (scripts/peers/,
# 10^6 samples, 30 iterations, uniform W) run warm, verbose, $ROUNDS times,
# alternating the builds of $BUILDS in .gpu/ (default: recon); the wall
# time against the log's `outputs in place` and `done`, and report.json's
# stages. Results in $OUT/o.tgz.
set -u
source scripts/cuda-libs.sh
export RECON_CACHE_DIR=/tmp/recon-exit-cache
o=/tmp/o-exit; rm -rf $o; mkdir -p $o
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $o/gpu.txt
bin=.gpu/recon
scan=/tmp/radial-256.h5
[ -f $scan ] || $bin simulate --config scripts/peers/radial-256.toml --out $scan > $o/simulate.log 2>&1
now() { date +%s.%N; }
# a first run fills the caches (Q, kernels)
$bin $scan --out /tmp/exit-warm --set engine.device=cuda --set regulariser.kind=uniform --lambda 0.1 --iterations 30 --set solver.tolerance=0 -q > /dev/null 2>&1
for i in $(seq ${ROUNDS:-3}); do
  for v in ${BUILDS:-recon}; do
    d=/tmp/exit-$v-$i
    t0=$(now)
    .gpu/$v $scan --out $d --set engine.device=cuda --set regulariser.kind=uniform --lambda 0.1 --iterations 30 --set solver.tolerance=0 -v > $o/log-$v-$i.txt 2>&1
    t1=$(now)
    cp $d/report.json $o/report-$v-$i.json
    python3 - $o/report-$v-$i.json "$v $i" $t0 $t1 $o/log-$v-$i.txt <<'PY' | tee -a $o/table.txt
import json, sys, re
r = json.load(open(sys.argv[1])); s = r["seconds"]
wall = float(sys.argv[4]) - float(sys.argv[3])
log = open(sys.argv[5]).read()
rel = re.search(r"release took ([0-9.]+) s; joined ([0-9.]+)", log)
placed = re.search(r"outputs in place ([0-9.]+)", log); done = re.search(r"done ([0-9.]+)", log)
stages = sum(s.get(k, 0) for k in ["read", "plan", "q", "fft_q", "fhd", "prior", "cg", "gridding"])
o = r.get("output_seconds", {})
print(f"{sys.argv[2]:16} wall {wall:.3f}  placed {placed.group(1) if placed else '-'}  done {done.group(1) if done else '-'}  "
      f"stages {stages:.3f} bound {1.3 * stages + 0.3:.3f}  outputs {s['outputs']:.3f} other {s['other']:.3f} report {s['report']:.3f} setup {s['setup']:.3f} device {s['device']:.3f} total {s['total']:.3f}  " + " ".join(f"{k} {v:.3f}" for k, v in o.items()) + (f"  release {rel.group(1)} (joined +{rel.group(2)})" if rel else ""))
PY
    rm -rf $d
  done
done
cp "$0" $o/
tar czf $OUT/o.tgz -C $o .
