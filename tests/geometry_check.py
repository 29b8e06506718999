"""Checks with nibabel that a run's NIfTI puts the fixture's features where
they are in the scanner.

Usage: python3 tests/geometry_check.py OUTPUT_DIR FIXTURE
Run by tests/series.rs on tests/fixtures/multislice-2contrasts.ismrmrd.h5
(scripts/make-ismrmrd-series.py): slices of a 2-D scan, oblique and off
the isocentre, each with one bright small Gaussian whose scanner position
(RAS mm) the fixture stores in /fixture attribute feature_ras_mm. For each
slice (first contrast), the feature's centre in the image (the centroid of
the 3 x 3 voxels around its peak) mapped by the NIfTI's sform and qform
must lie within half a voxel of the true position, along every voxel axis.
Exit status 0 when every check passes.
"""
import sys
from pathlib import Path

import h5py
import nibabel as nib
import numpy as np

out, fixture = Path(sys.argv[1]), sys.argv[2]
with h5py.File(fixture, "r") as f:
    truth = np.array(f["fixture"].attrs["feature_ras_mm"])
    spacing = float(f["fixture"].attrs["slice_spacing_mm"])

img = nib.load(out / "recon.nii")
data = np.abs(img.get_fdata())
assert data.ndim == 4 and data.shape[2] == len(truth), data.shape
zooms = img.header.get_zooms()
assert np.isclose(zooms[2], spacing), zooms
for code, (affine, c) in (("sform", img.get_sform(coded=True)), ("qform", img.get_qform(coded=True))):
    assert c == 1, (code, c)
    inverse = np.linalg.inv(affine)
    for s, want in enumerate(truth):
        plane = data[:, :, s, 0]
        i, j = np.unravel_index(np.argmax(plane), plane.shape)
        w = plane[i - 1 : i + 2, j - 1 : j + 2]
        w = w - w.min()
        di, dj = np.meshgrid(np.arange(-1, 2), np.arange(-1, 2), indexing="ij")
        found = np.array([i + (w * di).sum() / w.sum(), j + (w * dj).sum() / w.sum(), s])
        expect = (inverse @ np.append(want, 1.0))[:3]
        error = found - expect
        assert np.all(np.abs(error) < 0.5), (code, s, found, expect)
        ras = (affine @ np.append(found, 1.0))[:3]
        print(f"{code}: slice {s}: feature at voxel {np.round(found, 2)} -> RAS {np.round(ras, 1)} mm, "
              f"true {np.round(want, 1)} mm, off by {np.round(error, 2)} voxels")
print("geometry: every feature within half a voxel")
