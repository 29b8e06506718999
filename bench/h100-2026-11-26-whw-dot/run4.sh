#!/usr/bin/env bash
source scripts/cuda-libs.sh
export RECON_BIN="$PWD/.gpu/recon" RECON_REPO="$PWD"
mkdir -p /tmp/o
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee /tmp/o/gpu.txt
for t in gpu_solver gpu_ops gpu gpu_nufft gpu_stack recon_cuda; do
  .gpu/tests/$t --test-threads=1 --show-output > /tmp/o/test-$t.log 2>&1; echo "$t rc=$? $(grep -E '^test result' /tmp/o/test-$t.log | tail -1)" | tee -a /tmp/o/tests.txt
done
grep -E "CG|residual|error" /tmp/o/test-gpu_solver.log | head -20
show() { python3 -c "
import json,sys; d=json.load(open(sys.argv[1])); s=d['stages'][0]
print(sys.argv[2], 'CG %.4f ms, F^H D %.4f s, F^H D + CG %.4f s' % (s['cg_ms_per_iteration'], s['fhd_seconds'], s['fhd_plus_cg_seconds']))" "$@"; }
for i in 1 2 3; do
  for b in recon recon-cols; do
    .gpu/$b bench --variants 5 --matrix 256 --samples 1000000 --iterations 30 --engines nufft --json /tmp/o/bench-256-$b-$i.json > /dev/null 2>&1
    show /tmp/o/bench-256-$b-$i.json "256 $b $i" | tee -a /tmp/o/table.txt
    .gpu/$b bench --variants 5 --engines nufft --json /tmp/o/bench-128-$b-$i.json > /dev/null 2>&1
    show /tmp/o/bench-128-$b-$i.json "128 $b $i" | tee -a /tmp/o/table.txt
  done
done
cp .gpu/run4.sh /tmp/o/
tar czf $OUT/run4.tgz -C /tmp/o .
