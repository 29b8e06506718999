#!/usr/bin/env bash
# On the GPU machine, from the repository root, with .gpu/ (made here by
# scripts/gpu-build.sh) and .whl/ (the peers' wheels: see peers.py): makes
# the comparison's three scan files with `recon simulate` and runs peers.py
# on each. Tables and JSON go to $PEERS_OUT (default
# /tmp/recon-peers).
# PROBLEMS picks some of: sodium radial-128 radial-256 flat-256 (2-D) stack-128 (a stack of stars).
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${PEERS_OUT:-/tmp/recon-peers}
mkdir -p "$out"

python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/peers-site .whl/*.whl
export PYTHONPATH=/tmp/peers-site${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
source scripts/cuda-libs.sh

for p in ${PROBLEMS:-sodium radial-128 radial-256}; do
    case $p in
        sodium) cfg=configs/sodium.toml iterations=60 ;;
        radial-128) cfg=scripts/peers/radial-128.toml iterations=60 ;;
        radial-256) cfg=scripts/peers/radial-256.toml iterations=30 ;;
        flat-256) cfg=scripts/peers/flat-256.toml iterations=30 ;;
        stack-128) cfg=scripts/peers/stack-128.toml iterations=30 ;;
        *) echo "unknown problem $p" >&2; exit 2 ;;
    esac
    .gpu/recon simulate --config "$cfg" --out "$out/$p.h5"
    python3 scripts/peers/peers.py --scan "$out/$p.h5" --recon .gpu/recon \
        --iterations "$iterations" --json "$out/peers-$p.json" | tee "$out/peers-$p.txt"
done
