#!/usr/bin/env bash
# On the GPU machine, from the repository root: `recon bench` at 128^3 and
# 256^3 with .gpu/recon-l2w (the tree with an experimental access policy
# window: RECON_L2_WINDOW=p, r or ap makes that CG vector's accesses persist
# in L2), each setting alternating with none, over 3 rounds.
source scripts/cuda-libs.sh
show() { python3 -c "
import json,sys; d=json.load(open(sys.argv[1])); s=d['stages'][0]
print(sys.argv[2], 'CG %.4f ms' % s['cg_ms_per_iteration'])" "$@"; }
for i in 1 2 3; do
  for w in none p r ap; do
    RECON_L2_WINDOW=$w .gpu/recon-l2w bench --variants 5 --engines nufft --json /tmp/w.json > /dev/null 2> /tmp/w.err
    show /tmp/w.json "128 $w $i"; grep "L2 window" /tmp/w.err | head -1
  done
done
for w in none p; do
  RECON_L2_WINDOW=$w .gpu/recon-l2w bench --variants 5 --matrix 256 --samples 1000000 --iterations 30 --engines nufft --json /tmp/w.json > /dev/null 2> /tmp/w.err
  show /tmp/w.json "256 $w"; grep "L2 window" /tmp/w.err | head -1
done
