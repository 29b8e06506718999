#!/usr/bin/env bash
# On the GPU machine, from the repository root: the memory pool kept
# (.gpu/recon) against the build before (.gpu/recon-base), alternating on
# one lease. radial-256 and radial-128 (scripts/peers/) as warm runs
# (report.json's stages) and as `recon bench --scan` on the same file;
# then the GPU tests of the new build.
set -u
source scripts/cuda-libs.sh
o=${OUT:-/tmp/pool}/r; mkdir -p $o
export RECON_CACHE_DIR=/tmp/pool-cache
nvidia-smi --query-gpu=name,driver_version --format=csv > $o/gpu.txt
B=${BUILDS:-"recon-base recon"}
stages() { python3 - "$@" <<'PY'
import json, sys
name, wall, report = sys.argv[1], float(sys.argv[3]) - float(sys.argv[2]), sys.argv[4]
s = json.load(open(report))["seconds"]
keys = ["device", "read", "plan", "q", "fft_q", "fhd", "fhd_host", "cg", "gridding", "outputs", "report", "other", "total"]
print(f"{name:28} wall {wall:6.3f} " + " ".join(f"{k} {s[k]:.4f}" for k in keys if k in s))
PY
}
bench() { python3 - "$@" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))["stages"][0]
print(f"{sys.argv[2]:28} plan {s['plan_seconds']:.4f} q {s['q_seconds']:.4f} fft_q {s['toeplitz_seconds']:.4f} "
      f"fhd {s['fhd_seconds']:.4f} cg/it {s['cg_ms_per_iteration']:.3f} ms fhd+cg {s['fhd_plus_cg_seconds']:.4f}")
PY
}
for p in radial-256 radial-128; do
  case $p in radial-128) it=60 ;; radial-256) it=30 ;; esac
  scan=/tmp/$p.h5
  .gpu/recon simulate --config scripts/peers/$p.toml --out $scan > $o/simulate-$p.log 2>&1
  run() { .gpu/$1 $scan --out $2 --set engine.device=cuda --set regulariser.kind=uniform \
            --lambda 0.1 --iterations $it --set solver.tolerance=0 -q > $2.log 2>&1; }
  run recon /tmp/pool-warm-$p   # kernels and Q into the cache
  for round in 1 2 3; do
    for b in $B; do
      d=/tmp/pool-$p-$b-$round; t0=$(date +%s.%N); run $b $d; t1=$(date +%s.%N)
      stages "$p $b run $round" $t0 $t1 $d/report.json >> $o/runs.txt
      .gpu/$b bench --device cuda --scan $scan --engines nufft --variants 5 --timing-voxels 4096 \
        --check-voxels 64 --iterations $it --json $o/bench-$p-$b-$round.json > /dev/null 2>&1
      bench $o/bench-$p-$b-$round.json "$p $b bench $round" >> $o/runs.txt
    done
  done
done
if [ -z "${NOTESTS:-}" ]; then
  export RECON_BIN="$PWD/.gpu/recon" RECON_REPO="$PWD"
  for t in .gpu/tests/*; do "$t" --test-threads=1 > $o/test-$(basename $t).log 2>&1; echo "$(basename $t) rc=$? $(grep -E '^test result' $o/test-$(basename $t).log | tail -1)" >> $o/tests.txt; done
fi
cd $o && tar czf $OUT/r.tgz .
