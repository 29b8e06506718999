#!/usr/bin/env python3
"""Writes the multi-slice, multi-contrast 2-D radial ISMRMRD test fixture with
the reference implementation's Python package (pip install ismrmrd h5py numpy).

The object and the coils are sums and products of Gaussians, so every sample
is exact (no gridding, no phantom rasterised):

- SLICES parallel 2-D slices, SPACING_MM apart along an oblique slice
  direction, the middle one centred at POSITION_LPS (patient coordinates,
  mm); the logical axes (readout, phase, slice) are the columns of a
  rotation (ROTATE_Z_DEG about z, then ROTATE_X_DEG about x);
- in each slice (logical mm, x along readout, y along phase): a broad
  Gaussian (the "body", sigma 40 mm, 0.3) and one bright small Gaussian (the
  "feature", sigma 6 mm, 1.0) at FEATURES_MM[slice], so that a test can find
  it in the image and check where the NIfTI affine puts it in the scanner;
- CONTRASTS contrasts (echoes), contrast c at 1 / (c + 1) of the signal;
- COILS receive coils, coil c's sensitivity a Gaussian of sigma 120 mm
  centred at COIL_CENTRES_MM[c] with phase COIL_PHASES[c];
- a radial trajectory of SPOKES full spokes of SAMPLES samples (angles
  pi j / SPOKES), normalised to [-0.5, 0.5] cycles per pixel, 2-D
  (trajectory_dimensions = 2); one acquisition per spoke, every slice and
  contrast in turn, with `idx.slice` and `idx.contrast` set and the slice's
  position, read_dir, phase_dir and slice_dir.

The model is recon's: D(k) = int rho(x) S_c(x) exp(-2 pi i k.x / FOV) dx.
The features' true scanner positions (RAS mm, NIfTI's frame) are stored in
the file as the attribute `feature_ras_mm` of a group `/fixture` (no
ISMRMRD reader looks there).

Usage (from the repository root):
    python3 scripts/make-ismrmrd-series.py tests/fixtures/multislice-2contrasts.ismrmrd.h5
"""
import sys

import h5py
import ismrmrd
import ismrmrd.xsd
import numpy as np

MATRIX = 32
FOV_MM = 240.0
THICKNESS_MM = 5.0
SLICES = 3
SPACING_MM = 6.0
CONTRASTS = 2
COILS = 2
SPOKES = 48
SAMPLES = 64
POSITION_LPS = np.array([12.0, -30.0, 20.0])
ROTATE_Z_DEG = 30.0
ROTATE_X_DEG = 20.0
FEATURES_MM = [(40.0, -25.0), (-30.0, 35.0), (20.0, 50.0)]
COIL_CENTRES_MM = [(-90.0, 0.0), (90.0, 30.0)]
COIL_PHASES = [0.0, 1.0]

dst = sys.argv[1]


def rotation():
    z, x = np.radians(ROTATE_Z_DEG), np.radians(ROTATE_X_DEG)
    rz = np.array([[np.cos(z), -np.sin(z), 0], [np.sin(z), np.cos(z), 0], [0, 0, 1]])
    rx = np.array([[1, 0, 0], [0, np.cos(x), -np.sin(x)], [0, np.sin(x), np.cos(x)]])
    return rx @ rz


R = rotation()
read_dir, phase_dir, slice_dir = R[:, 0], R[:, 1], R[:, 2]


def gaussian_ft(kappa, amplitude, sigma, centre):
    """FT of amplitude exp(-|x - centre|^2 / (2 sigma^2)) at kappa (cycles/mm, [M, 2])."""
    k2 = (kappa**2).sum(axis=1)
    phase = -2j * np.pi * (kappa @ np.asarray(centre))
    return amplitude * 2 * np.pi * sigma**2 * np.exp(-2 * np.pi**2 * sigma**2 * k2 + phase)


def product(a, sa, ma, b, sb, mb):
    """(amplitude, sigma, centre) of the product of two Gaussians."""
    ma, mb = np.asarray(ma), np.asarray(mb)
    s2 = 1 / (1 / sa**2 + 1 / sb**2)
    m = s2 * (ma / sa**2 + mb / sb**2)
    c = np.exp(-((ma - mb) ** 2).sum() / (2 * (sa**2 + sb**2)))
    return a * b * c, np.sqrt(s2), m


# Full spokes, k in cycles/FOV from -N/2 to N/2 - step.
radius = (np.arange(SAMPLES) - SAMPLES / 2) * (MATRIX / SAMPLES)
angles = np.pi * np.arange(SPOKES) / SPOKES

header = ismrmrd.xsd.ismrmrdHeader(
    experimentalConditions=ismrmrd.xsd.experimentalConditionsType(H1resonanceFrequency_Hz=127_740_000),
    encoding=[
        ismrmrd.xsd.encodingType(
            encodedSpace=ismrmrd.xsd.encodingSpaceType(
                matrixSize=ismrmrd.xsd.matrixSizeType(x=MATRIX, y=MATRIX, z=1),
                fieldOfView_mm=ismrmrd.xsd.fieldOfViewMm(x=FOV_MM, y=FOV_MM, z=THICKNESS_MM),
            ),
            reconSpace=ismrmrd.xsd.encodingSpaceType(
                matrixSize=ismrmrd.xsd.matrixSizeType(x=MATRIX, y=MATRIX, z=1),
                fieldOfView_mm=ismrmrd.xsd.fieldOfViewMm(x=FOV_MM, y=FOV_MM, z=THICKNESS_MM),
            ),
            encodingLimits=ismrmrd.xsd.encodingLimitsType(
                slice=ismrmrd.xsd.limitType(minimum=0, maximum=SLICES - 1, center=SLICES // 2),
                contrast=ismrmrd.xsd.limitType(minimum=0, maximum=CONTRASTS - 1, center=0),
            ),
            trajectory=ismrmrd.xsd.trajectoryType("radial"),
        )
    ],
)

ds = ismrmrd.Dataset(dst, "dataset", create_if_needed=True)
ds.write_xml_header(header.toXML("utf-8"))
features_ras = []
for s in range(SLICES):
    centre = POSITION_LPS + (s - SLICES // 2) * SPACING_MM * slice_dir
    f = FEATURES_MM[s]
    lps = centre + f[0] * read_dir + f[1] * phase_dir
    features_ras.append([-lps[0], -lps[1], lps[2]])
    for c in range(CONTRASTS):
        for j, a in enumerate(angles):
            k = np.stack([radius * np.cos(a), radius * np.sin(a)], axis=1)  # cycles/FOV
            kappa = k / FOV_MM
            data = np.zeros((COILS, SAMPLES), np.complex128)
            for coil in range(COILS):
                for amp, sigma, where in [(0.3, 40.0, (0.0, 0.0)), (1.0, 6.0, f)]:
                    p = product(amp, sigma, where, 1.0, 120.0, COIL_CENTRES_MM[coil])
                    data[coil] += np.exp(1j * COIL_PHASES[coil]) * gaussian_ft(kappa, *p)
            data /= c + 1
            acq = ismrmrd.Acquisition.from_array(
                data.astype(np.complex64), trajectory=(k / MATRIX).astype(np.float32)
            )
            acq.center_sample = SAMPLES // 2
            acq.idx.slice = s
            acq.idx.contrast = c
            acq.idx.kspace_encode_step_1 = j
            acq.position[:] = centre.astype(np.float32)
            acq.read_dir[:] = read_dir.astype(np.float32)
            acq.phase_dir[:] = phase_dir.astype(np.float32)
            acq.slice_dir[:] = slice_dir.astype(np.float32)
            ds.append_acquisition(acq)
ds.close()
with h5py.File(dst, "a") as f:
    g = f.create_group("fixture")
    g.attrs["feature_ras_mm"] = np.array(features_ras)
    g.attrs["slice_spacing_mm"] = SPACING_MM
print(f"wrote {dst}: {SLICES} slices x {CONTRASTS} contrasts, {COILS} coils, {SPOKES} spokes of {SAMPLES} samples each")
