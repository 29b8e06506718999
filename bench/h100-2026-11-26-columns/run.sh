#!/usr/bin/env bash
source scripts/cuda-libs.sh
export RECON_BIN="$PWD/.gpu/recon" RECON_REPO="$PWD"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee $OUT/gpu.txt
for t in gpu_solver gpu_ops gpu recon_cuda; do
  .gpu/tests/$t --test-threads=1 --show-output > $OUT/test-$t.log 2>&1; echo "$t rc=$? $(grep -E '^test result' $OUT/test-$t.log | tail -1)"
done
grep -E "Toeplitz \[(8, 8, 256|16, 8, 128)\] pruned" $OUT/test-gpu_solver.log
show() { python3 -c "
import json,sys; d=json.load(open(sys.argv[1])); s=d['stages'][0]
print(sys.argv[2], 'CG %.4f ms, F^H D %.4f s, F^H D + CG %.4f s' % (s['cg_ms_per_iteration'], s['fhd_seconds'], s['fhd_plus_cg_seconds']))" "$@"; }
for i in 1 2 3; do
  for b in recon recon-old; do
    .gpu/$b bench --variants 5 --matrix 256 --samples 1000000 --iterations 30 --engines nufft --json $OUT/bench-256-$b-$i.json > /dev/null 2>&1
    show $OUT/bench-256-$b-$i.json "256 $b $i" | tee -a $OUT/table.txt
    .gpu/$b bench --variants 5 --engines nufft --json $OUT/bench-128-$b-$i.json > /dev/null 2>&1
    show $OUT/bench-128-$b-$i.json "128 $b $i" | tee -a $OUT/table.txt
  done
done
