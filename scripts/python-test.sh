#!/usr/bin/env bash
# The Python package's test suite: installs what it needs (pytest, SciPy, Dask,
# h5py, NumPy), builds and installs python/ with pip (maturin, sharing
# the workspace's target/ and its release build), and runs pytest against
# the binary built beside it (RECON_BIN, default target/release/recon).
set -euo pipefail
cd "$(dirname "$0")/.."
# As scripts/test.sh builds the crates, so that the extension reuses them.
export CARGO_PROFILE_RELEASE_DEBUG=${CARGO_PROFILE_RELEASE_DEBUG:-0}
pip=(python3 -m pip install -q --disable-pip-version-check)
if ! python3 -c 'import pytest, scipy, h5py, numpy, distributed' >/dev/null 2>&1; then
    echo "python-test: installing pytest, scipy, h5py, numpy and dask[distributed] with pip" >&2
    "${pip[@]}" pytest scipy h5py numpy "dask[distributed]"
fi
"${pip[@]}" ./python
# From the repository root: python/ itself must not shadow the installed package.
RECON_BIN=${RECON_BIN:-$PWD/target/release/recon} python3 -m pytest -q -rs -p no:cacheprovider python/tests
