#!/usr/bin/env bash
# On the GPU machine, from the repository root: type 1 spread in fixed
# point (--spreading fixed) against the float spreading (shared), 10^7
# random points on 256^3 at three tolerances, alternating; Nsight
# Compute's counts of both spreading kernels at 1e-5; the NUFFT's GPU
# tests (suite_gpu, gpu_nufft).
set -u
source scripts/cuda-libs.sh
o=${OUT:-/tmp/fixed}/r; mkdir -p $o
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $o/gpu.txt
nb() { .gpu/recon bench-nufft --device cuda --precision f32 --random-points 10000000 --matrix 256 --repeats 5 --tolerance $1 --spreading $2 2>&1 | tail -1; }
for round in $(seq ${ROUNDS:-2}); do
  for tol in ${TOLS:-1e-5 1e-3 1e-6}; do
    for s in ${SPREADINGS:-fixed shared}; do
      echo "round $round tol $tol spreading $s: $(nb $tol $s)" >> $o/bench-nufft.txt
    done
  done
done
if command -v ncu >/dev/null; then
  for s in ${SPREADINGS:-fixed shared}; do
    timeout 120 ncu --csv --clock-control none --kernel-name regex:"nufft_spread" --metrics gpu__time_duration.sum,smsp__inst_executed.sum,sm__warps_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread,smsp__issue_active.avg.pct_of_peak_sustained_elapsed,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared.avg.pct_of_peak_sustained_elapsed,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum,lts__t_requests_srcunit_tex_op_red.sum,dram__bytes_read.sum \
      .gpu/recon bench-nufft --device cuda --precision f32 --random-points 10000000 --matrix 256 --repeats 1 --tolerance 1e-5 --spreading $s 2>&1 | grep -v '^==PROF' > $o/ncu-$s.csv
  done
fi
if [ -z "${NOTESTS:-}" ]; then
  .gpu/tests/suite_gpu --test-threads=1 --show-output ${TESTS:-gpu_nufft} > $o/test-suite_gpu.log 2>&1; echo "suite_gpu rc=$? $(grep -E '^test result' $o/test-suite_gpu.log | tail -1)" >> $o/tests.txt
fi
cd $o && tar czf $OUT/r.tgz .
