#!/usr/bin/env bash
# On the GPU machine, from the repository root: recon bench-nufft (10^7 random
# points on 256^3, 1e-5 and 1e-3) for the builds of $BUILDS in .gpu/, alternating.
source scripts/cuda-libs.sh
for i in 1 2 3; do for b in ${BUILDS:-recon}; do
  for tol in 1e-5 1e-3; do
  echo "$tol $b $i $(.gpu/$b bench-nufft --device cuda --precision f32 --random-points 10000000 --matrix 256 --repeats 5 --tolerance $tol 2>&1 | tail -1 | python3 -c 'import json,sys; j=json.loads(sys.stdin.read()); print("type1 %.2f ms type2 %.2f ms" % (j["type1_s"]*1e3, j["type2_s"]*1e3))')"
  done
done; done
