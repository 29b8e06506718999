"""Writes one small two-coil scan in the layouts recon import reads, for
tests/formats.rs: BART's cfl/hdr pairs, NumPy arrays in recon's order, a
SigPy-style .npz (coord reversed to (kz, ky, kx)), and the same scan as a
recon scan file written by h5py (the expected result). Also bad inputs.

Usage: python3 import_sources.py DIR
"""
import sys

import h5py
import numpy as np

out = sys.argv[1]
rng = np.random.default_rng(3)
n, readout, spokes, coils, k = 16, 50, 40, 2, 100
traj = rng.uniform(-n / 2, n / 2, size=(spokes, readout, 3)).astype(np.float32)  # (kx, ky, kz)
ksp = (rng.standard_normal((coils, spokes, readout)) + 1j * rng.standard_normal((coils, spokes, readout))).astype(np.complex64)
noise = (rng.standard_normal((coils, k)) + 1j * rng.standard_normal((coils, k))).astype(np.complex64)


def cfl(name, array):
    """BART: dims first-fastest; the array given in BART's dimension order."""
    dims = list(array.shape) + [1] * (16 - array.ndim)
    with open(f"{out}/{name}.hdr", "w") as f:
        f.write("# Dimensions\n" + " ".join(map(str, dims)) + "\n")
    np.asfortranarray(array.astype(np.complex64)).ravel(order="F").tofile(f"{out}/{name}.cfl")


# BART: traj [3, readout, spokes], ksp [1, readout, spokes, coils], noise [1, k, 1, coils]
cfl("traj", traj.transpose(2, 1, 0))
cfl("ksp", ksp.transpose(2, 1, 0)[None, :, :, :])
cfl("noise", noise.T[None, :, None, :])
# recon's order in .npy
np.save(f"{out}/traj.npy", traj)
np.save(f"{out}/ksp.npy", ksp)
np.save(f"{out}/noise.npy", noise)
# SigPy's: coord's last axis (kz, ky, kx), compressed archive
np.savez_compressed(f"{out}/sigpy.npz", coord=traj[..., ::-1].astype(np.float64), ksp=ksp.astype(np.complex128), noise=noise)
# the expected scan file
with h5py.File(f"{out}/expected.h5", "w") as f:
    g = f.create_group("kspace")
    g["trajectory"] = traj.reshape(-1, 3)
    g["data"] = ksp.reshape(coils, -1)
    g["noise"] = noise
    g.attrs["fov_mm"] = np.array([200.0, 200.0, 200.0])
    g.attrs["matrix"] = np.array([n, n, n])
    g.attrs["version"] = 2

# bad inputs
np.save(f"{out}/traj-normalized.npy", traj / n)  # in [-0.5, 0.5]: fine with --units normalized
np.save(f"{out}/ksp-short.npy", ksp[:, :, :-1])
np.save(f"{out}/traj-complex.npy", traj + 0.5j)  # complex coordinates (zero imaginary parts pass)
np.save(f"{out}/ksp-nan.npy", np.where(np.arange(readout) == 7, np.nan, ksp))
np.save(f"{out}/traj-int.npy", traj.astype(np.int32))
np.save(f"{out}/traj-point.npy", np.zeros_like(traj))  # every sample at k = 0
with open(f"{out}/ksp-cut.hdr", "w") as f:
    f.write("# Dimensions\n1 50 40 2\n")
with open(f"{out}/ksp-cut.cfl", "wb") as f:
    f.write(b"\0" * 64)
