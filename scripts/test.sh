#!/usr/bin/env bash
# Runs the whole CPU test suite (release build: the engine tests need speed).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
# --show-output prints what passing tests printed: the GPU tests' "skipped"
# lines on a machine without a GPU.
cargo test --release --locked --workspace "$@" -- --show-output
