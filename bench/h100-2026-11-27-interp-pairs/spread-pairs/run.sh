#!/usr/bin/env bash
# On the GPU machine, from the repository root: type 1 spreading by pairs of
# cells (.gpu/recon-pairs, spread-pairs.diff) against the build before
# (.gpu/recon), alternating; Nsight Compute on both spreadings.
source scripts/cuda-libs.sh
for round in 1 2; do for tol in 1e-5 1e-3 1e-6; do for b in recon-pairs recon; do
  echo "round $round tol $tol $b: $(.gpu/$b bench-nufft --device cuda --precision f32 --random-points 10000000 --matrix 256 --repeats 5 --tolerance $tol 2>&1 | tail -1)"
done; done; done > $OUT/bench-nufft.txt
for b in recon-pairs recon; do
  timeout 120 ncu --csv --clock-control none --metrics gpu__time_duration.sum,smsp__inst_executed.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum \
    --kernel-name regex:"nufft_spread" .gpu/$b bench-nufft --device cuda --precision f32 --random-points 10000000 --matrix 256 --repeats 1 --tolerance 1e-5 2>&1 | grep -v '^==PROF' > $OUT/ncu-$b.csv
done
