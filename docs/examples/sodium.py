"""The sodium example from Python: configs/sodium.toml reconstructed with
the package ``recon`` on arrays, beside the binary's run of the same scan
file and (when installed) SigPy on the same arrays.

Run from the repository's folder, after ``pip install ./python`` and
building the binary (``scripts/run.sh --help`` builds it):

    python3 docs/examples/sodium.py [--recon target/release/recon] [--out /tmp/sodium-py]
"""

import argparse
import json
import pathlib
import subprocess
import time

import numpy as np

import recon

try:
    import tomllib
except ModuleNotFoundError:  # Python < 3.11
    import tomli as tomllib

p = argparse.ArgumentParser()
p.add_argument("--recon", default="target/release/recon", help="the binary (for the scan file and its run)")
p.add_argument("--out", default="/tmp/sodium-py")
p.add_argument("--device", default="auto")
a = p.parse_args()
out = pathlib.Path(a.out)
out.mkdir(parents=True, exist_ok=True)

# %% The scan: the binary simulates configs/sodium.toml (48^3, twisted
# projections, SNR 30) into a scan file with its truth and the
# proton-density reference the anatomical prior needs.
scan_file = out / "sodium.h5"
subprocess.run([a.recon, "simulate", "--config", "configs/sodium.toml", "--out", str(scan_file)], check=True)
scan = recon.read_scan(scan_file)
print(f"kspace {scan.kspace.shape}, coord {scan.coord.shape} (kz, ky, kx), image {scan.shape}, FOV {scan.fov_mm} mm")

# %% The config's solver, prior and engine settings, as settings of the call.
cfg = tomllib.loads(pathlib.Path("configs/sodium.toml").read_text())
settings = {
    "regulariser.kind": cfg["regulariser"]["kind"],  # the anatomical W
    "gridding.dcf_iterations": cfg["gridding"]["dcf_iterations"],
}
t = time.perf_counter()
image, info = recon.reconstruct(
    scan.kspace,
    scan.coord,
    scan.shape,
    scan.fov_mm,
    lam=cfg["solver"]["lambda"],
    iterations=cfg["solver"]["iterations"],
    precision=cfg["engine"]["precision"],
    device=a.device,
    truth=scan.truth,
    anatomy=scan.anatomy,
    settings=settings,
)
wall = time.perf_counter() - t


def psnr(x, truth):
    return 20 * np.log10(truth.max() / np.sqrt(np.mean((np.abs(x) - truth) ** 2)))


print(f"Python: {info.device}, {info.iterations} iterations, lambda {info.lam} ({info.lam_rule}), "
      f"PSNR {psnr(image, scan.truth):.2f} dB, {wall:.2f} s")

# %% The binary on the same scan file and settings: the same image.
run_dir = out / "binary"
subprocess.run(
    [a.recon, str(scan_file), "--out", str(run_dir), "--lambda", str(cfg["solver"]["lambda"]),
     "--iterations", str(cfg["solver"]["iterations"]), "--device", a.device, "-q"]
    + [arg for k, v in settings.items() for arg in ("--set", f"{k}={v}")],
    check=True,
)
report = json.loads((run_dir / "report.json").read_text())
print(f"binary: PSNR {report['psnr_db']:.2f} dB, {report['seconds']['total']:.2f} s")

# %% SigPy on the same arrays, when installed (on its GPU when CuPy is):
# its least squares with the plain first-difference W (SigPy has no
# anatomical W) by 60 CG iterations, lambda relative to the diagonal of
# its A^H A as recon's relative lambda is (0.464: the uniform W's best on
# this config). SigPy's model has no voxel volume (recon's box basis has),
# so its image is scaled by the best real factor onto the truth first.
try:
    import sigpy as sp
except ImportError:
    print("SigPy: not installed (pip install sigpy), skipped")
else:
    dev = sp.Device(0 if sp.config.cupy_enabled else -1)
    y = sp.to_device(scan.kspace.astype(np.complex64), dev)
    coord = sp.to_device(scan.coord.astype(np.float32), dev)
    A = sp.linop.NUFFT(scan.shape, coord, width=6, oversamp=2.0)
    G = sp.linop.FiniteDifference(scan.shape)
    with dev:
        delta = dev.xp.zeros(scan.shape, np.complex64)
        centre = tuple(n // 2 for n in scan.shape)
        delta[centre] = 1
        diag = float(abs((A.H * A)(delta)[centre]))
        t = time.perf_counter()
        x = sp.app.LinearLeastSquares(A, y, lamda=0.464 * diag, G=G, max_iter=60, show_pbar=False).run()
        x = sp.to_device(x, sp.cpu_device)
    s = np.sum(np.abs(x) * scan.truth) / np.sum(np.abs(x) ** 2)
    print(f"SigPy (uniform W, {dev}): PSNR {psnr(s * x, scan.truth):.2f} dB (scaled), {time.perf_counter() - t:.2f} s")
