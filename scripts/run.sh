#!/usr/bin/env bash
# Builds recon (release) and runs it; arguments go to recon.
#   scripts/run.sh --config configs/sodium.toml
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cargo build --release --locked -p recon
exec target/release/recon "$@"
