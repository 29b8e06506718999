#!/usr/bin/env python3
"""recon side by side with SigPy (on CuPy) and torchkbnufft, on one scan file
and one GPU.

Every tool solves the same problem, by the same number of iterations (60 by
default) of the same conjugate gradient on the normal equations

    (A^H A + lambda W^H W) x = A^H d,

with A^H A by the tool's Toeplitz operator, W the first differences along
each axis (recon's `regulariser.kind = "uniform"`), and lambda relative to
the diagonal of A^H A, for each lambda of one sweep. The tools:

- recon (the binary given by --recon, a run per lambda with its default
  NUFFT engine; Q comes from its cache after the first run), with its
  default box voxel basis ("recon"), and with the delta basis ("recon
  delta", `engine.basis = "delta"`): the peers' own image model, so that
  this row solves exactly their problem;
- SigPy's NUFFT with `toeplitz=True`, at its default kernel (width 4,
  upsampling 1.25) and at width 6 with upsampling 2;
- torchkbnufft's `calc_toeplitz_kernel` and `ToepNufft` (width 6,
  upsampling 2, its defaults);
- on request (`--tools recon,sigpy-cpu --device cpu`), SigPy on the host
  (NumPy) beside recon on the CPU, for a comparison on the same cores.

For each it prints the precompute per trajectory (recon: plan, Q and
FFT(Q); the peers: their Toeplitz kernel), the adjoint A^H d, the time per
CG iteration, the time per scan (adjoint + the iterations + the image
brought to the host; the peers: the median over the sweep; recon: `recon
bench --scan` on the same file, and beside it the per-scan stages of its
run at the best lambda, which for a stack are its own path: the split
along k_z, F^H D and the solve) and the best PSNR over the sweep (extended
by up to 4 points while the best is at an end). PSNR is that of the magnitude
against the truth, 20 log10(max|truth| / RMSE). The peers' images are first
scaled by the best real factor onto the truth, since their model lacks
recon's box-voxel basis; recon's are shown both as reconstructed and so
scaled.

The GPU machine has PyTorch, CuPy, numba, scipy and h5py but no network;
SigPy, PyWavelets and torchkbnufft travel as wheels. Fetch them where pip
reaches the network, into the git-ignored .whl/ of the repository:

    python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 \\
        --implementation cp --platform manylinux_2_28_x86_64 \\
        --platform manylinux_2_17_x86_64 -d .whl \\
        sigpy==0.1.27 pywavelets==1.10.0 torchkbnufft==1.5.2

and there install them before running:

    python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
    PYTHONPATH=/tmp/site python3 scripts/peers/peers.py --scan scan.h5 \\
        --recon .gpu/recon --json peers.json

`recon simulate --config C --out scan.h5` writes a scan file (with its
truth) for any config; scripts/peers/run.sh makes the three problems of the
comparison and runs this on each.
"""

import argparse
import functools
import json
import math
import os
import subprocess
import sys
import tempfile
import time

import h5py
import numpy as np

def psnr(image, truth, scaled):
    """PSNR of |image| against truth, after the best real scale if asked."""
    mag = np.abs(image).astype(np.float64)
    t = truth.astype(np.float64)
    if scaled:
        den = float(np.vdot(mag, mag).real)
        if den > 0:
            mag = mag * (float(np.vdot(mag, t).real) / den)
    rmse = math.sqrt(float(np.mean((mag - t) ** 2)))
    return 20 * math.log10(float(np.abs(t).max()) / rmse)


def whw(xp, x):
    """W^H W x for W the first differences along each axis, edges past the
    last plane left out: sum_d (x[n] - x[n + e_d]) + (x[n] - x[n - e_d])."""
    out = xp.zeros_like(x)
    for axis in range(x.ndim):
        n = x.shape[axis]
        hi = [slice(None)] * x.ndim
        lo = [slice(None)] * x.ndim
        hi[axis] = slice(1, n)
        lo[axis] = slice(0, n - 1)
        d = x[tuple(hi)] - x[tuple(lo)]  # x[n + 1] - x[n]
        out[tuple(lo)] -= d
        out[tuple(hi)] += d
    return out


def cg(xp, normal, b, lam, dot, iterations):
    """`iterations` of CG on (normal + lam W^H W) x = b from x = 0."""
    x = xp.zeros_like(b)
    r = b * 1  # copies, on CuPy and on torch
    p = r * 1
    rr = dot(r, r)
    for _ in range(iterations):
        ap = normal(p) + lam * whw(xp, p)
        alpha = rr / dot(p, ap)
        x += alpha * p
        r -= alpha * ap
        rr_new = dot(r, r)
        p = r + (rr_new / rr) * p
        rr = rr_new
    return x


def sweep(evaluate, lambdas, extra=4):
    """evaluate(lambda) -> PSNR over the sweep, extended by up to `extra`
    points a side (at the sweep's own ratio) while the best is at an end;
    the best (PSNR, lambda)."""
    ratio = lambdas[1] / lambdas[0] if len(lambdas) > 1 else 10**0.5
    got = {lam: evaluate(lam) for lam in lambdas}
    for _ in range(extra):
        best = max(got, key=got.get)
        if best == max(got):
            lam = max(got) * ratio
        elif best == min(got):
            lam = min(got) / ratio
        else:
            break
        got[lam] = evaluate(lam)
    best = max(got, key=got.get)
    return got[best], best


def centre_delta(xp, shape, dtype):
    d = xp.zeros(shape, dtype=dtype)
    d[tuple(s // 2 for s in shape)] = 1
    return d


class Timer:
    def __init__(self, sync):
        self.sync = sync

    def __call__(self, f, repeats=1):
        """The shortest of `repeats` timed calls, and the last result."""
        best = float("inf")
        out = None
        for _ in range(repeats):
            self.sync()
            t = time.perf_counter()
            out = f()
            self.sync()
            best = min(best, time.perf_counter() - t)
        return best, out


def run_peer(name, setup, scan, lambdas, iterations):
    """setup() gives (xp, make_normal, adjoint, dot, to_host, sync); a
    peer's figures over the sweep."""
    xp, make_normal, adjoint, dot, to_host, sync = setup()
    timer = Timer(sync)
    make_normal()  # warm-up: compiles kernels, makes FFT plans
    pre, normal = timer(make_normal)
    adj_s, b = timer(adjoint, repeats=3)
    delta = centre_delta(xp, b.shape, b.dtype)
    diag = float(abs(to_host(normal(delta))[tuple(s // 2 for s in b.shape)]))
    print(f"  {name}: diagonal of A^H A {diag:.4g}, ||A^H d|| {math.sqrt(dot(b, b)):.4g}", flush=True)
    per_scan = []

    def evaluate(lam):
        # A scan ends with its image on the host, as recon's does.
        cg_s, x = timer(lambda: to_host(cg(xp, normal, b, lam * diag, dot, iterations)))
        per_scan.append(adj_s + cg_s)
        p = psnr(x, scan["truth"], scaled=True)
        print(f"  {name}: lambda {lam:g}: PSNR {p:.2f} dB, CG {cg_s:.3f} s", flush=True)
        return p

    best = sweep(evaluate, lambdas)
    return {
        "tool": name,
        "precompute_s": pre,
        "adjoint_s": adj_s,
        "iteration_s": (float(np.median(per_scan)) - adj_s) / iterations,
        "per_scan_s": float(np.median(per_scan)),
        # A peer's scan is timed as it runs: the same figure.
        "run_per_scan_s": float(np.median(per_scan)),
        "best_psnr_db": best[0],
        "best_lambda": best[1],
    }


def sigpy_setup(scan, oversamp, width, gpu=True):
    """SigPy on the GPU (CuPy), or with `gpu=False` on the host (NumPy)."""

    def setup():
        import sigpy as sp

        if gpu:
            import cupy as xp

            sync, to_host = xp.cuda.Device().synchronize, xp.asnumpy
        else:
            xp = np
            sync, to_host = (lambda: None), (lambda x: x)
        shape = scan["truth"].shape  # (Nz, Ny, Nx)
        coord = xp.asarray(scan["coord"])  # (M, 3): kz, ky, kx in cycles/FOV
        data = xp.asarray(scan["data"])
        state = {}

        def make_normal():
            a = sp.linop.NUFFT(shape, coord, oversamp=oversamp, width=width, toeplitz=True)
            state["a"] = a
            return a.N

        def adjoint():
            return sp.nufft_adjoint(data, coord, shape, oversamp=oversamp, width=width)

        def dot(u, v):
            return float(xp.vdot(u, v).real)

        return xp, make_normal, adjoint, dot, to_host, sync

    return setup


def torchkb_setup(scan):
    def setup():
        import torch
        import torchkbnufft as tkbn

        dev = torch.device("cuda")
        shape = scan["truth"].shape
        n = np.array(shape, dtype=np.float64)
        omega = torch.tensor((2 * np.pi * scan["coord"] / n).T.copy(), dtype=torch.float32, device=dev)
        data = torch.tensor(scan["data"], device=dev)[None, None]
        adj = tkbn.KbNufftAdjoint(im_size=shape).to(dev)
        toep = tkbn.ToepNufft().to(dev)

        class Xp:
            """The array functions cg() and whw() use, on torch."""

            zeros_like = staticmethod(torch.zeros_like)

            @staticmethod
            def zeros(shape, dtype):
                return torch.zeros(shape, dtype=dtype, device=dev)

        def make_normal():
            kernel = tkbn.calc_toeplitz_kernel(omega, shape)
            return lambda x: toep(x[None, None], kernel)[0, 0]

        def adjoint():
            return adj(data, omega)[0, 0]

        def dot(u, v):
            return float(torch.vdot(u.flatten(), v.flatten()).real)

        def to_host(x):
            return x.cpu().numpy()

        return Xp, make_normal, adjoint, dot, to_host, torch.cuda.synchronize

    return setup


@functools.cache
def recon_bench(binary, device, scan_path, iterations, workdir):
    """recon's stage times on the scan file (`recon bench --scan`), once per
    file: the voxel basis does not change them."""
    bench = os.path.join(workdir, "bench.json")
    run = subprocess.run(
        [binary, "bench", "--device", device, "--scan", os.path.abspath(scan_path), "--engines", "nufft",
         "--variants", "5", "--timing-voxels", "4096", "--check-voxels", "64",
         "--iterations", str(iterations), "--json", bench],
        capture_output=True, text=True,
    )
    if run.returncode != 0:
        sys.exit(f"recon bench failed:\n{run.stderr}")
    with open(bench) as f:
        s = json.load(f)["stages"][0]
    print(
        f"  recon bench: plan {s['plan_seconds']:.3f} s, "
        f"Q (with its plan) {s['q_seconds'] + s.get('q_plan_seconds', 0):.3f} s, FFT(Q) {s['toeplitz_seconds']:.3f} s, "
        f"F^H D {1e3 * s['fhd_seconds']:.2f} ms, CG {s['cg_ms_per_iteration']:.3f} ms/iteration",
        flush=True,
    )
    return s


def run_recon(binary, device, scan_path, scan, lambdas, iterations, workdir, basis="box"):
    """recon's PSNR from a run per lambda (`recon --config`) with voxel basis
    `basis`, its times from `recon_bench`."""
    runs = []

    def evaluate(lam):
        out = os.path.join(workdir, f"recon-{basis}-{len(runs)}")
        cfg = out + ".toml"
        with open(cfg, "w") as f:
            f.write(
                f'[scan]\nfile = "{os.path.abspath(scan_path)}"\n'
                f'[engine]\ndevice = "{device}"\nprecision = "f32"\nbasis = "{basis}"\n'
                f'[regulariser]\nkind = "uniform"\n'
                f"[solver]\niterations = {iterations}\nlambda = {lam}\n"
                f'[output]\ndir = "{out}"\n'
            )
        run = subprocess.run([binary, "--config", cfg], capture_output=True, text=True)
        if run.returncode != 0:
            sys.exit(f"recon failed on lambda {lam}:\n{run.stderr}")
        with open(os.path.join(out, "report.json")) as f:
            r = json.load(f)
        with h5py.File(os.path.join(out, "recon.h5"), "r") as f:
            scaled = psnr(f["recon"][()], scan["truth"], scaled=True)
        # A run's own per-scan stages: the split of a stack along k_z, F^H D
        # and the solve, as its report times them.
        per_scan = sum(r["seconds"].get(k, 0.0) for k in ("stack", "fhd", "cg"))
        runs.append((lam, (scaled, per_scan)))
        print(
            f"  recon ({basis}): lambda {lam:g}: PSNR {r['psnr_db']:.2f} dB ({scaled:.2f} scaled), "
            f"per scan in the run {per_scan:.3f} s",
            flush=True,
        )
        return r["psnr_db"]

    best_psnr, best_lam = sweep(evaluate, lambdas)
    best_scaled, run_per_scan = dict(runs)[best_lam]
    best = (best_psnr, best_lam, best_scaled)
    s = recon_bench(binary, device, scan_path, iterations, workdir)
    return {
        "tool": "recon" if basis == "box" else f"recon ({basis} basis)",
        "precompute_s": s["plan_seconds"] + s.get("q_plan_seconds", 0) + s["q_seconds"] + s["toeplitz_seconds"],
        "adjoint_s": s["fhd_seconds"],
        "iteration_s": s["cg_ms_per_iteration"] / 1e3,
        "per_scan_s": s["fhd_plus_cg_seconds"],
        "run_per_scan_s": run_per_scan,
        "best_psnr_db": best[0],
        "best_lambda": best[1],
        "best_psnr_scaled_db": best[2],
    }


def load(path):
    with h5py.File(path, "r") as f:
        if "reference/truth" not in f:
            sys.exit(f"{path} has no /reference/truth: PSNR needs the true image")
        traj = f["kspace/trajectory"][()].astype(np.float32)  # (M, 3): kx, ky, kz
        d = f["kspace/data"][()]
        truth = f["reference/truth"][()]  # (Nz, Ny, Nx)
    if d.ndim == 3:  # (coils, samples, 2)
        if d.shape[0] != 1:
            sys.exit(f"{path} has {d.shape[0]} coils: the comparison is of single-coil scans")
        d = d[0]
    data = d[:, 0].astype(np.float64) + 1j * d[:, 1]
    # Scaled to a peak of 1 for the peers: their dot products accumulate in
    # float32, where ||A^H d||^2 of a 256^3 scan in the file's units
    # overflows. The best scale onto the truth makes PSNR blind to it.
    data /= np.abs(data).max()
    if truth.shape[0] == 1:
        # A 2-D scan (matrix z = 1): the peers' 2-D operators, on (Ny, Nx).
        return {
            "coord": traj[:, 1::-1].copy(),  # ky, kx
            "data": data.astype(np.complex64),
            "truth": truth[0],
        }
    return {
        "coord": traj[:, ::-1].copy(),  # kz, ky, kx: the array's axis order
        "data": data.astype(np.complex64),
        "truth": truth,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scan", required=True, help="scan file with /reference/truth")
    ap.add_argument("--recon", required=True, help="the recon binary")
    ap.add_argument(
        "--lambdas",
        default="0.01,0.0316,0.1,0.316,1,3.16,10,31.6,100",
        help="the sweep, relative to the diagonal of A^H A (comma-separated)",
    )
    ap.add_argument("--iterations", type=int, default=60, help="CG iterations")
    ap.add_argument("--device", default="cuda", help="recon's engine.device")
    ap.add_argument("--tools", default="recon,recon-delta,sigpy,sigpy-w6,torchkbnufft")
    ap.add_argument("--json", help="write the table as JSON here")
    args = ap.parse_args()
    lambdas = [float(v) for v in args.lambdas.split(",")]
    scan = load(args.scan)
    print(
        f"{args.scan}: matrix {scan['truth'].shape[::-1]}, {len(scan['data'])} samples, "
        f"{args.iterations} CG iterations, lambda in {lambdas}",
        flush=True,
    )
    it = args.iterations
    peers = {
        "sigpy": lambda: run_peer("SigPy (width 4, upsampling 1.25)", sigpy_setup(scan, 1.25, 4), scan, lambdas, it),
        "sigpy-w6": lambda: run_peer("SigPy (width 6, upsampling 2)", sigpy_setup(scan, 2.0, 6), scan, lambdas, it),
        "torchkbnufft": lambda: run_peer("torchkbnufft (Toeplitz)", torchkb_setup(scan), scan, lambdas, it),
        "sigpy-cpu": lambda: run_peer(
            "SigPy on the host (width 4, upsampling 1.25)", sigpy_setup(scan, 1.25, 4, gpu=False), scan, lambdas, it
        ),
    }
    rows = []
    with tempfile.TemporaryDirectory() as work:
        for tool in args.tools.split(","):
            if tool in ("recon", "recon-delta"):
                basis = "box" if tool == "recon" else "delta"
                rows.append(run_recon(args.recon, args.device, args.scan, scan, lambdas, it, work, basis))
            elif tool in peers:
                try:
                    rows.append(peers[tool]())
                except Exception as e:  # one peer's failure leaves the others' figures
                    print(f"  {tool} failed: {type(e).__name__}: {e}", flush=True)
            else:
                sys.exit(f"unknown tool {tool!r}: recon, recon-delta, {', '.join(peers)}")
    print()
    print(f"| tool | precompute (s) | F^H D (ms) | CG iteration (ms) | per scan (s) | per scan in a run (s) | best PSNR (dB) | at lambda |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        p = f"{r['best_psnr_db']:.2f}"
        if "best_psnr_scaled_db" in r:
            p += f" ({r['best_psnr_scaled_db']:.2f} scaled)"
        print(
            f"| {r['tool']} | {r['precompute_s']:.3f} | {1e3 * r['adjoint_s']:.2f} | "
            f"{1e3 * r['iteration_s']:.3f} | {r['per_scan_s']:.3f} | "
            f"{r['run_per_scan_s']:.3f} | {p} | {r['best_lambda']:g} |"
        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(
                {"scan": os.path.basename(args.scan), "iterations": it, "lambdas": lambdas, "rows": rows},
                f,
                indent=2,
            )


if __name__ == "__main__":
    main()
