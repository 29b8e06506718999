set -uo pipefail
source scripts/cuda-libs.sh
export RECON_CACHE_DIR=/tmp/recon-wall-cache
bin=.gpu/recon
scan=/tmp/recon-wall-radial-256.h5
[ -f "$scan" ] || $bin simulate --config scripts/peers/radial-256.toml --out "$scan" > /dev/null 2>&1
r() { t0=$(date +%s.%N); "$@" > /tmp/p.log 2>&1; t1=$(date +%s.%N); d=$(grep -oP '^done \K[0-9.]+' /tmp/p.log); echo "$name wall $(python3 -c "print(f'{$t1-$t0:.3f} done $d exit {$t1-$t0-$d:.3f}')")"; }
run() { r $bin "$scan" --out /dev/shm/o --set engine.device=cuda --set regulariser.kind=uniform --lambda 0.1 --iterations 30 --set solver.tolerance=0 -v; }
name=warm run
for i in 1 2 3; do name=normal run; RECON_PROBE_EXIT=1 name=_exit run; done
