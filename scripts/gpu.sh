#!/usr/bin/env bash
# On a GPU machine, from the repository root, with .gpu/ made by
# scripts/gpu-build.sh: runs every GPU test, then `recon bench`, and prints a
# short table last. Logs and bench.json go to $OUT (default /tmp/recon-gpu).
# Extra arguments go to `recon bench`.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-/tmp/recon-gpu}
mkdir -p "$out"

source scripts/cuda-libs.sh
export RECON_BIN="$PWD/.gpu/recon" RECON_REPO="$PWD"
[ -d .gpu/parboil/mri-q ] && export RECON_PARBOIL_DIR="$PWD/.gpu/parboil/mri-q"

nvidia-smi --query-gpu=index,name,memory.total,driver_version,clocks.sm,clocks.max.sm --format=csv | tee "$out/gpu.txt"

summary=()
for t in .gpu/tests/*; do
    name=$(basename "$t")
    start=$(date +%s%N)
    "$t" --test-threads=1 --show-output > "$out/test-$name.log" 2>&1
    rc=$?
    secs=$(awk -v a="$start" -v b="$(date +%s%N)" 'BEGIN { printf "%.1f", (b - a) / 1e9 }')
    line=$(grep -E "^test result" "$out/test-$name.log" | tail -n 1)
    grep -E "^test |skipped|error|panicked|F\^H D error|CG \(|PSNR" "$out/test-$name.log"
    summary+=("$(printf '%-10s %-4s %6ss  %s' "$name" "$([ $rc -eq 0 ] && echo ok || echo FAIL)" "$secs" "$line")")
done

# Parboil mri-q: Q of both datasets on the GPU, checked by Parboil's rule.
parboil=()
if [ -n "${RECON_PARBOIL_DIR:-}" ]; then
    for d in small large; do
        in=$(ls "$RECON_PARBOIL_DIR/$d/input/"*) ref=$(ls "$RECON_PARBOIL_DIR/$d/output/"*)
        .gpu/recon parboil-q "$in" "/tmp/parboil-$d.out" --device cuda --compare "$ref" > "$out/parboil-$d.txt" 2>&1
        parboil+=("$d (exit $?): $(grep -h -E '^parboil-q|^compare' "$out/parboil-$d.txt" | tr '\n' ' ')")
    done
fi

.gpu/recon bench --json "$out/bench.json" "$@" 2>&1 | tee "$out/bench.txt"
bench_rc=${PIPESTATUS[0]}

# The anatomical prior on the noisy sodium phantom: uniform W, anatomical W
# and gridding, each W at its best lambda (validation.md, priors.png).
.gpu/recon validate --config configs/sodium.toml --out "$out/priors" --priors --sweeps-only \
    --sweep-points 13 --lambda-min 0.01 --lambda-max 100 > "$out/priors.txt" 2>&1
priors_rc=$?

# The engine matrix of the shipped configs (exact engine on CPU and GPU,
# NUFFT at 1e-3 and 1e-6), unless SKIP_VALIDATE is set: the NUFFT at 1e-6
# must agree with the exact engine within 0.01 dB.
validate=()
if [ -z "${SKIP_VALIDATE:-}" ]; then
    for c in shepp-logan sodium; do
        .gpu/recon validate --config "configs/$c.toml" --out "$out/validate-$c" > "$out/validate-$c.txt" 2>&1
        validate+=("$c (exit $?): $(grep -c ': PASS' "$out/validate-$c.txt") PASS, $(grep -c ': FAIL' "$out/validate-$c.txt") FAIL")
    done
fi

echo
echo "== GPU tests =="
printf '%s\n' "${summary[@]}"
echo "== parboil mri-q =="
printf '%s\n' "${parboil[@]}"
echo "== validate =="
printf '%s\n' "${validate[@]}"
echo "== priors (exit $priors_rc) =="
sed -n '/^| method/,/^$/p' "$out/priors.txt"
grep -E "anatomical W over" "$out/priors.txt"
echo "== bench (exit $bench_rc) =="
sed -n '/^recon bench:/,$p' "$out/bench.txt"
