set -uo pipefail
source scripts/cuda-libs.sh
export RECON_CACHE_DIR=/tmp/recon-wall-cache
bin=.gpu/recon
scan=/tmp/recon-wall-radial-256.h5
[ -f "$scan" ] || $bin simulate --config scripts/peers/radial-256.toml --out "$scan" > /dev/null 2>&1
run() { t0=$(date +%s.%N); echo "PROBE $t0 exec" > $OUT/$1.log; RECON_PROBE=1 $bin "$scan" --out $2 --set engine.device=cuda --set regulariser.kind=uniform --lambda 0.1 --iterations 30 --set solver.tolerance=0 -v >> $OUT/$1.log 2>&1; t1=$(date +%s.%N); echo "PROBE $t1 exited" >> $OUT/$1.log; }
run warm /tmp/o0
run disk1 /tmp/o1
run disk2 /tmp/o2
run shm1 /dev/shm/o1
