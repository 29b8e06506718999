#!/usr/bin/env bash
# recon on a stack-of-stars scan file solved slice by slice, as one batch
# of slices and as one volume (solver.stack = "slices" / "batch" /
# "volume"; MODES picks, all three by default), same CG iterations and
# lambda: prints each run's PSNR and seconds per stage from report.json.
# Usage: scripts/peers/stack-modes.sh RECON SCAN DEVICE [ITERATIONS] [LAMBDA] [WORK]
set -euo pipefail
bin=$1 scan=$(realpath "$2") device=$3 iterations=${4:-30} lambda=${5:-0.1}
work=${6:-$(mktemp -d)}
mkdir -p "$work"
for mode in ${MODES:-slices batch volume}; do
    cat > "$work/$mode.toml" <<TOML
[scan]
file = "$scan"
[engine]
device = "$device"
precision = "f32"
[solver]
iterations = $iterations
lambda = $lambda
stack = "$mode"
[output]
dir = "$work/out-$mode"
TOML
    start=$(date +%s.%N)
    "$bin" --config "$work/$mode.toml" > "$work/$mode.log" 2>&1
    wall=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')
    python3 - "$work/out-$mode/report.json" "$mode" "$wall" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
s = r["seconds"]
stages = ", ".join(f"{k} {v:.2f}" for k, v in sorted(s.items()))
print(f"{sys.argv[2]:<7} PSNR {r['psnr_db']:.2f} dB (gridding {r['gridding_psnr_db']:.2f}), wall {sys.argv[3]} s; {stages}")
PY
done
