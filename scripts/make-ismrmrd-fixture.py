#!/usr/bin/env python3
"""Writes the ISMRMRD test fixture with the reference implementation's Python
package (pip install ismrmrd h5py numpy).

It converts a recon scan file (made by `recon simulate`) into a non-Cartesian
ISMRMRD dataset: one acquisition per projection of SAMPLES_PER_ACQ samples
(of every coil, for a version 2 file), trajectories normalised to
[-0.5, 0.5] (cycles per pixel: k in cycles/FOV divided by the matrix size),
matrix and field of view in the XML header's encodedSpace and reconSpace, and
noise acquisitions first, flagged ACQ_IS_NOISE_MEASUREMENT: one of random
samples for one coil; for several coils, NOISE_ACQS drawn with the file's
noise covariance (seeded), from which a reader estimates it.

A 2-D scan (matrix z = 1) gets 2-D trajectories (kx, ky). With a third
argument CONTRASTS (default 1), the imaging acquisitions are
written once per contrast, `idx.contrast` = 0, 1, ..., contrast c's data
multiplied by 1 / (c + 1): a multi-echo file, which a reader must not merge.

Usage (from the repository root, as tests/fixtures/README.md says):
    target/release/recon simulate --config configs/test-small.toml --out /tmp/scan.h5
    python3 scripts/make-ismrmrd-fixture.py /tmp/scan.h5 tests/fixtures/test-small.ismrmrd.h5 [CONTRASTS]
"""
import sys

import h5py
import ismrmrd
import ismrmrd.xsd
import numpy as np

SAMPLES_PER_ACQ = 40  # one TPI projection of configs/test-small.toml
NOISE_ACQS = 8

src, dst = sys.argv[1], sys.argv[2]
contrasts = int(sys.argv[3]) if len(sys.argv) > 3 else 1
with h5py.File(src, "r") as f:
    k = f["kspace/trajectory"][...].astype(np.float32)  # [M, 3], cycles/FOV
    d = f["kspace/data"][...].astype(np.float32)  # [M, 2] or [C, M, 2]
    if d.ndim == 2:
        d = d[None]
    psi = f["kspace/noise_covariance"][...] if "kspace/noise_covariance" in f else None
    fov = [float(v) for v in f["kspace"].attrs["fov_mm"]]
    matrix = [int(v) for v in f["kspace"].attrs["matrix"]]

def space():
    return ismrmrd.xsd.encodingSpaceType(
        matrixSize=ismrmrd.xsd.matrixSizeType(x=matrix[0], y=matrix[1], z=matrix[2]),
        fieldOfView_mm=ismrmrd.xsd.fieldOfViewMm(x=fov[0], y=fov[1], z=fov[2]),
    )

header = ismrmrd.xsd.ismrmrdHeader(
    # A 3 T scanner's proton frequency.
    experimentalConditions=ismrmrd.xsd.experimentalConditionsType(H1resonanceFrequency_Hz=127_740_000),
    encoding=[
        ismrmrd.xsd.encodingType(
            encodedSpace=space(),
            reconSpace=space(),
            encodingLimits=ismrmrd.xsd.encodingLimitsType(),
            trajectory=ismrmrd.xsd.trajectoryType("other"),
        )
    ],
)

ds = ismrmrd.Dataset(dst, "dataset", create_if_needed=True)
ds.write_xml_header(header.toXML("utf-8"))

def acquisition(traj, data, flags=()):
    # data: [channels, samples]
    acq = ismrmrd.Acquisition.from_array(data, trajectory=traj)
    acq.center_sample = 0
    for flag in flags:
        acq.setFlag(flag)
    return acq

coils = d.shape[0]
rng = np.random.default_rng(0)
zeros = np.zeros((SAMPLES_PER_ACQ, 2 if matrix[2] == 1 else 3), np.float32)
if psi is None:
    # A noise scan: no trajectory meaning, random samples.
    noise = (rng.standard_normal((coils, SAMPLES_PER_ACQ)) + 1j * rng.standard_normal((coils, SAMPLES_PER_ACQ))).astype(np.complex64)
    ds.append_acquisition(acquisition(zeros, noise, [ismrmrd.ACQ_IS_NOISE_MEASUREMENT]))
else:
    # Noise of covariance psi: L z with psi = L L^H and E|z|^2 = 1.
    L = np.linalg.cholesky(psi[..., 0] + 1j * psi[..., 1])
    for _ in range(NOISE_ACQS):
        z = (rng.standard_normal((coils, SAMPLES_PER_ACQ)) + 1j * rng.standard_normal((coils, SAMPLES_PER_ACQ))) / np.sqrt(2)
        ds.append_acquisition(acquisition(zeros, (L @ z).astype(np.complex64), [ismrmrd.ACQ_IS_NOISE_MEASUREMENT]))

norm = k / np.array(matrix, np.float32)  # cycles per pixel, in [-0.5, 0.5]
if matrix[2] == 1:
    # A 2-D scan: trajectories of two dimensions (kx, ky), as 2-D sequences write them.
    norm = np.ascontiguousarray(norm[:, :2])
cplx = (d[..., 0] + 1j * d[..., 1]).astype(np.complex64)  # [C, M]
for c in range(contrasts):
    for start in range(0, len(k), SAMPLES_PER_ACQ):
        stop = min(start + SAMPLES_PER_ACQ, len(k))
        acq = acquisition(norm[start:stop], cplx[:, start:stop] / (c + 1))
        acq.idx.contrast = c
        ds.append_acquisition(acq)
ds.close()
print(f"wrote {dst}: {coils} coils, {len(k)} samples in {-(-len(k) // SAMPLES_PER_ACQ)} acquisitions plus noise scans")
