#!/usr/bin/env python3
"""recon's CPU NUFFT engine beside FINUFFT, side by side on the same points.

For each scan file (recon's format; `recon simulate` writes one) this runs
`recon bench-nufft` and the same three sums with the `finufft` Python
package, with the same thread count, tolerance and precision, and prints
one table:

- type 1 on the image grid: F^H D, strengths phi(k_m) D_m;
- type 2 on the image grid: the forward model F of F^H D (sign -);
- Q: type 1 on the doubled grid with strengths |phi(k_m)|^2, plan and
  sorting included (recon makes Q's plan inside the call);

each the best of --repeats runs, plans excluded except for Q. The L2 norms
of both tools' results are compared, so that the table cannot compare two
different problems.

Needs numpy, h5py and finufft:
    python3 -m venv /tmp/fenv && /tmp/fenv/bin/pip install finufft h5py numpy
    /tmp/fenv/bin/python scripts/nufft-vs-finufft.py --threads 2 SCAN.h5 ...
"""

import argparse
import json
import os
import subprocess
import sys
import time

import h5py
import numpy as np


def best(repeats, f):
    t_best = float("inf")
    out = None
    for _ in range(repeats):
        t = time.perf_counter()
        out = f()
        t_best = min(t_best, time.perf_counter() - t)
    return t_best, out


def finufft_times(path, tol, precision, threads, repeats):
    import finufft

    with h5py.File(path, "r") as f:
        ks = f["kspace"]
        n = [int(v) for v in ks.attrs["matrix"]]  # x y z
        fov = [float(v) for v in ks.attrs["fov_mm"]]
        k = np.asarray(ks["trajectory"], dtype=np.float64)  # cycles/FOV
        d = np.asarray(ks["data"], dtype=np.float64)
    data = d[:, 0] + 1j * d[:, 1]
    rdt = np.float64 if precision == "f64" else np.float32
    cdt = np.complex128 if precision == "f64" else np.complex64
    # phi(k) = V prod_d sinc(k_d / N_d), numpy's sinc is sin(pi u)/(pi u).
    vol = np.prod([fov[i] / n[i] for i in range(3)])
    phi = vol * np.prod([np.sinc(k[:, i] / n[i]) for i in range(3)], axis=0)
    # Points in radians: x_d = 2 pi k_d / N_d. FINUFFT orders modes with
    # the first axis slowest in C order, so pass z, y, x for shape (Nz, Ny, Nx).
    x = [(2 * np.pi * k[:, i] / n[i]).astype(rdt) for i in range(3)]
    mu = (phi * data).astype(cdt)
    q_w = (phi * phi).astype(cdt)
    shape = (n[2], n[1], n[0])
    opts = dict(eps=tol, nthreads=threads, dtype=cdt)

    t = time.perf_counter()
    p1 = finufft.Plan(1, shape, isign=1, **opts)
    p1.setpts(x[2], x[1], x[0])
    plan_s = time.perf_counter() - t
    t1, fhd = best(repeats, lambda: p1.execute(mu))
    p2 = finufft.Plan(2, shape, isign=-1, **opts)
    p2.setpts(x[2], x[1], x[0])
    t2, fwd = best(repeats, lambda: p2.execute(fhd))
    fwd = fwd * phi

    def q():
        p = finufft.Plan(1, tuple(2 * s for s in shape), isign=1, **opts)
        p.setpts(x[2], x[1], x[0])
        return p.execute(q_w)

    tq, qv = best(repeats, q)
    return {
        "tool": "finufft " + finufft.__version__,
        "matrix": n,
        "samples": len(data),
        "plan_s": plan_s,
        "type1_s": t1,
        "type2_s": t2,
        "q_s": tq,
        "type1_norm": float(np.linalg.norm(fhd)),
        "type2_norm": float(np.linalg.norm(fwd)),
        "q_norm": float(np.linalg.norm(qv)),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("scans", nargs="+")
    ap.add_argument("--recon", default=os.path.join("target", "release", "recon"))
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--tolerance", type=float, default=1e-6)
    ap.add_argument("--precision", choices=["f32", "f64"], default="f64")
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    rows = []
    for path in a.scans:
        r = subprocess.run(
            [a.recon, "bench-nufft", "--scan", path, "--tolerance", str(a.tolerance),
             "--precision", a.precision, "--repeats", str(a.repeats),
             "--threads", str(a.threads)],
            check=True, capture_output=True, text=True,
        )
        ours = json.loads(r.stdout.strip().splitlines()[-1])
        theirs = finufft_times(path, a.tolerance, a.precision, a.threads, a.repeats)
        rows.append((path, ours, theirs))

    print(f"tolerance {a.tolerance:g}, {a.precision}, {a.threads} threads, "
          f"best of {a.repeats}; seconds, and recon / FINUFFT")
    print()
    print("| scan | matrix | samples | sum | recon (s) | FINUFFT (s) | ratio | norms agree to |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    worst = 0.0
    for path, ours, theirs in rows:
        for key, name in [("type1", "type 1 (F^H D)"), ("type2", "type 2 (F)"),
                          ("q", "Q (2N grid, plan included)")]:
            o, t = ours[f"{key}_s"], theirs[f"{key}_s"]
            no, nt = ours[f"{key}_norm"], theirs[f"{key}_norm"]
            agree = abs(no - nt) / nt
            worst = max(worst, agree)
            m = "x".join(str(v) for v in ours["matrix"])
            print(f"| {os.path.basename(path)} | {m} | {ours['samples']} | {name} | "
                  f"{o:.3f} | {t:.3f} | {o / t:.2f} | {agree:.1e} |")
    print()
    print(f"recon: {rows[0][1]['engine']}; {rows[0][2]['tool']}")
    # Both meet the tolerance against the exact sums, so their norms agree
    # to about it; far more means the two computed different sums.
    if worst > 100 * a.tolerance:
        print(f"norms disagree by {worst:.1e}: not the same problem", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
