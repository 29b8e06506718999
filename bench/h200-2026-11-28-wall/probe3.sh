set -uo pipefail
source scripts/cuda-libs.sh
export RECON_CACHE_DIR=/tmp/recon-wall-cache
bin=.gpu/recon
scan=/tmp/recon-wall-radial-256.h5
[ -f "$scan" ] || $bin simulate --config scripts/peers/radial-256.toml --out "$scan" > /dev/null 2>&1
run() { t0=$(date +%s.%N); echo "PROBE $t0 exec" > $OUT/$1.log; RECON_PROBE=1 $bin "$scan" --out $2 --set engine.device=cuda --set regulariser.kind=uniform --lambda 0.1 --iterations 30 --set solver.tolerance=0 -v >> $OUT/$1.log 2>&1; t1=$(date +%s.%N); echo "PROBE $t1 exited" >> $OUT/$1.log; }
run warm /dev/shm/o0
for i in 1 2 3; do run forget$i /dev/shm/o1; RECON_PROBE_DROP=1 run drop$i /dev/shm/o2; done
for f in $OUT/forget* $OUT/drop*; do echo "$(basename $f) $(grep -E 'PROBE' $f | awk 'NR==1{t0=$2} /pipeline returned/{p=$2} /drop backend done/{d=$2} /exited/{e=$2} END{printf "returned %.3f drop %.3f exit %.3f wall %.3f", p-t0, (d?d-p:0), e-(d?d:p), e-t0}')"; done
