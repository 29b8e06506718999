#!/usr/bin/env bash
# On the GPU machine, from the repository root: registers and spills of the
# Toeplitz module's kernels at L = 256 and 512 (nvcc -Xptxas -v, sm_90),
# for the tree's lines.cu and for $OLD (a copy of an earlier lines.cu, e.g.
# zcat bench/h100-2026-11-27-fold/lines-old.cu.gz > /tmp/lines-old.cu).
set -u
export PATH=/usr/local/cuda/bin:$PATH
k=crates/cuda/kernels
for src in $k/lines.cu ${OLD:-}; do
  for L in 256 512; do
    nvcc -cubin -arch=sm_90 -O3 -I $k -DTOEPLITZ=$L -Xptxas -v $src -o /tmp/regs.cubin 2>&1 \
      | awk -v tag="$(basename $src) L=$L" '
          /Compiling entry function/ { match($0, /function .[a-z_0-9]*/); name = substr($0, RSTART + 10, RLENGTH - 10) }
          /spill stores/ { match($0, /[0-9]+ bytes spill stores/); spill = substr($0, RSTART, RLENGTH) }
          /Used [0-9]+ registers/ { match($0, /Used [0-9]+ registers/); print tag ": " name ": " substr($0, RSTART, RLENGTH) ", " spill }'
  done
done
