#!/usr/bin/env bash
# On the GPU machine, from the repository root: the GPU tests of this
# build, then `recon bench` at 256^3 and 128^3, this build (.gpu/recon)
# against the build before (.gpu/recon-old), alternating on one lease, and
# the z columns under Nsight Compute (clocks not locked) for both.
set -u
source scripts/cuda-libs.sh
export RECON_BIN="$PWD/.gpu/recon" RECON_REPO="$PWD"
o=/tmp/o; mkdir -p $o
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee $o/gpu.txt
for t in suite_gpu recon_cuda; do
  .gpu/tests/$t --test-threads=1 --show-output > $o/test-$t.log 2>&1
  echo "$t rc=$? $(grep -E '^test result' $o/test-$t.log | tail -1)" | tee -a $o/tests.txt
done
grep -E "^test .*FAILED|panicked" $o/test-*.log | head
show() { python3 -c "
import json,sys; d=json.load(open(sys.argv[1])); s=d['stages'][0]
print(sys.argv[2], 'CG %.4f ms, F^H D %.4f s, F^H D + CG %.4f s' % (s['cg_ms_per_iteration'], s['fhd_seconds'], s['fhd_plus_cg_seconds']))" "$@"; }
for i in 1 2 3; do
  for b in recon recon-old; do
    .gpu/$b bench --variants 5 --matrix 256 --samples 1000000 --iterations 30 --engines nufft --json $o/bench-256-$b-$i.json > /dev/null 2>&1
    show $o/bench-256-$b-$i.json "256 $b $i" | tee -a $o/table.txt
    .gpu/$b bench --variants 5 --engines nufft --json $o/bench-128-$b-$i.json > /dev/null 2>&1
    show $o/bench-128-$b-$i.json "128 $b $i" | tee -a $o/table.txt
  done
done
M=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed
for b in recon recon-old; do
  for n in 128 256; do
    s=""; [ $n = 256 ] && s="--samples 1000000"
    timeout 120 ncu --csv --clock-control none --metrics $M --kernel-name regex:toeplitz_columns --launch-count 3 \
      .gpu/$b bench --device cuda --variants 5 --engines nufft --matrix $n $s --iterations 4 2>/dev/null | grep -v '^==' > $o/ncu-$b-$n.csv
  done
done
cp bench/h100-2026-11-27-columns-async/run.sh $o/
tar czf $OUT/o.tgz -C $o .
cat $o/table.txt
