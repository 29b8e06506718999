#!/usr/bin/env bash
# On a GPU machine, from the repository root, with .gpu/recon (this build)
# and .gpu/recon-base (the build before) made here: warm runs under
# `engine.device = "auto"` in f32 of test-small (16^3), the fixture scan
# tests/fixtures/test-flat.ismrmrd.h5 and sodium (48^3), by both builds,
# interleaved, ROUNDS times, each into a new output folder. Each row: wall
# time, the device the run took, the stages (read or synthesis, plan, Q,
# FFT(Q), F^H D, prior, CG, gridding) and the bound 1.3 x stages + 0.3 s.
# Output to $OUT (default /tmp/recon-small): table.txt.
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-/tmp/recon-small}
mkdir -p "$out"
source scripts/cuda-libs.sh
export RECON_CACHE_DIR=/tmp/recon-small-cache
work=/tmp/recon-small-work
mkdir -p "$work"
now() { date +%s.%N; }
run() { # name bin args...
    local name=$1 bin=$2; shift 2
    local dir="$work/o-$name" t0 t1
    rm -rf "$dir"
    t0=$(now)
    "$bin" "$@" --set engine.precision=f32 -q --out "$dir" > "$work/$name.log" 2>&1
    t1=$(now)
    python3 - "$name" "$t0" "$t1" "$dir/report.json" <<'PY'
import json, sys
name, t0, t1, report = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
r = json.load(open(report))
s = r["seconds"]
stages = sum(s.get(k, 0) for k in ["read", "synthesis", "plan", "q", "fft_q", "fhd", "prior", "cg", "gridding"])
wall = t1 - t0
bound = 1.3 * stages + 0.3
print(f"{name:28} wall {wall:6.3f}  stages {stages:.3f}  bound {bound:.3f}  {'met   ' if wall <= bound else 'MISSED'} by {abs(bound - wall):.3f}"
      f"  device {s.get('device', 0):.3f}  total {s.get('total', 0):.3f}  on {r['device'].split(' (')[0]}")
PY
}
problem() { # name bin
    case $1 in
        test-small) run "$1-$2" ".gpu/$2" --config configs/test-small.toml ;;
        scan) run "$1-$2" ".gpu/$2" tests/fixtures/test-flat.ismrmrd.h5 --lambda 0.01 ;;
        sodium) run "$1-$2" ".gpu/$2" --config configs/sodium.toml ;;
    esac
}
problems=${PROBLEMS:-test-small scan sodium}
for p in $problems; do
    for b in recon recon-base; do problem "$p" "$b" > /dev/null; done  # warm-up
done
for i in $(seq "${ROUNDS:-4}"); do
    for p in $problems; do
        for b in recon recon-base; do
            problem "$p" "$b" | tee -a "$out/table.txt"
        done
    done
done
