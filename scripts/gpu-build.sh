#!/usr/bin/env bash
# Builds, on this (CPU) machine, what scripts/gpu.sh runs on a GPU machine
# that has no cargo: the release `recon` binary and the GPU test binaries,
# stripped, in .gpu/ (ignored by git; carried to the GPU machine).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
rm -rf .gpu
mkdir -p .gpu/tests
cargo build --release --locked -p recon
cp target/release/recon .gpu/recon
# The GPU tests: tests/gpu*.rs (one binary, suite_gpu) and the CUDA crate's
# own (NVRTC compile) test.
cargo test --release --locked --no-run --message-format=json -p recon --test suite_gpu -p recon-cuda --lib \
    | python3 -c '
import json, sys, shutil
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["profile"]["test"]:
        name = m["target"]["name"].replace("-", "_")
        shutil.copy(m["executable"], ".gpu/tests/" + name)
        print("packed test binary", name, file=sys.stderr)
'
strip --strip-debug .gpu/recon .gpu/tests/*
# The Parboil mri-q datasets beside the project, for the GPU conformance
# test: they travel in .gpu/ (ignored by git), never into the repository.
if [ -d ../shared/parboil/mri-q ]; then
    cp -r ../shared/parboil .gpu/parboil
    chmod -R u+w .gpu/parboil
fi
du -sh .gpu
