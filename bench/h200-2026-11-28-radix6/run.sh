#!/usr/bin/env bash
# On the GPU machine, from the repository root, with this build in .gpu/recon
# and the build before as .gpu/recon-base: recon bench-nufft (10^7 random
# points on 256^3, f32, best of 5) at TOLS, both builds alternating, ROUNDS
# rounds; Nsight Compute's times of both builds' line FFTs at 1e-5 (unless
# NO_NCU); then the GPU test binaries named in TESTS. Results in $OUT/r.tgz.
set -u
source scripts/cuda-libs.sh
o=${OUT:-/tmp/radix6}/r; mkdir -p $o
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $o/gpu.txt
nb() { local b=$1 tol=$2; shift 2; .gpu/$b bench-nufft --device cuda --precision f32 --random-points 10000000 --matrix 256 --repeats 5 --tolerance $tol "$@" 2>&1 | tail -1; }
for round in $(seq ${ROUNDS:-2}); do
  for tol in ${TOLS:-1e-5 1e-4}; do
    for b in ${BUILDS:-recon recon-base}; do
      echo "round $round tol $tol $b: $(nb $b $tol)" >> $o/bench-nufft.txt
    done
  done
done
if command -v ncu >/dev/null && [ -z "${NO_NCU:-}" ]; then
  for b in ${BUILDS:-recon recon-base}; do
    timeout 120 ncu --csv --clock-control none -k regex:fft_lines --metrics gpu__time_duration.sum,smsp__inst_executed.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum,dram__bytes.sum \
      .gpu/$b bench-nufft --device cuda --precision f32 --random-points 10000000 --matrix 256 --repeats 1 --tolerance 1e-5 2>&1 | grep -v '^==PROF' > $o/ncu-$b.csv
  done
fi
export RECON_BIN="$PWD/.gpu/recon" RECON_REPO="$PWD"
for t in ${TESTS:-}; do
  .gpu/tests/$t --test-threads=1 --show-output > $o/test-$t.log 2>&1
  echo "$t rc=$? $(grep -E '^test result' $o/test-$t.log | tail -1)" >> $o/tests.txt
  sed -i "s#$PWD#<repo>#g" $o/test-$t.log
  (cd $o && tar czf $OUT/r.tgz .)
done
cd $o && tar czf $OUT/r.tgz .
