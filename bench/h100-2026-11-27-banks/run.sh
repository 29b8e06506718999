#!/usr/bin/env bash
# On the GPU machine, from the repository root: `recon bench` at 256^3 and
# 128^3, this build (.gpu/recon) against the build before (.gpu/recon-old)
# or the builds named in BUILDS, alternating on one lease, then one CG
# iteration's line kernels under Nsight Compute (clocks not locked) for
# each. With TESTS=1, the GPU tests first.
set -u
source scripts/cuda-libs.sh
export RECON_BIN="$PWD/.gpu/recon" RECON_REPO="$PWD"
o=/tmp/o; mkdir -p $o
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
for i in 1 2 3; do
  for b in ${BUILDS:-recon recon-old}; do
    .gpu/$b bench --variants 5 --matrix 256 --samples 1000000 --iterations 30 --engines nufft --json $o/bench-256-$b-$i.json > /dev/null 2>&1
    show $o/bench-256-$b-$i.json "256 $b $i" | tee -a $o/table.txt
    .gpu/$b bench --variants 5 --engines nufft --json $o/bench-128-$b-$i.json > /dev/null 2>&1
    show $o/bench-128-$b-$i.json "128 $b $i" | tee -a $o/table.txt
  done
done
M=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum,launch__registers_per_thread
for b in ${BUILDS:-recon recon-old}; do
  for n in 128 256; do
    s=""; [ $n = 256 ] && s="--samples 1000000"
    timeout 150 ncu --csv --clock-control none --metrics $M --kernel-name regex:"toeplitz_columns|fft_lines" \
      .gpu/$b bench --device cuda --variants 5 --engines nufft --matrix $n $s --iterations 2 2>/dev/null | grep -v '^==' > $o/ncu-$b-$n.csv
  done
done
# The kernels' machine code (the cubins a run keeps in its cache)
if [ "${SASS:-0}" = 1 ]; then
  RECON_CACHE_DIR=/tmp/kc .gpu/recon bench --device cuda --variants 5 --engines nufft --matrix 256 --samples 1000000 --iterations 2 > /dev/null 2>&1
  # A kernel file: 16 bytes of magic and a 32-byte SHA-256, then the cubin.
  cuobjdump=$(command -v cuobjdump || ls /usr/local/cuda*/bin/cuobjdump | head -1)
  for f in /tmp/kc/kernel-*.cubin; do tail -c +49 $f > /tmp/k.cubin; $cuobjdump -sass /tmp/k.cubin; done > $o/sass.txt 2>&1
  gzip $o/sass.txt
fi
cp "$0" $o/
tar czf $OUT/o.tgz -C $o .
cat $o/table.txt
