#!/usr/bin/env bash
# On the GPU machine, from the repository root, with .gpu/recon built from
# an experiment's tree (RECON_INTERP_THREADS read by execute.rs): type 2
# (and type 1) at 1e-5 and 1e-3, the global interpolation against the
# shared one at THREADS threads a block, two rounds; then Nsight Compute's
# counts of the shared interpolation at each.
source scripts/cuda-libs.sh
nb() { .gpu/recon bench-nufft --device cuda --precision f32 --random-points 10000000 --matrix 256 --repeats 5 --tolerance $1 --interpolation $2 2>&1 | tail -1 | python3 -c "import json,sys; d=json.load(sys.stdin); print('type2', d['type2_s']*1e3, 'type1', d['type1_s']*1e3)"; }
nvidia-smi --query-gpu=name --format=csv,noheader
for r in 1 2; do for tol in ${TOLS:-1e-5 1e-3}; do
 echo "$tol global $(nb $tol global)"
 for th in ${THREADS:-128 256}; do echo "$tol shared $th $(RECON_INTERP_THREADS=$th nb $tol shared)"; done
done; done
[ -n "${NO_NCU:-}" ] && exit 0
for th in ${THREADS:-128 256}; do RECON_INTERP_THREADS=$th timeout 100 ncu --csv --clock-control none --kernel-name regex:"nufft_interpolate" --metrics gpu__time_duration.sum,smsp__inst_executed.sum,sm__warps_active.avg.pct_of_peak_sustained_active,smsp__issue_active.avg.pct_of_peak_sustained_elapsed,l1tex__data_pipe_lsu_wavefronts.sum,l1tex__data_pipe_lsu_wavefronts.avg.pct_of_peak_sustained_elapsed,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum,lts__t_bytes.sum,dram__bytes_read.sum .gpu/recon bench-nufft --device cuda --precision f32 --random-points 10000000 --matrix 256 --repeats 1 --tolerance 1e-5 --interpolation shared 2>&1 | grep '^"' | awk -F'","' -v th=$th '{print th, $5, $13, $15}'; done
