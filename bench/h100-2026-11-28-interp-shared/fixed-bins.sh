#!/usr/bin/env bash
# On the GPU machine, from the repository root, with .gpu/recon built from
# the experiment's tree (execute.rs taking nufft_spread_fixed_point_W_16x8x8,
# the bins as constants, where RECON_FIXED_BINS is set): type 1 at TOLS,
# the fixed-point spreading with the bins from the geometry against the
# bins as constants, ROUNDS rounds; then Nsight Compute's counts of both
# at 1e-5.
source scripts/cuda-libs.sh
nb() { .gpu/recon bench-nufft --device cuda --precision f32 --random-points 10000000 --matrix 256 --repeats 5 --tolerance $1 2>&1 | tail -1 | python3 -c "import json,sys; d=json.load(sys.stdin); print('type1 %.3f type2 %.3f' % (d['type1_s']*1e3, d['type2_s']*1e3))"; }
nvidia-smi --query-gpu=name --format=csv,noheader
for r in $(seq ${ROUNDS:-2}); do for tol in ${TOLS:-1e-5 1e-3}; do
  echo "$tol geometry $(nb $tol)"
  echo "$tol constants $(RECON_FIXED_BINS=1 nb $tol)"
done; done
for v in geometry constants; do
  if [ $v = constants ]; then export RECON_FIXED_BINS=1; fi
  timeout 100 ncu --csv --clock-control none --kernel-name regex:"nufft_spread" --metrics gpu__time_duration.sum,smsp__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_elapsed,l1tex__data_pipe_lsu_wavefronts_mem_shared.avg.pct_of_peak_sustained_elapsed .gpu/recon bench-nufft --device cuda --precision f32 --random-points 10000000 --matrix 256 --repeats 1 --tolerance 1e-5 2>&1 | grep '^"' | awk -F'","' -v v=$v '{print v, $5, $13, $15}' | grep -v Metric
done
