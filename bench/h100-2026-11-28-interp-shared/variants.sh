#!/usr/bin/env bash
# On the GPU machine, from the repository root, with .gpu/recon built from
# an experiment's tree (RECON_INTERP_THREADS and RECON_INTERP_PERSISTENT
# read by execute.rs): type 2 at TOLS, the global interpolation against
# the shared one in each of VARIANTS ("threads:persistent"), ROUNDS
# rounds; then Nsight Compute's counts of each variant at 1e-5.
source scripts/cuda-libs.sh
nb() { .gpu/recon bench-nufft --device cuda --precision f32 --random-points 10000000 --matrix 256 --repeats 5 --tolerance $1 --interpolation $2 2>&1 | tail -1 | python3 -c "import json,sys; d=json.load(sys.stdin); print('type2 %.3f type1 %.3f' % (d['type2_s']*1e3, d['type1_s']*1e3))"; }
run() { local th=${1%%:*} per=${1##*:}; if [ "$per" = 1 ]; then RECON_INTERP_PERSISTENT=1 RECON_INTERP_THREADS=$th "${@:2}"; else RECON_INTERP_THREADS=$th "${@:2}"; fi; }
nvidia-smi --query-gpu=name --format=csv,noheader
for r in $(seq ${ROUNDS:-2}); do for tol in ${TOLS:-1e-5 1e-3}; do
 echo "$tol global $(nb $tol global)"
 for v in ${VARIANTS:-256:0 128:0}; do echo "$tol shared $v $(run $v nb $tol shared)"; done
done; done
[ -n "${NO_NCU:-}" ] && exit 0
for v in ${VARIANTS:-256:0 128:0}; do run $v timeout 100 ncu --csv --clock-control none --kernel-name regex:"nufft_interpolate" --metrics gpu__time_duration.sum,smsp__inst_executed.sum,sm__warps_active.avg.pct_of_peak_sustained_active,smsp__issue_active.avg.pct_of_peak_sustained_elapsed,l1tex__data_pipe_lsu_wavefronts.sum,l1tex__data_pipe_lsu_wavefronts.avg.pct_of_peak_sustained_elapsed .gpu/recon bench-nufft --device cuda --precision f32 --random-points 10000000 --matrix 256 --repeats 1 --tolerance 1e-5 --interpolation shared 2>&1 | grep '^"' | awk -F'","' -v v=$v '{print v, $13, $15}' | grep -v Metric; done
