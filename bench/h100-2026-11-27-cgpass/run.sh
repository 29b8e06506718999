#!/usr/bin/env bash
# On the GPU machine, from the repository root: each kernel of a CG
# iteration at 128^3 and 256^3 under Nsight Compute (time, DRAM and L2
# bytes, clocks not locked), and a warm radial-256 run's time outside its
# stages (process start and exit, the outputs' sync).
set -u
source scripts/cuda-libs.sh
o=$OUT/r; mkdir -p $o
R=.gpu/recon
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv > $o/gpu.txt
uname -r >> $o/gpu.txt
K='regex:fft_lines|toeplitz_columns|whw|axpy|cg_update|sum_partials|xpby|dot_partial'
M=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_bytes.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed
for n in 128 256; do
  s=""; [ $n = 256 ] && s="--samples 1000000"
  timeout 240 ncu --csv --clock-control none --metrics $M --kernel-name "$K" \
    $R bench --device cuda --variants 5 --engines nufft --matrix $n $s --iterations 4 > $o/ncu-$n.csv 2> $o/ncu-$n.err
done
# Process start and exit
python3 - > $o/process.txt <<'PY'
import subprocess, time
for i in range(3):
    t = time.perf_counter(); subprocess.run([".gpu/recon", "--version"], capture_output=True); print("version", f"{time.perf_counter() - t:.3f}")
PY
export RECON_CACHE_DIR=/tmp/rc
scan=/tmp/r256.h5
$R simulate --config scripts/peers/radial-256.toml --out $scan > /dev/null 2>&1
for i in 0 1 2 3; do
  s=$(date +%s.%N)
  $R $scan --out /tmp/r256-$i --set engine.device=cuda --set regulariser.kind=uniform --lambda 0.1 --iterations 30 --set solver.tolerance=0 -v > $o/run-v$i.log 2>&1
  e=$(date +%s.%N)
  echo "run $i wall $(python3 -c "print(f'{$e - $s:.3f}')") $(grep -h 'after the start' $o/run-v$i.log | tr '\n' ' ') $(python3 -c "import json;s=json.load(open('/tmp/r256-$i/report.json'))['seconds'];print(' '.join(f'{k} {v:.3f}' for k,v in s.items()))")" >> $o/runs.txt
done
ls -la /tmp/r256-3 >> $o/runs.txt
# The disk: 700 MB written, with and without fsync
for f in 0 1; do
  s=$(date +%s.%N)
  if [ $f = 1 ]; then dd if=/dev/zero of=/tmp/dd.bin bs=1M count=700 conv=fsync 2>/dev/null; else dd if=/dev/zero of=/tmp/dd.bin bs=1M count=700 2>/dev/null; fi
  e=$(date +%s.%N); echo "dd 700 MB fsync=$f $(python3 -c "print(f'{$e - $s:.3f}')")" >> $o/runs.txt
  rm -f /tmp/dd.bin
done
df -h /tmp >> $o/runs.txt; mount | grep -E ' /tmp | / ' >> $o/runs.txt
cat $o/runs.txt
cd $o && tar czf $OUT/r.tgz .
