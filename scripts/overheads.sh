#!/usr/bin/env bash
# On a GPU machine, from the repository root, with .gpu/ made by
# scripts/gpu-build.sh: what a run costs beyond its kernels (issue 29).
#
# 1. Cold start: each config run with every cache empty (the driver's JIT
#    cache, recon's Q and kernel caches), then twice warm, by each recon
#    binary given (RECON_BINS, default .gpu/recon; an older build beside it
#    gives the before and after on one machine).
# 2. The run path against the bench: each problem of scripts/peers/
#    (PROBLEMS, default radial-128 radial-256) simulated to a scan file,
#    run twice (uniform W, a given lambda, the bench's iterations) and timed
#    by `recon bench --scan` on the same file.
#
# report.json, logs and bench.json go to $OUT (default /tmp/recon-overheads);
# a table of seconds per stage is printed last.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-/tmp/recon-overheads}
mkdir -p "$out"
source scripts/cuda-libs.sh
export RECON_CACHE_DIR=/tmp/recon-overheads-cache
bins=(${RECON_BINS:-.gpu/recon})

# seconds since the epoch, to the millisecond
now() { date +%s.%N; }

table=()
row() { # name start end report.json
    table+=("$(python3 - "$@" <<'PY'
import json, sys
name, wall, report = sys.argv[1], float(sys.argv[3]) - float(sys.argv[2]), sys.argv[4]
try:
    r = json.load(open(report))
except OSError:
    print(f"{name:34} wall {wall:7.2f} s  (no report)")
    sys.exit()
s = r["seconds"]
keys = ["setup", "device", "kernels", "read", "synthesis", "plan", "q", "fft_q", "fhd", "prior", "cg", "gridding", "report", "outputs", "other", "total"]
parts = " ".join(f"{k} {s[k]:.3f}" for k in keys if k in s)
it = r.get("iterations") or 1
print(f"{name:34} wall {wall:7.2f} s  {parts}  cg/it {1e3 * s['cg'] / it:.3f} ms")
o = r.get("output_seconds")
if o:
    print(f"{'':34} outputs: " + ", ".join(f"{f} {t:.3f}" for f, t in o.items()))
k = r.get("kernels")
if k and k["compiled"]:
    mods = ", ".join(f"{m} {t:.2f}" for m, t in k["compiled"])
    print(f"{'':34} compiled: {mods}; load {k['load_seconds']:.3f} s")
PY
)")
}

for cfg in ${CONFIGS:-configs/test-small.toml configs/sodium.toml}; do
    c=$(basename "$cfg" .toml)
    for bin in "${bins[@]}"; do
        b=$(basename "$bin")
        for run in cold warm-1 warm-2; do
            if [ "$run" = cold ]; then
                rm -rf "$RECON_CACHE_DIR" "$HOME/.nv/ComputeCache" "${CUDA_CACHE_PATH:-/nonexistent}"
            fi
            dir="$out/$c-$b-$run"
            t0=$(now)
            "$bin" --config "$cfg" --out "$dir" --set engine.device=cuda --set engine.precision=f32 -q > "$dir.log" 2>&1
            t1=$(now)
            row "$c $b $run" "$t0" "$t1" "$dir/report.json"
        done
    done
done

bin=${bins[0]}
for p in ${PROBLEMS:-radial-128 radial-256}; do
    case $p in
        radial-128) iterations=60 ;;
        radial-256) iterations=30 ;;
        *) echo "unknown problem $p" >&2; exit 2 ;;
    esac
    scan="$out/$p.h5"
    [ -f "$scan" ] || "$bin" simulate --config "scripts/peers/$p.toml" --out "$scan" > "$out/$p-simulate.log" 2>&1
    for run in 1 2; do
        dir="$out/$p-run-$run"
        t0=$(now)
        "$bin" "$scan" --out "$dir" --set engine.device=cuda --set regulariser.kind=uniform \
            --lambda 0.1 --iterations "$iterations" --set solver.tolerance=0 -q > "$dir.log" 2>&1
        t1=$(now)
        row "$p run $run" "$t0" "$t1" "$dir/report.json"
    done
    # Where a run's last second goes: one more run, verbose (the time its
    # outputs were in place, and the end of main), against its wall time.
    t0=$(now)
    "$bin" "$scan" --out "$out/$p-run-v" --set engine.device=cuda --set regulariser.kind=uniform \
        --lambda 0.1 --iterations "$iterations" --set solver.tolerance=0 -v > "$out/$p-run-v.log" 2>&1
    t1=$(now)
    table+=("$p verbose: wall $(python3 -c "print(f'{$t1 - $t0:.3f}')") s; $(grep -E '^(outputs in place|done)' "$out/$p-run-v.log" | tr '\n' ';')")
    "$bin" bench --device cuda --scan "$scan" --engines nufft --variants 5 --timing-voxels 4096 \
        --check-voxels 64 --iterations "$iterations" --json "$out/$p-bench.json" > "$out/$p-bench.log" 2>&1
    table+=("$(python3 - "$out/$p-bench.json" "$p" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))["stages"][0]
print(f"{sys.argv[2] + ' bench':34} plan {s['plan_seconds']:.3f} q {s['q_seconds']:.3f} fft_q {s['toeplitz_seconds']:.3f} "
      f"fhd {s['fhd_seconds']:.4f} cg/it {s['cg_ms_per_iteration']:.3f} ms  fhd+cg {s['fhd_plus_cg_seconds']:.3f}")
PY
)")
done

echo
printf '%s\n' "${table[@]}" | tee "$out/table.txt"
