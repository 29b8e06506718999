#!/usr/bin/env bash
# Runs the whole CPU test suite (release build: the engine tests need speed).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cargo test --release --locked --workspace "$@"
