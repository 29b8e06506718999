#!/usr/bin/env bash
# On the GPU machine, from the repository root: the NUFFT (10^7 random
# points on 256^3, f32) with bins and sort-order tiles of other shapes
# (CONFIGS: bins:tiles, 256x256x256 tiles being plain x-fastest order),
# and Nsight Compute's time, DRAM bytes and instructions for every
# kernel of one type 1 and one type 2 (NCU_CONFIGS), build .gpu/recon;
# first, shared-memory atomics' throughput (atoms.cu, built by nvcc there).
set -u
source scripts/cuda-libs.sh
o=${OUT:-/tmp/bins}/r; mkdir -p $o
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $o/gpu.txt
# Shared-memory atomics against plain read-modify-writes (atoms.cu).
if [ -z "${NOATOMS:-}" ] && command -v nvcc >/dev/null; then
  nvcc -O3 -arch=sm_90 -o /tmp/atoms bench/h100-2026-11-28-sort-tiles/atoms.cu && /tmp/atoms > $o/atoms.txt 2>&1
fi
nb() { .gpu/recon bench-nufft --device cuda --precision f32 --random-points 10000000 --matrix 256 --repeats 5 --tolerance $1 --bins ${2%:*} --tiles ${2#*:} 2>&1 | tail -1; }
for round in $(seq ${ROUNDS:-1}); do
  for tol in ${TOLS:-1e-5}; do
    for c in ${CONFIGS:-16x8x8:256x256x256 16x8x8:4x8x8 16x8x8:2x4x4 16x8x8:8x8x8 16x8x8:4x4x4 16x8x8:8x16x16 16x8x4:256x256x256 16x8x4:4x8x16}; do
      echo "round $round tol $tol bins:tiles $c: $(nb $tol $c)" >> $o/bench-nufft.txt
    done
  done
done
if command -v ncu >/dev/null; then
  for c in ${NCU_CONFIGS:-16x8x8:256x256x256 16x8x8:4x8x8}; do
    timeout 200 ncu --csv --clock-control none --metrics gpu__time_duration.sum,smsp__inst_executed.sum,dram__bytes_read.sum,dram__bytes_write.sum,l1tex__data_pipe_lsu_wavefronts.sum \
      .gpu/recon bench-nufft --device cuda --precision f32 --random-points 10000000 --matrix 256 --repeats 1 --tolerance 1e-5 --bins ${c%:*} --tiles ${c#*:} 2>&1 | grep -v '^==PROF' > $o/ncu-${c/:/-}.csv
  done
fi
cd $o && tar czf $OUT/r.tgz .
