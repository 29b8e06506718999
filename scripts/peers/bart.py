#!/usr/bin/env python3
"""recon side by side with BART's `pics` on the CPU, on one scan file: each
prior at its best lambda of a sweep, with the wall time of each run.

The pairs (recon's prior, BART's regulariser):

- "tv": recon `prior.kind = "tv"` (isotropic, by ADMM), BART
  `pics -R T:7:0:lambda` (total variation over x, y and z by ADMM; with
  joint flags 0 its norm is the anisotropic one);
- "quadratic": recon's uniform W (CG), BART `pics -l2` (Tikhonov, `-r`);
- "dtv": recon's directional TV (the scan file's /reference/anatomy),
  against BART's TV, which has no reference-guided form;
- "wavelet": recon `prior.kind = "wavelet"` (l1 of the Daubechies-2
  detail coefficients, randomly shifted, by ADMM), BART `pics -l1 -r
  lambda` (l1 of its Daubechies-2 wavelets, randomly shifted, by FISTA).

Every run gets the same threads (OMP_NUM_THREADS and RAYON_NUM_THREADS).
Each tool sweeps lambda at its own iteration budget (recon: 20 ADMM
iterations of 4 preconditioned CG steps, or 20 CG iterations; BART: 100
CG iterations in all, which is what `pics -i` counts), then runs at its
best lambda over several budgets, and the script reports the time each
takes to reach BART's best PSNR: the speed at equal PSNR. PSNR is that of
the magnitude against the truth after the best real scale (BART scales
its data internally and its NUFFT has its own normalisation; recon's
unscaled PSNR is shown too). Time is the wall
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
    """evaluate(lambda) for BART pics with regulariser `reg` ("tv", "l2", "l1")
    and `iterations` (its budget of CG iterations in all)."""
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
        out = os.path.join(work, f"bart-{reg}-{iterations}-{len(runs)}")
        cmd = pics(reg, iterations, lam, *(os.path.join(work, f) for f in ("traj", "ksp", "sens")), out)
        t = time.perf_counter()
        run = subprocess.run(cmd, capture_output=True, text=True, env=env)
        secs = time.perf_counter() - t
        if run.returncode != 0:
            sys.exit(f"bart pics failed on lambda {lam}:\n{run.stderr}")
        img = read_cfl(out).reshape(nx, ny, nz, order="F").transpose(2, 1, 0)
        p = psnr(img, scan["truth"], scaled=True)
        runs[lam] = (p, secs)
        print(f"  BART {reg}, {iterations} iterations: lambda {lam:g}: PSNR {p:.2f} dB (scaled), {secs:.2f} s",
              flush=True)
        return p

    return evaluate, runs, " ".join(pics(reg, iterations, "LAMBDA", "traj", "ksp", "sens", "out"))


def pics(reg, iterations, lam, traj, ksp, sens, out):
    """BART's command: TV (`-R T`), Tikhonov (`-l2 -r`) or l1 wavelets
    (`-l1 -r`) at `lam`."""
    r = {"tv": ["-R", f"T:7:0:{lam}"], "l2": ["-l2", "-r", str(lam)], "l1": ["-l1", "-m", "-r", str(lam)]}[reg]
    return ["bart", "pics", "-S", "-i", str(iterations), *r, "-t", traj, ksp, sens, out]


def recon_runs(binary, scan_path, scan, work, iterations, threads, kind):
    """evaluate(lambda) for recon with prior `kind` on the CPU."""
    env = dict(os.environ, RAYON_NUM_THREADS=str(threads), RECON_CACHE_DIR=os.path.join(work, "cache"))
    runs = {}

    def evaluate(lam):
        out = os.path.join(work, f"recon-{kind}-{iterations}-{len(runs)}")
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
        print(f"  recon {kind}, {iterations} iterations: lambda {lam:g}: PSNR {p:.2f} dB scaled "
              f"({rep['psnr_db']:.2f} as is), {secs:.2f} s", flush=True)
        return p

    return evaluate, runs


def log_range(lo, hi, points):
    return list(np.logspace(np.log10(lo), np.log10(hi), points))


def budgets(evaluate_at, lam, counts):
    """(iterations, PSNR, seconds) at lambda `lam` for each iteration count."""
    out = []
    for it in counts:
        evaluate, runs = evaluate_at(it)[:2]
        evaluate(lam)
        p, secs = runs[lam][:2]
        out.append((it, p, secs))
    return out


def time_to(rows, psnr_db):
    """The least time among `rows` reaching `psnr_db`, or None."""
    times = [t for _, p, t in rows if p >= psnr_db]
    return min(times) if times else None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scan", required=True, help="scan file with /reference/truth")
    ap.add_argument("--recon", required=True, help="the recon binary")
    ap.add_argument("--iterations", type=int, default=20, help="recon's iterations for the sweeps")
    ap.add_argument("--bart-iterations", type=int, default=100, help="BART's iterations for the sweeps")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--priors", default="tv,quadratic,dtv,wavelet")
    ap.add_argument("--json", help="write the tables as JSON here")
    args = ap.parse_args()
    ensure_bart()
    version = subprocess.run(["bart", "version"], capture_output=True, text=True).stdout.strip()
    scan = load(args.scan)
    with h5py.File(args.scan, "r") as f:
        has_reference = "reference/anatomy" in f
    print(f"{args.scan}: matrix {scan['truth'].shape[::-1]}, {len(scan['data'])} samples, "
          f"{args.threads} threads, BART {version}", flush=True)
    # recon's lambdas: sparse priors relative to max|F^H D|, the quadratic
    # one to the peak of Q; BART's relative to its own data scaling.
    ranges = {
        ("recon", "tv"): log_range(1e-4, 1e-2, 9),
        ("recon", "dtv"): log_range(1e-4, 1e-2, 9),
        ("recon", "quadratic"): log_range(0.1, 100, 7),
        ("recon", "wavelet"): log_range(1e-4, 1e-2, 9),
        ("bart", "l1"): log_range(1e-4, 1e-1, 13),
        ("bart", "tv"): log_range(1e-4, 1e-1, 13),
        ("bart", "l2"): log_range(1e-3, 10, 9),
    }
    # Iteration budgets at each tool's best lambda: recon's outer
    # iterations (ADMM, 4 preconditioned CG each; CG for the quadratic
    # prior), BART's CG iterations in all.
    recon_counts = {"tv": [5, 10, 15, 20, 30], "dtv": [5, 10, 15, 20, 30], "quadratic": [5, 10, 20, 40],
                    "wavelet": [5, 10, 15, 20, 30]}
    bart_counts = [30, 60, 100, 200]
    rows, curves = [], []
    with tempfile.TemporaryDirectory() as work:
        for kind in args.priors.split(","):
            if kind == "dtv" and not has_reference:
                print("  dtv skipped: the scan file has no /reference/anatomy")
                continue
            at = lambda it, kind=kind: recon_runs(args.recon, args.scan, scan, work, it, args.threads, kind)
            evaluate, runs = at(args.iterations)
            best, lam = sweep(evaluate, ranges[("recon", kind)])
            rows.append({"tool": "recon", "prior": kind, "best_psnr_db": best, "best_lambda": lam,
                         "iterations": args.iterations, "psnr_as_is_db": runs[lam][2], "seconds": runs[lam][1]})
            curves.append({"tool": "recon", "prior": kind, "lambda": lam,
                           "runs": budgets(at, lam, recon_counts[kind])})
            if kind == "dtv":
                continue  # BART has no reference-guided prior; its TV is the "tv" row
            reg = {"tv": "tv", "quadratic": "l2", "wavelet": "l1"}[kind]
            bat = lambda it, reg=reg: bart_runs(scan, work, it, args.threads, reg)
            evaluate, runs, cmd = bat(args.bart_iterations)
            best, lam = sweep(evaluate, ranges[("bart", reg)])
            rows.append({"tool": "BART", "prior": reg, "best_psnr_db": best, "best_lambda": lam,
                         "iterations": args.bart_iterations, "seconds": runs[lam][1], "command": cmd})
            curves.append({"tool": "BART", "prior": reg, "lambda": lam, "runs": budgets(bat, lam, bart_counts)})
    print()
    print("| tool | prior | iterations | best PSNR (dB, scaled) | at lambda | wall time (s) |")
    print("| --- | --- | --- | --- | --- | --- |")
    for r in rows:
        print(f"| {r['tool']} | {r['prior']} | {r['iterations']} | {r['best_psnr_db']:.2f} | "
              f"{r['best_lambda']:.3g} | {r['seconds']:.2f} |")
    print()
    print("| tool | prior | lambda | iterations: PSNR (dB) in seconds |")
    print("| --- | --- | --- | --- |")
    for c in curves:
        runs = ", ".join(f"{it}: {p:.2f} in {t:.2f}" for it, p, t in c["runs"])
        print(f"| {c['tool']} | {c['prior']} | {c['lambda']:.3g} | {runs} |")
    # Equal PSNR: BART's best over its budgets against recon's least time
    # to reach it, prior by prior.
    print()
    for mine, theirs in [("tv", "tv"), ("quadratic", "l2"), ("wavelet", "l1")]:
        r = next((c for c in curves if c["tool"] == "recon" and c["prior"] == mine), None)
        b = next((c for c in curves if c["tool"] == "BART" and c["prior"] == theirs), None)
        if r and b:
            target = max(p for _, p, _ in b["runs"])
            tb, tr = time_to(b["runs"], target), time_to(r["runs"], target)
            ratio = f"{tb / tr:.2f}x" if tr else "never reached"
            print(f"{mine}: BART's best {target:.2f} dB in {tb:.2f} s; recon reaches it in "
                  f"{tr if tr is None else round(tr, 2)} s: {ratio}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"scan": os.path.basename(args.scan), "threads": args.threads, "bart": version,
                       "rows": rows, "curves": curves}, f, indent=2)


if __name__ == "__main__":
    main()
