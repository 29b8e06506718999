#!/usr/bin/env bash
# On a GPU machine, from the repository root, with .gpu/recon (this build)
# and .gpu/recon-base (the build before) made here: warm runs of the sodium
# config and of radial-256 (scripts/peers/, simulated to a scan file) by
# both builds, interleaved, ROUNDS times; each row the wall time, the
# stages (read or synthesis, plan, Q, FFT(Q), F^H D, prior, CG, gridding),
# the bound 1.3 x stages + 0.3 s, and the report's seconds.
# Output to $OUT (default /tmp/recon-wall).
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-/tmp/recon-wall}
mkdir -p "$out"
source scripts/cuda-libs.sh
export RECON_CACHE_DIR=/tmp/recon-wall-cache
now() { date +%s.%N; }
scan=/tmp/recon-wall-radial-256.h5
[ -f "$scan" ] || .gpu/recon simulate --config scripts/peers/radial-256.toml --out "$scan" > "$out/simulate.log" 2>&1
row() { # name t0 t1 report.json
    python3 - "$@" <<'PY'
import json, sys
name, t0, t1, report = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
r = json.load(open(report))
s = r["seconds"]
stages = sum(s.get(k, 0) for k in ["read", "synthesis", "plan", "q", "fft_q", "fhd", "prior", "cg", "gridding"])
wall = t1 - t0
bound = 1.3 * stages + 0.3
print(f"{name:22} wall {wall:6.3f}  stages {stages:.3f}  bound {bound:.3f}  {'met' if wall <= bound else 'MISSED'} by {abs(bound - wall):.3f}  |  " +
      " ".join(f"{k} {v:.3f}" for k, v in s.items()))
PY
}
run() { # name bin out-dir args...
    local name=$1 bin=$2 dir=$3; shift 3
    local t0 t1
    t0=$(now)
    "$bin" "$@" --out "$dir" > "$out/$name.log" 2>&1
    t1=$(now)
    row "$name" "$t0" "$t1" "$dir/report.json" | tee -a "$out/table.txt"
}
sodium=(--config configs/sodium.toml --set engine.device=cuda --set engine.precision=f32)
radial=("$scan" --set engine.device=cuda --set regulariser.kind=uniform --lambda 0.1 --iterations 30 --set solver.tolerance=0)
for b in recon recon-base; do
    run "warm-up-sodium-$b" ".gpu/$b" /tmp/recon-wall-o "${sodium[@]}" > /dev/null
    run "warm-up-radial-$b" ".gpu/$b" /tmp/recon-wall-o "${radial[@]}" > /dev/null
done
for i in $(seq "${ROUNDS:-3}"); do
    for b in recon recon-base; do
        run "sodium-$b-$i" ".gpu/$b" /tmp/recon-wall-o "${sodium[@]}" -q
        run "radial-256-$b-$i" ".gpu/$b" /tmp/recon-wall-o "${radial[@]}" -q
    done
done
# One verbose run of each: where the time goes, line by line.
for b in recon recon-base; do
    run "sodium-$b-verbose" ".gpu/$b" /tmp/recon-wall-o "${sodium[@]}" -v > /dev/null
    run "radial-256-$b-verbose" ".gpu/$b" /tmp/recon-wall-o "${radial[@]}" -v > /dev/null
done
# What comes back: the table, the verbose logs and the GPU.
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$out/gpu.txt"
rm -f "$out"/*-[0-9].log "$out"/warm-up-*.log "$out/simulate.log"
