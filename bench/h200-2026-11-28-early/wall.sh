#!/usr/bin/env bash
# On a GPU machine, from the repository root, with .gpu/recon (this build)
# and .gpu/recon-base (the build before) made here: warm runs of
# test-small, sodium, radial-128 and radial-256 (scripts/peers/, simulated
# to scan files) by both builds, interleaved, ROUNDS times, each into a new
# output folder (made and removed outside the timing). Each row: wall
# time, the stages (read or synthesis, plan, Q, FFT(Q), F^H D, prior, CG,
# gridding), the bound 1.3 x stages + 0.3 s, and the report's `outputs`.
# Output to $OUT (default /tmp/recon-early): table.txt and, last, one
# verbose log of radial-256 per build.
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-/tmp/recon-early}
mkdir -p "$out"
source scripts/cuda-libs.sh
export RECON_CACHE_DIR=/tmp/recon-early-cache
work=/tmp/recon-early-work
mkdir -p "$work"
now() { date +%s.%N; }
for p in radial-128 radial-256; do
    [ -f "$work/$p.h5" ] || .gpu/recon simulate --config "scripts/peers/$p.toml" --out "$work/$p.h5" > /dev/null 2>&1
done
row() { # name t0 t1 report.json
    python3 - "$@" <<'PY'
import json, sys
name, t0, t1, report = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
r = json.load(open(report))
s = r["seconds"]
stages = sum(s.get(k, 0) for k in ["read", "synthesis", "plan", "q", "fft_q", "fhd", "prior", "cg", "gridding"])
wall = t1 - t0
bound = 1.3 * stages + 0.3
print(f"{name:24} wall {wall:6.3f}  stages {stages:.3f}  bound {bound:.3f}  {'met   ' if wall <= bound else 'MISSED'} by {abs(bound - wall):.3f}"
      f"  outputs {s.get('outputs', 0):.3f}  device {s.get('device', 0):.3f}  total {s.get('total', 0):.3f}")
PY
}
run() { # name bin args...
    local name=$1 bin=$2; shift 2
    local dir="$work/o-$name" t0 t1
    rm -rf "$dir"
    t0=$(now)
    "$bin" "$@" --out "$dir" > "$work/$name.log" 2>&1
    t1=$(now)
    row "$name" "$t0" "$t1" "$dir/report.json"
    rm -rf "$dir"
}
gpu=(--set engine.device=cuda --set engine.precision=f32)
scan=(--set engine.device=cuda --set regulariser.kind=uniform --lambda 0.1 --set solver.tolerance=0)
problem() { # name bin flag
    case $1 in
        test-small) run "$1-$2$3" ".gpu/$2" --config configs/test-small.toml "${gpu[@]}" $3 ;;
        sodium) run "$1-$2$3" ".gpu/$2" --config configs/sodium.toml "${gpu[@]}" $3 ;;
        radial-128) run "$1-$2$3" ".gpu/$2" "$work/radial-128.h5" "${scan[@]}" --iterations 60 $3 ;;
        radial-256) run "$1-$2$3" ".gpu/$2" "$work/radial-256.h5" "${scan[@]}" --iterations 30 $3 ;;
    esac
}
problems=${PROBLEMS:-test-small sodium radial-128 radial-256}
for p in $problems; do
    for b in recon recon-base; do problem "$p" "$b" -q > /dev/null; done  # warm-up
done
for i in $(seq "${ROUNDS:-3}"); do
    for p in $problems; do
        for b in recon recon-base; do
            problem "$p" "$b" -q | tee -a "$out/table.txt"
        done
    done
done
for b in recon recon-base; do
    problem radial-256 "$b" -v > /dev/null
    cp "$work/radial-256-$b-v.log" "$out/"
done
