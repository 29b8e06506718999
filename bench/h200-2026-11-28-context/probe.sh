#!/usr/bin/env bash
# On a GPU machine, from the repository root, with .gpu/recon made here:
# where a tiny CUDA run's wall time goes. Test-small (16^3) warm, on the GPU
# and on the CPU in f32, ROUNDS times, first as the machine is, then with a
# second process holding the GPU open (`nvidia-smi -lms`, which keeps the
# driver's GPU state initialised as persistence mode would). Also the wall of
# a process that does nothing (`recon --version`). Output to $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-/tmp/recon-context}
mkdir -p "$out"
source scripts/cuda-libs.sh
export RECON_CACHE_DIR=/tmp/recon-context-cache
work=/tmp/recon-context-work
mkdir -p "$work"
nvidia-smi -q | grep -iE "product name|driver version|persistence mode|cuda version" | tee "$out/gpu.txt"
now() { date +%s.%N; }
one() { # name args...
    local name=$1; shift
    local dir="$work/o" t0 t1
    rm -rf "$dir"
    t0=$(now)
    .gpu/recon --config configs/test-small.toml --set engine.precision=f32 "$@" -q --out "$dir" > /dev/null 2>&1
    t1=$(now)
    python3 - "$name" "$t0" "$t1" "$dir/report.json" <<'PY'
import json, sys
name, t0, t1, report = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
s = json.load(open(report))["seconds"]
stages = sum(s.get(k, 0) for k in ["read", "synthesis", "plan", "q", "fft_q", "fhd", "prior", "cg", "gridding"])
wall = t1 - t0
bound = 1.3 * stages + 0.3
print(f"{name:22} wall {wall:6.3f}  stages {stages:.3f}  bound {bound:.3f}  {'met   ' if wall <= bound else 'MISSED'} by {abs(bound - wall):.3f}"
      f"  device {s.get('device', 0):.3f}  total {s.get('total', 0):.3f}  wall-total {wall - s.get('total', 0):.3f}")
PY
}
rounds() { # tag
    one "warm-up-$1" --device cuda > /dev/null
    for i in $(seq "${ROUNDS:-4}"); do
        one "cuda-$1" --device cuda
        one "cpu-$1" --device cpu
        t0=$(now); .gpu/recon --version > /dev/null; t1=$(now)
        awk -v a="$t0" -v b="$t1" -v t="$1" 'BEGIN { printf "version-%-14s wall %6.3f\n", t, b - a }'
    done
}
rounds alone | tee -a "$out/table.txt"
nvidia-smi -lms 500 > /dev/null 2>&1 &
holder=$!
sleep 3
rounds held | tee -a "$out/table.txt"
kill "$holder"
