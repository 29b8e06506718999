#!/usr/bin/env bash
# On the GPU machine, from the repository root: type 1 spreading with a
# row of the bin's copy per thread in registers (.gpu/recon) against the
# build before (.gpu/recon-old, cells in shared memory), alternating, 10^7
# random points on 256^3, three tolerances; type 2 of builds whose
# interpolation has launch bounds for 3 and 4 blocks an SM (.gpu/recon-i3,
# .gpu/recon-i4); Nsight Compute's counts for the new spreading; the GPU
# tests; recon bench at 256^3 (F^H D is a type 1).
set -u
source scripts/cuda-libs.sh
o=${OUT:-/tmp/rows}/r; mkdir -p $o
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $o/gpu.txt
B=${BUILDS:-"recon recon-old recon-i3 recon-i4"}
nb() { .gpu/$1 bench-nufft --device cuda --precision f32 --random-points 10000000 --matrix 256 --repeats 5 --tolerance $2 2>&1 | tail -1; }
for round in $(seq ${ROUNDS:-3}); do
  for tol in ${TOLS:-1e-5 1e-3 1e-6}; do
    for b in $B; do
      [ -x .gpu/$b ] && echo "round $round tol $tol $b: $(nb $b $tol)" >> $o/bench-nufft.txt
    done
  done
done
# Bins and subproblem sizes for the new spreading (type 1 at 1e-5)
[ -z "${NOSWEEP:-}" ] && for bins in 16x8x8 16x4x8 16x8x4 16x4x4 8x8x8 16x16x8 16x8x16; do
  for ms in 64 128 256; do
    echo "bins $bins maxsub $ms: $(.gpu/recon bench-nufft --device cuda --precision f32 --random-points 10000000 --matrix 256 --repeats 3 --tolerance 1e-5 --bins $bins --maxsub $ms 2>&1 | tail -1 | grep -o '"type1_s": [0-9.e-]*')" >> $o/sweep.txt
  done
done
if command -v ncu >/dev/null; then
  for b in ${NCU_BUILDS:-recon recon-old}; do
    timeout 120 ncu --csv --clock-control none --metrics gpu__time_duration.sum,smsp__inst_executed.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active,lts__t_sectors_op_red.sum,dram__bytes.sum \
      --kernel-name regex:"nufft_spread|nufft_interp" .gpu/$b bench-nufft --device cuda --precision f32 --random-points 10000000 --matrix 256 --repeats 1 --tolerance 1e-5 2>&1 | grep -v '^==PROF' > $o/ncu-$b.csv
  done
fi
if [ -z "${NOTESTS:-}" ]; then
  export RECON_BIN="$PWD/.gpu/recon" RECON_REPO="$PWD"
  for t in .gpu/tests/*; do "$t" --test-threads=1 > $o/test-$(basename $t).log 2>&1; echo "$(basename $t) rc=$? $(grep -E '^test result' $o/test-$(basename $t).log | tail -1)" >> $o/tests.txt; done
  for b in recon recon-old; do
    .gpu/$b bench --device cuda --engines nufft --matrix 256 --samples 1000000 --iterations 30 --json $o/bench-256-$b.json > $o/bench-256-$b.txt 2>&1
  done
fi
cat $o/tests.txt 2>/dev/null
cat $o/sweep.txt 2>/dev/null
sed -e 's/"device".*"tolerance"/"tolerance"/' $o/bench-nufft.txt | cut -c1-230
tar czf $OUT/r.tgz -C $o .
