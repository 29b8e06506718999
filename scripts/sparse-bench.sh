#!/usr/bin/env bash
# The sparse priors' cost against the quadratic prior's, per scan, on the
# book's 128^3 radial problem (scripts/peers/radial-128.toml, with the
# proton-density twin for directional TV; wavelets too): each prior run twice (the first
# fills the Q cache), the second's stage times reported. Usage:
#   scripts/sparse-bench.sh RECON_BINARY OUT_DIR [cuda|cpu]
# Prints a table: prior, algorithm and iterations, F^H D, solve, PSNR.
set -euo pipefail
recon=$(realpath "$1") out=$(realpath -m "$2") device=${3:-cuda}
cd "$(dirname "$0")/.."
mkdir -p "$out"
export RECON_CACHE_DIR="$out/cache"
base=$(sed -e "s#\"\.\./\.\./phantoms#\"$PWD/phantoms#" \
           -e "s#^supersample = 2#supersample = 2\nanatomy = \"$PWD/phantoms/sodium-brain-pd.toml\"#" \
           -e '/^\[output\]/,$d' scripts/peers/radial-128.toml)
run() { # name, extra TOML
    printf '%s\n[engine]\ndevice = "%s"\nprecision = "f32"\n%s\n[output]\ndir = "%s"\n' \
        "$base" "$device" "$2" "$out/$1" > "$out/$1.toml"
    for pass in 1 2; do "$recon" --config "$out/$1.toml" > "$out/$1.log" 2>&1; done
    python3 - "$out/$1/report.json" "$1" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
s = r["seconds"]
print(f"| {sys.argv[2]} | {r['algorithm']} {r['iterations']} | {s['fhd']:.3f} | {s['cg']:.3f} | "
      f"{s['fhd'] + s['cg']:.3f} | {r['psnr_db']:.2f} |")
PY
}
echo "| prior | algorithm, iterations | F^H D (s) | solve (s) | per scan (s) | PSNR (dB) |"
echo "| --- | --- | --- | --- | --- | --- |"
run quadratic $'[solver]\niterations = 60\nlambda = 10\n[regulariser]\nkind = "uniform"'
run tv $'[solver]\niterations = 20\n[prior]\nkind = "tv"\nlambda = 0.0005'
run dtv $'[solver]\niterations = 20\n[prior]\nkind = "dtv"\nlambda = 0.001'
run wavelet $'[solver]\niterations = 20\n[prior]\nkind = "wavelet"\nlambda = 0.0005'
