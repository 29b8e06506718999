#!/usr/bin/env bash
# Installs the system packages recon needs, if any is missing:
# HDF5 (1.10, serial) and OpenBLAS/LAPACK to link against, pkg-config to
# find them, h5py for the test that reads recon.h5 from Python, and a C++
# compiler for the test that runs the CUDA line kernels on the CPU.
# Debian/Ubuntu only; run as root or with sudo available.
set -euo pipefail

need=()
pkg-config --exists hdf5 2>/dev/null || dpkg -s libhdf5-dev >/dev/null 2>&1 || need+=(libhdf5-dev)
dpkg -s libopenblas-dev >/dev/null 2>&1 || need+=(libopenblas-dev)
command -v pkg-config >/dev/null 2>&1 || need+=(pkg-config)
/usr/bin/python3 -c 'import h5py' >/dev/null 2>&1 || need+=(python3-h5py)
command -v c++ >/dev/null 2>&1 || need+=(g++)

if [ ${#need[@]} -gt 0 ]; then
    echo "setup: installing ${need[*]}" >&2
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}" >/dev/null
fi

# nibabel (and h5py, numpy) for the Python that is first on PATH: the NIfTI
# check of the test suite reads recon's outputs with it.
if command -v python3 >/dev/null 2>&1 && ! python3 -c 'import nibabel, h5py, numpy' >/dev/null 2>&1; then
    echo "setup: installing nibabel, h5py and numpy with pip" >&2
    python3 -m pip install -q nibabel h5py numpy >&2 || echo "setup: pip failed; the NIfTI check will be skipped" >&2
fi
