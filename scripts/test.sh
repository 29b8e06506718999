#!/usr/bin/env bash
# Runs the whole CPU test suite (release build: the engine tests need speed),
# the Rust crates' tests and then the Python package's.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
# Without debug info (the release profile keeps line tables for profilers):
# most of the suite's time is compiling and linking its test binaries.
export CARGO_PROFILE_RELEASE_DEBUG=0
# --show-output prints what passing tests printed: the GPU tests' "skipped"
# lines on a machine without a GPU.
# The Python package (python/) is a cdylib for Python: pytest tests it.
cargo test --release --locked --workspace --exclude recon-python "$@" -- --show-output
scripts/python-test.sh
