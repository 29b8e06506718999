"""Writes one small two-coil scan file in every number type h5py writes:
float32 pairs (recon's own), float64 pairs with a float64 trajectory, and
complex64 and complex128 (h5py's {r, i} compound) for every complex
dataset (data, noise, maps). The values are float32 numbers in all, so a
reader that converts exactly reads the same scan from each. Also writes
the bad cases: a complex trajectory, integer data, complex data of the
wrong shape.

Usage: python3 scan_variants.py DIR
"""
import sys

import h5py
import numpy as np

out = sys.argv[1]
rng = np.random.default_rng(7)
n, m, c = 16, 3000, 2
k = rng.uniform(-n / 2, n / 2, size=(m, 3)).astype(np.float32)
data = (rng.standard_normal((c, m)) + 1j * rng.standard_normal((c, m))).astype(np.complex64)
noise = (rng.standard_normal((c, 200)) + 1j * rng.standard_normal((c, 200))).astype(np.complex64)
maps = (1 + 0.1 * rng.standard_normal((c, n, n, n)) + 0.1j * rng.standard_normal((c, n, n, n))).astype(np.complex64)
truth = rng.uniform(0, 1, size=(n, n, n)).astype(np.float32)


def pairs(z, dtype):
    return np.stack([z.real, z.imag], axis=-1).astype(dtype)


def write(name, kind, traj=None, data_override=None):
    with h5py.File(f"{out}/{name}.h5", "w") as f:
        g = f.create_group("kspace")
        g.attrs["fov_mm"] = np.array([200.0, 200.0, 200.0])
        g.attrs["matrix"] = np.array([n, n, n], np.int32)
        g.attrs["version"] = np.int32(2)
        if kind == "float32":
            cx = lambda z: pairs(z, np.float32)
        elif kind == "float64":
            cx = lambda z: pairs(z, np.float64)
        else:
            cx = lambda z: z.astype(kind)
        g["trajectory"] = k.astype(np.float64 if kind != "float32" else np.float32) if traj is None else traj
        g["data"] = cx(data) if data_override is None else data_override
        g["noise"] = cx(noise)
        f.create_group("coils")["maps"] = cx(maps)
        f.create_group("reference")["truth"] = truth.astype(np.float64 if kind == "float64" else np.float32)


for kind in ["float32", "float64", "complex64", "complex128"]:
    write(kind, kind)
write("bad-complex-trajectory", "complex64", traj=k.astype(np.complex64))
write("bad-integer-data", "float32", data_override=np.zeros((c, m, 2), np.int32))
write("bad-complex-shape", "complex64", data_override=np.stack([data, data], axis=-1))
