"""Writes a damaged copy of an ISMRMRD file, for the tests of bad input.

Usage: python3 tests/ismrmrd_edit.py SRC DST EDIT
EDIT is one of:
  drop-image     drop every acquisition of slice 1, contrast 1
  short-image    drop one acquisition of slice 0, contrast 1 (fewer samples)
  skew           slice 2's read_dir tilted: not orthonormal to phase_dir
  move           one acquisition of slice 0 moved 10 mm along x
  one-coil       coil 0's samples only (a one-coil multi-slice scan)
Run by tests/series.rs (h5py only: no ismrmrd package needed).
"""
import sys

import h5py
import numpy as np

src, dst, edit = sys.argv[1:4]
with h5py.File(src, "r") as f:
    xml = f["dataset/xml"][...]
    acqs = f["dataset/data"][...]
    dtype = f["dataset/data"].dtype
head = acqs["head"]
idx = head["idx"]
first = lambda mask: np.flatnonzero(mask)[0]
if edit == "drop-image":
    acqs = acqs[~((idx["slice"] == 1) & (idx["contrast"] == 1))]
elif edit == "short-image":
    keep = np.ones(len(acqs), bool)
    keep[first((idx["slice"] == 0) & (idx["contrast"] == 1))] = False
    acqs = acqs[keep]
elif edit == "skew":
    rows = np.flatnonzero(idx["slice"] == 2)
    for r in rows:
        h = acqs[r]["head"]
        h["read_dir"] = h["read_dir"] + np.float32([0.0, 0.0, 0.3])
        acqs[r]["head"] = h
elif edit == "move":
    r = first(idx["slice"] == 0) + 3
    h = acqs[r]["head"]
    h["position"] = h["position"] + np.float32([10.0, 0.0, 0.0])
    acqs[r]["head"] = h
elif edit == "one-coil":
    for r in range(len(acqs)):
        h = acqs[r]["head"]
        n = int(h["number_of_samples"])
        # data: [channels, samples] complex as interleaved float32
        acqs[r]["data"] = acqs[r]["data"][: 2 * n].copy()
        h["active_channels"] = 1
        h["available_channels"] = 1
        acqs[r]["head"] = h
else:
    sys.exit(f"unknown edit {edit}")
with h5py.File(dst, "w") as g:
    g.create_dataset("dataset/xml", data=xml)
    g.create_dataset("dataset/data", data=acqs, dtype=dtype)
