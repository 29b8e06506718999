#!/usr/bin/env bash
# Compares SENSE's coil-map estimators on synthetic data: Inati's iteration
# (sense.maps = "estimate"), ESPIRiT ("espirit") and the true maps
# ("given"), on configs/sodium-8coils.toml (3-D, 48^3, 8 coils, SNR 30)
# and on a 2-D Shepp-Logan projection (128^2, 8 coils, 96 radial spokes,
# SNR 30). Prints PSNR and the maps' seconds per run.
# Usage: scripts/maps-study.sh [recon binary] [work folder]
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-target/release/recon}
work=${2:-$(mktemp -d)}
repo=$(pwd)
mkdir -p "$work"
printf '%-8s %-9s %10s %10s %8s\n' case maps "iter (dB)" "grid (dB)" "maps s"
for maps in estimate espirit given; do
    sed "s/maps = \"estimate\"/maps = \"$maps\"/; s#\.\./phantoms#$repo/phantoms#g; s#\.\./out/sodium-8coils#$work/out3d-$maps#" \
        configs/sodium-8coils.toml > "$work/3d-$maps.toml"
    cat > "$work/2d-$maps.toml" <<TOML
[grid]
matrix = [128, 128, 1]
fov_mm = 240.0
[phantom]
file = "$repo/phantoms/shepp-logan.toml"
supersample = 2
[trajectory]
kind = "stack-of-stars"
spokes = 96
samples = 256
[noise]
snr = 30.0
seed = 1
[coils]
count = 8
arrangement = "ring"
radius = 1.2
noise_correlation = 0.2
[sense]
maps = "$maps"
[engine]
precision = "f32"
[solver]
iterations = 30
lambda = 0.01
[output]
dir = "$work/out2d-$maps"
TOML
    for case in 3d 2d; do
        "$bin" --config "$work/$case-$maps.toml" > /dev/null 2>&1
        python3 - "$work/out$case-$maps/report.json" "$case" "$maps" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
print(f"{sys.argv[2]:<8} {sys.argv[3]:<9} {r['psnr_db']:>10.2f} {r['gridding_psnr_db']:>10.2f} {r['seconds'].get('maps', 0):>8.2f}")
PY
    done
done
