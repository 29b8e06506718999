#!/usr/bin/env bash
# On the GPU machine, from the repository root, with .gpu/ from
# scripts/gpu-build.sh and a build to compare with beside it (BINS names
# the binaries in .gpu/, default recon and recon-base):
# recon bench-nufft (10^7 random points on 256^3, f32, best of 5) at TOLS
# with each binary alternating, ROUNDS rounds; Nsight Compute's counts of
# both builds' spreading kernels at 1e-5 (KERNEL: a regex of others); the GPU tests of the build
# (TESTS=1: every test binary; or TESTS="suite_gpu recon": those).
set -u
source scripts/cuda-libs.sh
o=${OUT:-/tmp/fixed}/r; mkdir -p $o
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $o/gpu.txt
nb() { .gpu/$2 bench-nufft --device cuda --precision f32 --random-points 10000000 --matrix 256 --repeats 5 --tolerance $1 2>&1 | tail -1; }
for round in $(seq ${ROUNDS:-2}); do
  for tol in ${TOLS:-1e-5 1e-3 1e-6}; do
    for b in ${BINS:-recon recon-base}; do
      echo "round $round tol $tol $b: $(nb $tol $b)" >> $o/bench-nufft.txt
    done
  done
done
if command -v ncu >/dev/null && [ -z "${NO_NCU:-}" ]; then
  for b in ${BINS:-recon recon-base}; do
    timeout 150 ncu --csv --clock-control none --kernel-name regex:"${KERNEL:-nufft_spread}" --metrics gpu__time_duration.sum,smsp__inst_executed.sum,sm__warps_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread,launch__occupancy_limit_shared_mem,smsp__issue_active.avg.pct_of_peak_sustained_elapsed,l1tex__data_pipe_lsu_wavefronts.sum,l1tex__data_pipe_lsu_wavefronts.avg.pct_of_peak_sustained_elapsed,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum,lts__t_bytes.sum \
      .gpu/$b bench-nufft --device cuda --precision f32 --random-points 10000000 --matrix 256 --repeats 1 --tolerance 1e-5 2>&1 | grep -v '^==PROF' > $o/ncu-$b.csv
  done
fi
if [ -n "${TESTS:-}" ]; then
  export RECON_BIN="$PWD/.gpu/recon" RECON_REPO="$PWD"
  [ "$TESTS" = 1 ] && TESTS=$(ls .gpu/tests)
  for t in $(for n in $TESTS; do echo .gpu/tests/$n; done); do "$t" --test-threads=1 --show-output ${TEST_FILTER:-} > $o/test-$(basename $t).log 2>&1; echo "$(basename $t) rc=$? $(grep -E '^test result' $o/test-$(basename $t).log | tail -1)" >> $o/tests.txt; done
  sed -i "s#$PWD#<repo>#g" $o/test-*.log
fi
cd $o && tar czf $OUT/r.tgz .
