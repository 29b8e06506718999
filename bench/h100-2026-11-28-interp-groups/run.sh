#!/usr/bin/env bash
# On the GPU machine, from the repository root: type 2 with a group of
# lanes a point (.gpu/recon; .gpu/recon-i3 at 3 blocks an SM) against the
# build before (.gpu/recon-old: a thread a point), alternating, 10^7 random points on
# 256^3 at three tolerances; Nsight Compute's counts for both
# interpolations; the GPU tests; recon bench at 128^3 and 256^3.
set -u
source scripts/cuda-libs.sh
o=${OUT:-/tmp/groups}/r; mkdir -p $o
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $o/gpu.txt
B=${BUILDS:-"recon recon-i3 recon-old"}
nb() { .gpu/$1 bench-nufft --device cuda --precision f32 --random-points 10000000 --matrix 256 --repeats 5 --tolerance $2 2>&1 | tail -1; }
for round in $(seq ${ROUNDS:-3}); do
  for tol in ${TOLS:-1e-5 1e-3 1e-6}; do
    for b in $B; do
      echo "round $round tol $tol $b: $(nb $b $tol)" >> $o/bench-nufft.txt
    done
  done
done
if command -v ncu >/dev/null; then
  for b in $B; do
    timeout 120 ncu --csv --clock-control none --metrics gpu__time_duration.sum,smsp__inst_executed.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active,l1tex__data_pipe_lsu_wavefronts.sum,l1tex__data_pipe_lsu_wavefronts.avg.pct_of_peak_sustained_elapsed,dram__bytes.sum \
      --kernel-name regex:"nufft_interp" .gpu/$b bench-nufft --device cuda --precision f32 --random-points 10000000 --matrix 256 --repeats 1 --tolerance 1e-5 2>&1 | grep -v '^==PROF' > $o/ncu-$b.csv
  done
fi
if [ -z "${NOTESTS:-}" ]; then
  export RECON_BIN="$PWD/.gpu/recon" RECON_REPO="$PWD"
  for t in .gpu/tests/*; do "$t" --test-threads=1 > $o/test-$(basename $t).log 2>&1; echo "$(basename $t) rc=$? $(grep -E '^test result' $o/test-$(basename $t).log | tail -1)" >> $o/tests.txt; done
  .gpu/recon bench --device cuda --engines nufft --matrix 128 --iterations 60 --json $o/bench-128.json > $o/bench-128.txt 2>&1
  .gpu/recon bench --device cuda --engines nufft --matrix 256 --samples 1000000 --iterations 30 --json $o/bench-256.json > $o/bench-256.txt 2>&1
fi
cd $o && tar czf $OUT/r.tgz .
