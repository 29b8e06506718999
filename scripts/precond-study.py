#!/usr/bin/env python3
"""PSNR against CG iteration, with and without a circulant preconditioner,
on a finished recon run (uniform W).

Reads the run's report.json (lambda_abs, the Q cache file), recon.h5 (F^H D,
the truth and recon's image) and Q, and solves

    (F^H F + lambda W^H W) x = F^H D

again in float64 with numpy: F^H F as recon's Toeplitz product on the 2N
grid, W the first differences. First it checks that plain CG reproduces
recon's image. Then it runs preconditioned CG with M the circulant
approximation of the same operator on the N grid:

- F^H F by T. Chan's optimal circulant of the Toeplitz kernel (Chan 1988),
  c(k) = sum over the 2^3 wraps s of prod_a w_a t(k - s N), where per axis
  w = (N - k) / N for s = 0 and k / N for s = 1, and t(y) = Q(y);
- W^H W by the periodic Laplacian, eigenvalues sum_a 2 - 2 cos(2 pi k_a / N_a);

so that M^-1 r = IFFT(FFT(r) / (lambda_T + lambda lambda_W)) costs two
N^3 FFTs an iteration. It prints PSNR (recon's definition: the magnitude
against the truth) at chosen iterations for both, and where each first
comes within 0.05 dB of plain CG's PSNR at the last iteration.

    recon --config C --device cpu      # with regulariser.kind = "uniform"
    python3 scripts/precond-study.py --run OUT_DIR [--iterations 60]
"""

import argparse
import json
import os
import sys

import h5py
import numpy as np

# PSNR and the uniform W^H W as the peers comparison computes them.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "peers"))
from peers import psnr, whw  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--run", required=True, help="a recon output folder (uniform W)")
    ap.add_argument("--iterations", type=int, default=60)
    args = ap.parse_args()
    with open(os.path.join(args.run, "report.json")) as f:
        report = json.load(f)
    if report["regulariser"] != "uniform":
        raise SystemExit("the study's preconditioner models the uniform W: run with regulariser.kind = \"uniform\"")
    lam = report["lambda_abs"]
    with h5py.File(os.path.join(args.run, "recon.h5"), "r") as f:
        fhd = f["fhd"][()].astype(np.complex128)
        truth = f["truth"][()].astype(np.float64)
        image = f["recon"][()].astype(np.complex128)
    with h5py.File(report["q_cache_file"], "r") as f:
        q = f["q"][()].astype(np.complex128)
    n = np.array(fhd.shape)  # (Nz, Ny, Nx)

    # F^H F x = crop(IFFT(FFT(Qc) . FFT(pad(x)))), Qc[m] = Q[(m + N) mod 2N].
    fq = np.fft.fftn(np.roll(q, tuple(-n), axis=(0, 1, 2)))

    def normal(x):
        p = np.zeros(2 * n, dtype=complex)
        p[: n[0], : n[1], : n[2]] = x
        return np.fft.ifftn(fq * np.fft.fftn(p))[: n[0], : n[1], : n[2]] + lam * whw(np, x)

    # Chan's circulant of the Toeplitz kernel, axis by axis.
    c = np.zeros(tuple(n), dtype=complex)
    ks = [np.arange(m) for m in n]
    for s in np.ndindex(2, 2, 2):
        idx = [k + m * (1 - sa) for k, m, sa in zip(ks, n, s)]  # y + N, y = k - s N
        w = [(m - k) / m if sa == 0 else k / m for k, m, sa in zip(ks, n, s)]
        c += np.einsum("i,j,k->ijk", *w) * q[np.ix_(*idx)]
    eig_t = np.fft.fftn(c).real
    eig_t = np.maximum(eig_t, 1e-6 * eig_t.max())
    eig_w = sum(
        (2 - 2 * np.cos(2 * np.pi * k / m)).reshape([-1 if a == b else 1 for b in range(3)])
        for a, (k, m) in enumerate(zip(ks, n))
    )
    eig = eig_t + lam * eig_w

    def precondition(r):
        return np.fft.ifftn(np.fft.fftn(r) / eig)

    def run(pre):
        x = np.zeros_like(fhd)
        r = fhd.copy()
        z = pre(r) if pre else r
        p = z.copy()
        rz = np.vdot(r, z).real
        out = []
        for _ in range(args.iterations):
            a_p = normal(p)
            alpha = rz / np.vdot(p, a_p).real
            x += alpha * p
            r -= alpha * a_p
            z = pre(r) if pre else r
            rz_new = np.vdot(r, z).real
            p = z + (rz_new / rz) * p
            rz = rz_new
            out.append((psnr(x, truth, scaled=False), x))
        return out

    plain = run(None)
    pcg = run(precondition)
    last = plain[-1][1]
    agree = np.linalg.norm(last - image) / np.linalg.norm(image)
    print(f"{args.run}: matrix {tuple(int(v) for v in n[::-1])}, lambda_abs {lam:.4g}, {args.iterations} iterations")
    print(f"plain CG against recon's image (float64 against float32): {agree:.2e}")
    print(f"recon's PSNR {report['psnr_db']:.3f} dB, this plain CG's {plain[-1][0]:.3f} dB")
    print()
    print("| iteration | CG PSNR (dB) | preconditioned CG PSNR (dB) |")
    print("| --- | --- | --- |")
    for i in [1, 2, 3, 5, 10, 15, 20, 30, 40, 60, 100, 150]:
        if i <= args.iterations:
            print(f"| {i} | {plain[i - 1][0]:.3f} | {pcg[i - 1][0]:.3f} |")
    goal = plain[-1][0] - 0.05
    for name, hist in [("CG", plain), ("preconditioned CG", pcg)]:
        first = next((i + 1 for i, (p, _) in enumerate(hist) if p >= goal), None)
        print(f"- {name} first within 0.05 dB of CG's last PSNR: iteration {first}")


if __name__ == "__main__":
    main()
