#!/usr/bin/env bash
# On a GPU machine, from the repository root, with .gpu/recon built by
# scripts/gpu-build.sh: where a warm radial-256 run's wall time goes beyond
# its stages. The same scan run with its outputs on the local disk (/tmp)
# and on memory (/dev/shm), the disk's own write and sync speed (dd), and
# the process's start and end against the report's times.
# Output to $OUT (default /tmp/recon-wall).
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-/tmp/recon-wall}
mkdir -p "$out"
source scripts/cuda-libs.sh
export RECON_CACHE_DIR=/tmp/recon-wall-cache
bin=${RECON_BIN:-.gpu/recon}
now() { date +%s.%N; }
{
    df -hT /tmp /dev/shm
    for k in dirty_ratio dirty_background_ratio dirty_bytes dirty_background_bytes dirty_expire_centisecs; do
        echo "vm.$k = $(cat /proc/sys/vm/$k)"
    done
    nproc; free -g
    for t in strace perf ltrace; do command -v $t || echo "no $t"; done
} > "$out/machine.txt" 2>&1
scan=/tmp/recon-wall-radial-256.h5
[ -f "$scan" ] || "$bin" simulate --config scripts/peers/radial-256.toml --out "$scan" > "$out/simulate.log" 2>&1
ls -l "$scan" >> "$out/machine.txt"
run() { # name out-dir [extra flags]
    local name=$1 dir=$2; shift 2
    local t0 t1
    t0=$(now)
    "$bin" "$scan" --out "$dir" --set engine.device=cuda --set regulariser.kind=uniform \
        --lambda 0.1 --iterations 30 --set solver.tolerance=0 -v "$@" > "$out/$name.log" 2>&1
    t1=$(now)
    python3 - "$name" "$t0" "$t1" "$dir/report.json" "$out/$name.log" <<'PY'
import json, re, sys
name, t0, t1, report, log = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), sys.argv[4], sys.argv[5]
r = json.load(open(report))
s = r["seconds"]
stages = sum(s.get(k, 0) for k in ["read", "synthesis", "plan", "q", "fft_q", "fhd", "prior", "cg", "gridding"])
text = open(log).read()
marks = "; ".join(f"{m.group(1)} {m.group(2)}" for m in re.finditer(r"^(outputs in place|done) ([0-9.]+) s", text, re.M))
print(f"{name:10} wall {t1 - t0:6.3f}  stages {stages:.3f}  bound {1.3 * stages + 0.3:.3f}  " +
      " ".join(f"{k} {v:.3f}" for k, v in s.items()) + f"  [{marks}]")
o = r.get("output_seconds") or {}
print(f"{'':10} outputs: " + ", ".join(f"{f} {t:.3f}" for f, t in o.items()))
PY
    du -sh "$dir" | sed 's/^/           /'
}
run warm-0 /tmp/recon-wall-out0 > /dev/null
for i in 1 2 3; do run disk-$i /tmp/recon-wall-out$i; done
for i in 1 2; do run shm-$i /dev/shm/recon-wall-out$i; done
t0=$(now); "$bin" --version > /dev/null; t1=$(now)
echo "recon --version: $(python3 -c "print(f'{$t1 - $t0:.3f}')") s"
for i in 1 2; do
    echo "dd 640 MiB to /tmp, fsync: $(dd if=/dev/zero of=/tmp/recon-wall-dd bs=1M count=640 conv=fsync 2>&1 | tail -n 1)"
    rm -f /tmp/recon-wall-dd
    echo "dd 640 MiB to /tmp, no sync: $(dd if=/dev/zero of=/tmp/recon-wall-dd bs=1M count=640 2>&1 | tail -n 1)"
    rm -f /tmp/recon-wall-dd; sync
done
