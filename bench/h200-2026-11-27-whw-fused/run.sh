#!/usr/bin/env bash
# On the GPU machine, from the repository root: CG with W^H W and <p, A p>
# taken along by the Toeplitz product's last pass (.gpu/recon) against the
# build before (.gpu/recon-main, their own pass), alternating: recon bench
# at 128^3 and 256^3, each kernel of an iteration under Nsight Compute, and
# the GPU tests.
set -u
source scripts/cuda-libs.sh
o=${OUT:-/tmp/whw}/r; mkdir -p $o
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $o/gpu.txt
for round in 1 2; do
  for b in recon recon-main; do
    .gpu/$b bench --device cuda --variants 5 --engines nufft --matrix 128 --iterations 60 --json $o/bench-128-$b-$round.json > $o/bench-128-$b-$round.txt 2>&1
    .gpu/$b bench --device cuda --variants 5 --engines nufft --matrix 256 --samples 1000000 --iterations 30 --json $o/bench-256-$b-$round.json > $o/bench-256-$b-$round.txt 2>&1
  done
done
if command -v ncu >/dev/null; then
  K='regex:fft_lines|toeplitz_columns|whw|axpy|cg_update|sum_partials|dot_partial'
  M=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum
  for b in recon recon-main; do
    for n in 128 256; do
      s=""; [ $n = 256 ] && s="--samples 1000000"
      timeout 150 ncu --csv --clock-control none --metrics $M --kernel-name "$K" \
        .gpu/$b bench --device cuda --variants 5 --engines nufft --matrix $n $s --iterations 4 2>/dev/null | grep -v '^==PROF' > $o/ncu-$n-$b.csv
    done
  done
fi
export RECON_BIN="$PWD/.gpu/recon" RECON_REPO="$PWD"
for t in .gpu/tests/*; do "$t" --test-threads=1 > $o/test-$(basename $t).log 2>&1; echo "$(basename $t) rc=$? $(grep -E '^test result' $o/test-$(basename $t).log | tail -1)" >> $o/tests.txt; done
cat $o/tests.txt
grep -h "regularised_map_and_dot" -A0 $o/test-suite_gpu.log
for f in $o/bench-*.txt; do echo "$(basename $f) $(grep '^nufft' $f | awk '{print $(NF-1)}')"; done
cd $o && tar czf $OUT/r.tgz .
