#!/usr/bin/env python3
"""recon side by side with BART's `pics` on the CPU, on one scan file: each
prior at its best lambda of a sweep, with the wall time of each run.

The pairs (recon's prior, BART's regulariser):

- "tv": recon `prior.kind = "tv"` (isotropic, by ADMM), BART
  `pics -R T:7:0:lambda` (total variation over x, y and z by ADMM; with
  joint flags 0 its norm is the anisotropic one);
- "quadratic": recon's uniform W (CG), BART `pics -l2` (Tikhonov, `-r`);
- "dtv": recon's directional TV (the scan file's /reference/anatomy),
  against BART's TV, which has no reference-guided form.

Every run gets the same iterations and threads (OMP_NUM_THREADS and
RAYON_NUM_THREADS). PSNR is that of the magnitude against the truth after
the best real scale (BART scales its data internally and its NUFFT has its
own normalisation; recon's unscaled PSNR is shown too). Time is the wall
time of the whole command (reading, precomputation, solve, writing): a
scan's cost to its user. BART 0.8 comes from Debian (`apt-get install
bart`); this script installs it when `bart` is missing and it runs as root.

    target/release/recon simulate --config configs/sodium-undersampled.toml --out su.h5
    python3 scripts/peers/bart.py --scan su.h5 --recon target/release/recon --threads 2
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import h5py
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peers import load, psnr, sweep  # noqa: E402


def write_cfl(base, array):
    """BART's format: a text header of dimensions, then complex64 in
    Fortran (first index fastest) order."""
    with open(base + ".hdr", "w") as f:
        f.write("# Dimensions\n" + " ".join(str(d) for d in array.shape) + "\n")
    np.asarray(array, dtype=np.complex64).ravel(order="F").tofile(base + ".cfl")


def read_cfl(base):
    with open(base + ".hdr") as f:
        f.readline()
        dims = [int(d) for d in f.readline().split()]
    return np.fromfile(base + ".cfl", dtype=np.complex64).reshape(dims, order="F")


def ensure_bart():
    if shutil.which("bart"):
        return
    if os.geteuid() == 0 and shutil.which("apt-get"):
        subprocess.run(["apt-get", "install", "-y", "-q", "bart"], check=True, capture_output=True)
    if not shutil.which("bart"):
        sys.exit("bart not found: install it (apt-get install bart)")


def bart_runs(scan, work, iterations, threads, reg):
    """evaluate(lambda) for BART pics with regulariser `reg` ("tv", "l2")."""
    nz, ny, nx = scan["truth"].shape
    # BART's trajectory is (3, samples) in cycles/FOV, x first; its image
    # (x, y, z) Fortran-ordered, the memory order of recon's (z, y, x).
    coord = scan["coord"][:, ::-1].T  # kx, ky, kz rows
    write_cfl(os.path.join(work, "traj"), coord.reshape(3, -1, 1))
    write_cfl(os.path.join(work, "ksp"), scan["data"].reshape(1, -1, 1, 1))
    write_cfl(os.path.join(work, "sens"), np.ones((nx, ny, nz, 1), np.complex64))
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    runs = {}

    def evaluate(lam):
        out = os.path.join(work, f"bart-{reg}-{len(runs)}")
        r = ["-R", f"T:7:0:{lam}"] if reg == "tv" else ["-l2", "-r", str(lam)]
        cmd = ["bart", "pics", "-S", "-i", str(iterations), *r, "-t",
               os.path.join(work, "traj"), os.path.join(work, "ksp"), os.path.join(work, "sens"), out]
        t = time.perf_counter()
        run = subprocess.run(cmd, capture_output=True, text=True, env=env)
        secs = time.perf_counter() - t
        if run.returncode != 0:
            sys.exit(f"bart pics failed on lambda {lam}:\n{run.stderr}")
        img = read_cfl(out).reshape(nx, ny, nz, order="F").transpose(2, 1, 0)
        p = psnr(img, scan["truth"], scaled=True)
        runs[lam] = (p, secs)
        print(f"  BART {reg}: lambda {lam:g}: PSNR {p:.2f} dB (scaled), {secs:.2f} s", flush=True)
        return p

    return evaluate, runs, " ".join(cmd_shape(reg, iterations))


def cmd_shape(reg, iterations):
    r = ["-R", "T:7:0:LAMBDA"] if reg == "tv" else ["-l2", "-r", "LAMBDA"]
    return ["bart", "pics", "-S", "-i", str(iterations), *r, "-t", "traj", "ksp", "sens", "out"]


def recon_runs(binary, scan_path, scan, work, iterations, threads, kind):
    """evaluate(lambda) for recon with prior `kind` on the CPU."""
    env = dict(os.environ, RAYON_NUM_THREADS=str(threads), RECON_CACHE_DIR=os.path.join(work, "cache"))
    runs = {}

    def evaluate(lam):
        out = os.path.join(work, f"recon-{kind}-{len(runs)}")
        prior = (
            f'[prior]\nkind = "{kind}"\nlambda = {lam}\n'
            if kind != "quadratic"
            else f'[prior]\nkind = "quadratic"\nlambda = {lam}\n[regulariser]\nkind = "uniform"\n'
        )
        with open(out + ".toml", "w") as f:
            f.write(
                f'[scan]\nfile = "{os.path.abspath(scan_path)}"\n'
                f'[engine]\ndevice = "cpu"\nprecision = "f32"\n'
                f"[solver]\niterations = {iterations}\n{prior}"
                f'[output]\ndir = "{out}"\n'
            )
        t = time.perf_counter()
        run = subprocess.run([binary, "--config", out + ".toml"], capture_output=True, text=True, env=env)
        secs = time.perf_counter() - t
        if run.returncode != 0:
            sys.exit(f"recon failed on lambda {lam}:\n{run.stderr}")
        with open(os.path.join(out, "report.json")) as f:
            rep = json.load(f)
        with h5py.File(os.path.join(out, "recon.h5"), "r") as f:
            p = psnr(f["recon"][()], scan["truth"], scaled=True)
        runs[lam] = (p, secs, rep["psnr_db"])
        print(f"  recon {kind}: lambda {lam:g}: PSNR {p:.2f} dB scaled ({rep['psnr_db']:.2f} as is), {secs:.2f} s",
              flush=True)
        return p

    return evaluate, runs


def log_range(lo, hi, points):
    return list(np.logspace(np.log10(lo), np.log10(hi), points))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scan", required=True, help="scan file with /reference/truth")
    ap.add_argument("--recon", required=True, help="the recon binary")
    ap.add_argument("--iterations", type=int, default=60)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--priors", default="tv,quadratic,dtv")
    ap.add_argument("--json", help="write the table as JSON here")
    args = ap.parse_args()
    ensure_bart()
    version = subprocess.run(["bart", "version"], capture_output=True, text=True).stdout.strip()
    scan = load(args.scan)
    with h5py.File(args.scan, "r") as f:
        has_reference = "reference/anatomy" in f
    print(f"{args.scan}: matrix {scan['truth'].shape[::-1]}, {len(scan['data'])} samples, "
          f"{args.iterations} iterations, {args.threads} threads, BART {version}", flush=True)
    # recon's lambdas: sparse priors relative to max|F^H D|, the quadratic
    # one to the peak of Q; BART's relative to its own data scaling.
    ranges = {
        ("recon", "tv"): log_range(1e-4, 1e-2, 5),
        ("recon", "dtv"): log_range(1e-4, 1e-2, 5),
        ("recon", "quadratic"): log_range(0.1, 100, 7),
        ("bart", "tv"): log_range(1e-4, 1e-1, 7),
        ("bart", "l2"): log_range(1e-3, 10, 9),
    }
    rows = []
    with tempfile.TemporaryDirectory() as work:
        for kind in args.priors.split(","):
            if kind == "dtv" and not has_reference:
                print("  dtv skipped: the scan file has no /reference/anatomy")
                continue
            evaluate, runs = recon_runs(args.recon, args.scan, scan, work, args.iterations, args.threads, kind)
            best, lam = sweep(evaluate, ranges[("recon", kind)])
            rows.append({"tool": "recon", "prior": kind, "best_psnr_db": best, "best_lambda": lam,
                         "psnr_as_is_db": runs[lam][2], "seconds": runs[lam][1]})
            if kind == "dtv":
                continue  # BART's counterpart is its TV, run with "tv"
            reg = "tv" if kind == "tv" else "l2"
            evaluate, runs, cmd = bart_runs(scan, work, args.iterations, args.threads, reg)
            best, lam = sweep(evaluate, ranges[("bart", reg)])
            rows.append({"tool": "BART", "prior": reg, "best_psnr_db": best, "best_lambda": lam,
                         "seconds": runs[lam][1], "command": cmd})
    print()
    print("| tool | prior | best PSNR (dB, scaled) | at lambda | wall time at the best (s) |")
    print("| --- | --- | --- | --- | --- |")
    for r in rows:
        print(f"| {r['tool']} | {r['prior']} | {r['best_psnr_db']:.2f} | {r['best_lambda']:.3g} | {r['seconds']:.2f} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"scan": os.path.basename(args.scan), "iterations": args.iterations,
                       "threads": args.threads, "bart": version, "rows": rows}, f, indent=2)


if __name__ == "__main__":
    main()
