#!/usr/bin/env bash
# On the GPU machine, from the repository root: `recon bench`'s CG time per
# iteration, alternating over $BUILDS (default "recon:chained recon:plain":
# a build in .gpu/ and its --launches, or a build alone for one without the
# flag), $ROUNDS rounds at each size of $SIZES (128: the book's problem;
# 256: 10^6 samples, 30 iterations); then each one's median. Results in
# $OUT/cg.tgz.
set -u
source scripts/cuda-libs.sh
export RECON_BIN="$PWD/.gpu/recon" RECON_REPO="$PWD"
o=/tmp/cg; rm -rf $o; mkdir -p $o
BUILDS=${BUILDS:-recon:chained recon:plain}
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee $o/gpu.txt
for n in ${SIZES:-128 256}; do
  args=(--variants 5 --engines nufft)
  [ $n = 256 ] && args+=(--matrix 256 --samples 1000000 --iterations 30)
  for i in $(seq ${ROUNDS:-8}); do
    for v in $BUILDS; do
      b=${v%%:*}; l=; [ "$b" != "$v" ] && l="--launches ${v#*:}"
      .gpu/$b bench "${args[@]}" $l --json $o/bench-$n-${v/:/-}-$i.json > /dev/null 2>&1
      python3 -c "import json,sys; print('$n $v $i %.4f' % json.load(open(sys.argv[1]))['stages'][0]['cg_ms_per_iteration'])" \
        $o/bench-$n-${v/:/-}-$i.json | tee -a $o/cg.txt
    done
  done
done
python3 - $o/cg.txt <<'PY' | tee $o/medians.txt
import sys, statistics as st
rows = [l.split() for l in open(sys.argv[1])]
for n in sorted({r[0] for r in rows}, key=int):
    for b in dict.fromkeys(r[1] for r in rows):
        v = sorted(float(r[3]) for r in rows if r[0] == n and r[1] == b)
        print(f"{n}^3 {b}: median {st.median(v):.4f} ms, mean {st.mean(v):.4f}, range {v[0]:.4f} to {v[-1]:.4f} ({len(v)} runs)")
PY
cp "$0" $o/
tar czf ${OUT:-/tmp}/cg.tgz -C $o .
