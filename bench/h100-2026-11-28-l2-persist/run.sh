#!/usr/bin/env bash
# On the GPU machine, from the repository root: `recon bench` at 128^3 (the
# book's problem) and 256^3 (10^6 samples), CG's p without and with a
# persisting L2 access-policy window (RECON_L2_PERSIST=$VARIANTS), alternating
# over $ROUNDS rounds. Results in $OUT/o.tgz.
set -u
source scripts/cuda-libs.sh
o=/tmp/o-l2; rm -rf $o; mkdir -p $o
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee $o/gpu.txt
show() { python3 -c "
import json,sys; d=json.load(open(sys.argv[1])); s=d['stages'][0]
print(sys.argv[2], 'CG %.4f ms' % s['cg_ms_per_iteration'])" "$@"; }
for i in $(seq ${ROUNDS:-3}); do
  for v in off ${VARIANTS:-1}; do
    if [ $v = off ]; then unset RECON_L2_PERSIST; else export RECON_L2_PERSIST=$v; fi
    for n in 128 256; do
      s=""; [ $n = 256 ] && s="--matrix 256 --samples 1000000 --iterations 30"
      .gpu/${BIN:-recon} bench --variants 5 $s --engines nufft --json $o/bench-$n-$v-$i.json > $o/log-$n-$v-$i.txt 2>&1
      show $o/bench-$n-$v-$i.json "$n $v $i" | tee -a $o/table.txt
    done
  done
done
grep -h "L2 window" $o/log-* | sort -u
cp "$0" $o/
tar czf $OUT/o.tgz -C $o .
