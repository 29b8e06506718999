#!/usr/bin/env bash
# On the GPU machine, from the repository root, the builds of $BUILDS in
# .gpu/ (default: recon): with TESTS=1 the GPU tests of .gpu/tests first;
# then `recon bench` at 256^3 (10^6 samples, 30 iterations) and 128^3
# (the book's problem), and with NUFFT=1 `recon bench-nufft` (10^7 random
# points on 256^3 at 1e-5 and 1e-3), alternating over $ROUNDS rounds;
# with GAPS=1 the CG kernels at 128^3 and 256^3 under Nsight Compute,
# summed per iteration by gaps.py. Results in $OUT/o.tgz.
set -u
source scripts/cuda-libs.sh
export RECON_BIN="$PWD/.gpu/recon" RECON_REPO="$PWD"
export PATH=$PATH:/usr/local/cuda/bin:/opt/nvidia/nsight-systems/bin
o=/tmp/o-gaps; rm -rf $o; mkdir -p $o
d=bench/h100-2026-11-27-gaps
BUILDS=${BUILDS:-recon}
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee $o/gpu.txt
if [ "${TESTS:-0}" = 1 ]; then
  for t in suite_gpu recon_cuda; do
    .gpu/tests/$t --test-threads=1 --show-output > $o/test-$t.log 2>&1
    echo "$t rc=$? $(grep -E '^test result' $o/test-$t.log | tail -1)" | tee -a $o/tests.txt
  done
  grep -E "^test .*FAILED|panicked" $o/test-*.log | head
fi
show() { python3 -c "
import json,sys; d=json.load(open(sys.argv[1])); s=d['stages'][0]
print(sys.argv[2], 'CG %.4f ms, F^H D %.4f s, F^H D + CG %.4f s' % (s['cg_ms_per_iteration'], s['fhd_seconds'], s['fhd_plus_cg_seconds']))" "$@"; }
for i in $(seq ${ROUNDS:-3}); do
  for b in $BUILDS; do
    .gpu/$b bench --variants 5 --matrix 256 --samples 1000000 --iterations 30 --engines nufft --json $o/bench-256-$b-$i.json > /dev/null 2>&1
    show $o/bench-256-$b-$i.json "256 $b $i" | tee -a $o/table.txt
    .gpu/$b bench --variants 5 --engines nufft --json $o/bench-128-$b-$i.json > /dev/null 2>&1
    show $o/bench-128-$b-$i.json "128 $b $i" | tee -a $o/table.txt
    if [ "${NUFFT:-0}" = 1 ]; then
      for tol in 1e-5 1e-3; do
        .gpu/$b bench-nufft --device cuda --precision f32 --random-points 10000000 --matrix 256 --repeats 5 --tolerance $tol 2>&1 \
          | tail -1 | sed "s/^/nufft $tol $b $i: /" | tee -a $o/table.txt
      done
    fi
  done
done
if [ "${GAPS:-0}" = 1 ]; then
  # No Nsight Systems on the machine: each kernel's time under Nsight
  # Compute with caches and clocks left alone (one pass, one metric), the
  # CG kernels of `recon bench --iterations 4`; gaps.py sums an
  # iteration's kernels, to be set against the bench's time per iteration.
  K='regex:fft_lines|toeplitz_columns|whw|axpy|cg_update|sum_partials|xpby|dot_partial'
  for b in $BUILDS; do
    for n in 128 256; do
      s=""; [ $n = 256 ] && s="--samples 1000000"
      timeout 200 ncu --csv --cache-control none --clock-control none --metrics gpu__time_duration.sum --kernel-name "$K" \
        .gpu/$b bench --device cuda --variants 5 --engines nufft --matrix $n $s --iterations 4 2>$o/ncu-$b-$n.err | grep -v '^==' > $o/ncu-$b-$n.csv
      python3 $d/gaps.py $o/ncu-$b-$n.csv 2>&1 | sed "s/^/$b $n: /" | tee -a $o/gaps.txt
    done
  done
fi
cp "$0" $o/
tar czf $OUT/o.tgz -C $o .
cat $o/table.txt
