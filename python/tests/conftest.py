"""Shared fixtures: a small 2-D radial scan, a Q cache of the test's own,
and the binary to compare with."""

import os
import pathlib

import numpy as np
import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    # Q and compiled kernels go to the test's folder, not the user's cache.
    monkeypatch.setenv("RECON_CACHE_DIR", str(tmp_path / "cache"))


def radial(n=32, spokes=48):
    """A 2-D radial trajectory in SigPy's order (ky, kx), [spokes, n, 2]."""
    r = np.arange(-n // 2, n // 2) + 0.5
    a = np.pi * np.arange(spokes) / spokes
    return np.stack([np.outer(np.sin(a), r), np.outer(np.cos(a), r)], axis=-1)


def blob(shape):
    """A smooth real test image."""
    grids = np.meshgrid(*[np.arange(s) - s / 2 for s in shape], indexing="ij")
    return np.exp(-sum(g**2 for g in grids) / (0.05 * min(shape) ** 2))


@pytest.fixture
def binary():
    b = pathlib.Path(os.environ.get("RECON_BIN", REPO / "target" / "release" / "recon"))
    if not b.exists():
        pytest.skip(f"no recon binary at {b} (build it: cargo build --release -p recon)")
    return b
