#!/usr/bin/env bash
# Device investigation: NUFFT spreading settings and the run's fixed costs.
set -u
cd "$(dirname "$0")/../.."
source scripts/cuda-libs.sh
o=$OUT/r; mkdir -p $o
nvidia-smi --query-gpu=name,driver_version,persistence_mode --format=csv > $o/gpu.txt
which nsys ncu strace perf > $o/tools.txt 2>&1
R=.gpu/recon
# 1. NUFFT spreading settings, 10^7 random points on 256^3, 1e-5
for b in 16x8x8 16x16x8 32x8x8 16x16x16 32x16x8 8x8x8; do
  for ms in 128 256 1024; do
    echo "bins $b maxsub $ms: $($R bench-nufft --device cuda --precision f32 --random-points 10000000 --matrix 256 --repeats 3 --tolerance 1e-5 --bins $b --maxsub $ms 2>&1 | tail -1)" >> $o/nufft-sweep.txt
  done
done
# 2. kernels of one NUFFT (ncu)
if command -v ncu >/dev/null; then
  timeout 200 ncu --csv --metrics gpu__time_duration.sum,dram__bytes.sum $R bench-nufft --device cuda --precision f32 --random-points 10000000 --matrix 256 --repeats 1 --tolerance 1e-5 > $o/ncu-nufft.csv 2> $o/ncu-nufft.err
fi
# 3. A run's fixed costs at 256^3 (radial-256 of scripts/peers)
export RECON_CACHE_DIR=/tmp/rc
scan=/tmp/r256.h5
$R simulate --config scripts/peers/radial-256.toml --out $scan > $o/simulate.log 2>&1
run() { d=$1; shift; $R $scan --out /tmp/r256-$d --set engine.device=cuda --set regulariser.kind=uniform --lambda 0.1 --iterations 30 --set solver.tolerance=0 "$@"; }
for i in 1 2 3; do s=$(date +%s.%N); run w$i -q > /dev/null 2>&1; e=$(date +%s.%N); echo "w$i wall $(python3 -c "print(f'{$e - $s:.3f}')") $(python3 -c "import json;s=json.load(open('/tmp/r256-w$i/report.json'))['seconds'];print(' '.join(f'{k} {v:.3f}' for k,v in s.items()))")" >> $o/runs.txt; done
s=$(date +%s.%N); run v -v > $o/run-v.log 2>&1; e=$(date +%s.%N); echo "verbose wall $(python3 -c "print(f'{$e - $s:.3f}')")" >> $o/runs.txt
if command -v strace >/dev/null; then
  strace -f -w -c -o $o/strace-summary.txt bash -c "$(declare -f run); R=$R scan=$scan run sc -q" > /dev/null 2>&1
  strace -f -tt -T -o /tmp/strace-full.txt bash -c "$(declare -f run); R=$R scan=$scan run st -q" > /dev/null 2>&1
  python3 -c "
import re,sys
for l in open('/tmp/strace-full.txt'):
    m=re.search(r'<([0-9.]+)>$', l.strip())
    if m and float(m.group(1)) > 0.004: sys.stdout.write(l)
" > $o/strace-slow.txt
  tail -40 /tmp/strace-full.txt > $o/strace-tail.txt
  wc -l /tmp/strace-full.txt >> $o/strace-slow.txt
fi
cp /tmp/r256-w3/report.json $o/report-w3.json
cd $o && tar czf $OUT/r.tgz . 
