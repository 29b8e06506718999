#!/usr/bin/env bash
# On the GPU machine, from the repository root: the builds of $BUILDS
# (in .gpu/; default: recon, the tree, against recon-old, commit 167b0a2,
# before the pruned line FFTs): with TESTS=1 the GPU tests of the tree's
# build first; then `recon bench` at 256^3 (10^6 samples, 30 iterations)
# and 128^3 (the book's problem), and with NUFFT=1 `recon bench-nufft`
# (10^7 random points on 256^3 at 1e-5), alternating over $ROUNDS rounds;
# then with NCU=1 the line kernels of two CG iterations under Nsight
# Compute (clocks not locked) for each build. Results in $OUT/o.tgz.
set -u
source scripts/cuda-libs.sh
export RECON_BIN="$PWD/.gpu/recon" RECON_REPO="$PWD"
o=/tmp/o-pruned; rm -rf $o; mkdir -p $o
BUILDS=${BUILDS:-recon recon-old}
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
      .gpu/$b bench-nufft --device cuda --precision f32 --random-points 10000000 --matrix 256 --repeats 5 --tolerance 1e-5 2>&1 \
        | tail -1 | sed "s/^/nufft $b $i: /" | tee -a $o/table.txt
    fi
  done
done
if [ "${NCU:-0}" = 1 ]; then
  M=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,smsp__inst_executed.sum,launch__registers_per_thread
  for b in $BUILDS; do
    for n in 128 256; do
      s=""; [ $n = 256 ] && s="--samples 1000000"
      timeout 150 ncu --csv --clock-control none --metrics $M --kernel-name regex:"toeplitz_columns|fft_lines" \
        .gpu/$b bench --device cuda --variants 5 --engines nufft --matrix $n $s --iterations 2 2>/dev/null | grep -v '^==' > $o/ncu-$b-$n.csv
    done
  done
fi
cp "$0" $o/
tar czf $OUT/o.tgz -C $o .
cat $o/table.txt
