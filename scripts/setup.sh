#!/usr/bin/env bash
# Installs the system packages recon needs, if any is missing:
# HDF5 (1.10, serial) and OpenBLAS/LAPACK to link against, pkg-config to
# find them, and h5py for the test that reads recon.h5 from Python.
# Debian/Ubuntu only; run as root or with sudo available.
set -euo pipefail

need=()
pkg-config --exists hdf5 2>/dev/null || dpkg -s libhdf5-dev >/dev/null 2>&1 || need+=(libhdf5-dev)
dpkg -s libopenblas-dev >/dev/null 2>&1 || need+=(libopenblas-dev)
command -v pkg-config >/dev/null 2>&1 || need+=(pkg-config)
/usr/bin/python3 -c 'import h5py' >/dev/null 2>&1 || need+=(python3-h5py)

if [ ${#need[@]} -gt 0 ]; then
    echo "setup: installing ${need[*]}" >&2
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}" >/dev/null
fi
