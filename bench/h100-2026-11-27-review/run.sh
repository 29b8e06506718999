#!/usr/bin/env bash
# On the GPU machine, from the repository root: the GPU tests of the
# reviewed build (.gpu/), its NUFFT beside the morning's build
# (.gpu/recon-base, d1e20a9) alternating, and F^H D in recon bench (the pool
# kept) on the 256^3 problem.
set -u
source scripts/cuda-libs.sh
o=${OUT:-/tmp/review}/r; mkdir -p $o
nvidia-smi --query-gpu=name,driver_version --format=csv > $o/gpu.txt
export RECON_BIN="$PWD/.gpu/recon" RECON_REPO="$PWD"
for t in .gpu/tests/*; do "$t" --test-threads=1 > $o/test-$(basename $t).log 2>&1; echo "$(basename $t) rc=$? $(grep -E '^test result' $o/test-$(basename $t).log | tail -1)" >> $o/tests.txt; done
for round in 1 2; do
  for b in recon-base recon; do
    echo "round $round $b: $(.gpu/$b bench-nufft --device cuda --precision f32 --random-points 10000000 --matrix 256 --repeats 5 --tolerance 1e-5 2>&1 | tail -1)" >> $o/bench-nufft.txt
  done
done
.gpu/recon bench --device cuda --engines nufft --matrix 256 --samples 1000000 --iterations 30 > $o/bench-256.txt 2>&1
cd $o && tar czf $OUT/r.tgz .
