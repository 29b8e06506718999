#!/usr/bin/env bash
# On the GPU machine, from the repository root: warm radial-256 runs
# (10^6 samples, 30 iterations), the process ending as it does (the
# libraries' exit handlers: the CUDA driver's teardown) against ending by
# _exit once the outputs are in place (RECON_FAST_EXIT=1 in the build
# tried here), alternating.
set -u
source scripts/cuda-libs.sh
o=/tmp/x; mkdir -p $o
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $o/gpu.txt
export RECON_CACHE_DIR=/tmp/xc
scan=/tmp/r256.h5
.gpu/recon simulate --config scripts/peers/radial-256.toml --out $scan > /dev/null 2>&1
run() { .gpu/recon $scan --out /tmp/x-out --set engine.device=cuda --set regulariser.kind=uniform --lambda 0.1 --iterations 30 --set solver.tolerance=0 -v > $o/last.log 2>&1; }
run
for i in 1 2 3 4; do
  for mode in exit fast; do
    s=$(date +%s.%N)
    if [ $mode = fast ]; then RECON_FAST_EXIT=1 run; else run; fi
    e=$(date +%s.%N)
    python3 -c "
import json, re
t = json.load(open('/tmp/x-out/report.json'))['seconds']
done = float(re.search(r'done ([0-9.]+) s after', open('$o/last.log').read()).group(1))
st = sum(t[k] for k in ('read', 'plan', 'q', 'fft_q', 'fhd', 'cg', 'gridding'))
print(f'$mode round $i wall {$e - $s:.3f} done {done:.3f} after_done {$e - $s - done:.3f} stages {st:.3f} bound {1.3 * st + 0.3:.3f} outputs {t[\"outputs\"]:.3f} other {t[\"other\"]:.3f} total {t[\"total\"]:.3f}')" | tee -a $o/runs.txt
  done
done
cp bench/h100-2026-11-27-exit/run.sh $o/
tar czf $OUT/x.tgz -C $o .
