"""Reads recon's NIfTI outputs with nibabel and checks them against recon.h5.

Usage: python3 tests/nifti_check.py OUTPUT_DIR
Run by tests/driver.rs. Exit status 0 when every check passes.
"""
import json
import sys
from pathlib import Path

import h5py
import nibabel as nib
import numpy as np

out = Path(sys.argv[1])
report = json.loads((out / "report.json").read_text())
nx, ny, nz = report["matrix"]
fov = np.array(report["fov_mm"])
voxel = fov / np.array([nx, ny, nz])
# Voxel (i, j, k) is centred at ((i, j, k) - N/2) * voxel, axes along scanner x, y, z.
expected = np.diag([*voxel, 1.0])
expected[:3, 3] = -np.array([nx, ny, nz]) / 2 * voxel

with h5py.File(out / "recon.h5", "r") as f:
    arrays = {"recon": np.abs(f["recon"][...]), "gridding": np.abs(f["gridding"][...])}
    if "truth" in f:
        arrays["truth"] = f["truth"][...]

for name, zyx in arrays.items():
    img = nib.load(out / f"{name}.nii")
    assert img.shape == (nx, ny, nz), (name, img.shape)
    assert np.allclose(img.header.get_zooms(), voxel), (name, img.header.get_zooms())
    assert img.header.get_xyzt_units()[0] == "mm", img.header.get_xyzt_units()
    for code, aff in (("qform", img.get_qform(coded=True)), ("sform", img.get_sform(coded=True))):
        affine, c = aff
        assert c == 1, (name, code, c)
        assert np.allclose(affine, expected, atol=1e-4), (name, code, affine)
    assert img.get_data_dtype() == np.float32, img.get_data_dtype()
    data = img.get_fdata(dtype=np.float32)
    # nibabel indexes [x, y, z]; recon.h5 stores [z, y, x].
    want = np.transpose(zyx, (2, 1, 0))
    assert np.allclose(data, want, rtol=1e-6, atol=1e-6 * np.abs(want).max()), name
    print(f"{name}.nii: shape {img.shape}, voxel {tuple(np.round(voxel, 3))} mm, affine and values ok")
print("nibabel: all NIfTI checks passed")
