"""reconstruct() against the binary on the same scan file; Ctrl-C stops a
long call; the GIL is free while it computes."""

import logging
import os
import signal
import subprocess
import threading
import time
import warnings

import numpy as np
import pytest

import recon
from conftest import blob, radial


def scan(n=32):
    coord = radial(n, 40)
    F = recon.Nufft(coord, (n, n), 240.0, device="cpu", precision="f64")
    truth = blob((n, n))
    rng = np.random.default_rng(3)
    k = F.forward(truth) + 0.01 * (rng.standard_normal(coord.shape[:-1]) + 1j * rng.standard_normal(coord.shape[:-1]))
    return coord, k, truth


def test_equals_the_binary_on_the_same_scan_file(tmp_path, binary):
    h5py = pytest.importorskip("h5py")
    coord, k, truth = scan()
    f = tmp_path / "scan.h5"
    recon.write_scan(f, k, coord, (32, 32), 240.0)
    out = tmp_path / "out"
    subprocess.run(
        [str(binary), str(f), "--out", str(out), "--lambda", "0.01", "--set", "engine.device=cpu", "-q"],
        check=True,
        env={**os.environ},
    )
    with h5py.File(out / "recon.h5") as h:
        ref = h["recon"][...]
    ref = ref[..., 0] + 1j * ref[..., 1] if ref.dtype.kind == "f" else ref
    # the file's arrays, as the binary read them (float32 on disk)
    s = recon.read_scan(f)
    image, info = recon.reconstruct(s.kspace, s.coord, s.shape, s.fov_mm, lam=0.01, device="cpu")
    ref = ref.reshape(image.shape)
    # the same computation in float32: equal to its rounding (1e-5 of the peak)
    assert np.abs(image - ref).max() / np.abs(ref).max() < 1e-5
    assert info.lam == 0.01 and info.lam_rule == "given"
    assert info.device.startswith("CPU") and info.iterations > 0


def test_auto_lambda_and_psnr_against_the_truth():
    coord, k, truth = scan()
    image, info = recon.reconstruct(k, coord, (32, 32), 240.0, device="cpu", truth=truth)
    assert info.lam_rule.startswith("discrepancy") and info.lam > 0
    # noise 1% of the blob's peak per sample: the discrepancy principle's
    # lambda keeps the magnitude within 10% of the truth (rms)
    err = np.linalg.norm(np.abs(image) - truth) / np.linalg.norm(truth)
    assert err < 0.1, err
    assert image.dtype == np.complex64
    assert set(info.seconds) >= {"plan", "q", "fhd", "cg"}


def test_ctrl_c_stops_a_long_call():
    coord, k, _ = scan(48)
    timer = threading.Timer(1.0, lambda: os.kill(os.getpid(), signal.SIGINT))
    t = time.monotonic()
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        # 10^6 iterations with no tolerance: hours, unless interrupted
        recon.reconstruct(
            k, coord, (48, 48), device="cpu", lam=0.01, iterations=1_000_000,
            settings={"solver.tolerance": 0.0},
        )
    assert time.monotonic() - t < 20


def test_the_gil_is_released_while_computing():
    coord, k, _ = scan(48)
    done = threading.Event()
    ticks = 0

    def work():
        recon.reconstruct(k, coord, (48, 48), device="cpu", lam=0.01, iterations=300,
                          settings={"solver.tolerance": 0.0})
        done.set()

    th = threading.Thread(target=work)
    th.start()
    while not done.is_set():
        ticks += 1
        time.sleep(0.001)
    th.join()
    assert ticks > 20, ticks


def gpu_free_bytes():
    """The GPU's free memory, as CuPy or PyTorch reads it (skips without)."""
    try:
        import cupy

        return cupy.cuda.runtime.memGetInfo()[0]
    except ImportError:
        pass
    try:
        import torch

        return torch.cuda.mem_get_info()[0]
    except ImportError:
        pytest.skip("neither CuPy nor PyTorch here to read the GPU's free memory")


def test_on_the_gpu_a_call_gives_its_memory_back():
    """GPU: the memory a call's pool kept goes back to the driver when the
    call returns, for the other GPU libraries of the process."""
    if recon._native.gpus() == 0:
        pytest.skip("no usable GPU here: the GPU memory check is skipped")
    free = gpu_free_bytes()
    rng = np.random.default_rng(5)
    n = 128
    coord = rng.uniform(-n / 2, n / 2, (20000, 3))
    k = rng.standard_normal(20000) + 1j * rng.standard_normal(20000)
    recon.reconstruct(k, coord, (n, n, n), 240.0, lam=0.01, iterations=2, device="cuda")
    g = recon.Nufft(coord, (n, n, n), 240.0, device="cuda")
    g.normal(np.ones((n, n, n), complex))
    # Q's plan alone spreads onto a 512^3 grid (1 GiB), which a pool that
    # kept its memory would still hold. The slack: the kernels' modules and
    # the kept backend's and operator's own buffers (tens of MB).
    slack = 384 << 20
    after = gpu_free_bytes()
    assert after > free - slack, (free, after)


def test_on_the_gpu_it_equals_the_binary(tmp_path, binary):
    """GPU: the package and the binary on one scan file, device "cuda"."""
    if recon._native.gpus() == 0:
        pytest.skip("no usable GPU here: the GPU check of reconstruct() is skipped")
    h5py = pytest.importorskip("h5py")
    coord, k, truth = scan()
    f = tmp_path / "scan.h5"
    recon.write_scan(f, k, coord, (32, 32), 240.0)
    out = tmp_path / "out"
    subprocess.run([str(binary), str(f), "--out", str(out), "--lambda", "0.01", "--device", "cuda", "-q"], check=True)
    with h5py.File(out / "recon.h5") as h:
        ref = h["recon"][...]
    ref = ref[..., 0] + 1j * ref[..., 1] if ref.dtype.kind == "f" else ref
    s = recon.read_scan(f)
    image, info = recon.reconstruct(s.kspace, s.coord, s.shape, s.fov_mm, lam=0.01, device="cuda")
    assert "CPU" not in info.device
    ref = ref.reshape(image.shape)
    # one GPU, one computation in float32 (atomics may change the last bits)
    assert np.abs(image - ref).max() / np.abs(ref).max() < 1e-4
    # and the operators on the GPU against the CPU in float64 (NUFFT
    # tolerance 1e-6 and float32 sums: 1e-4 of the peak)
    x = blob((32, 32)).astype(complex)
    g = recon.Nufft(coord, (32, 32), 240.0, device="cuda")
    c = recon.Nufft(coord, (32, 32), 240.0, device="cpu", precision="f64")
    for a, b in ((g.forward(x), c.forward(x)), (g.normal(x), c.normal(x))):
        assert np.abs(a - b).max() / np.abs(b).max() < 1e-4


def test_auto_does_not_keep_the_cpu_it_took_for_a_small_problem(caplog):
    """device="auto": a small problem runs on the CPU, saying so, and the
    next call, too large for that rule, chooses its device afresh (a GPU
    where there is one) instead of reusing the CPU kept from the first."""
    caplog.set_level(logging.INFO, logger="recon")
    rng = np.random.default_rng(7)

    def call(n, spokes, device="auto"):
        coord = radial(n, spokes)
        k = rng.standard_normal(coord.shape[:-1]) + 1j * rng.standard_normal(coord.shape[:-1])
        caplog.clear()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "no usable GPU" on a machine without one
            recon.reconstruct(k, coord, (n, n), 240.0, lam=0.01, iterations=3, device=device)
        return [r.getMessage() for r in caplog.records if "device auto" in r.getMessage()]

    # whatever an earlier test left kept (a GPU under "auto" would serve
    # the small call), replaced by a CPU kept under "cpu"
    call(16, 24, device="cpu")
    # 16^2 with 384 samples: far below the rule's 0.1 CPU core-seconds
    notes = call(16, 24)
    assert any("a small problem" in m for m in notes), notes
    # 64^2 with 38,400 samples: above it (0.13 core-seconds for the samples
    # alone), so the device is chosen again and said
    notes = call(64, 600)
    assert notes and not any("a small problem" in m for m in notes), notes
