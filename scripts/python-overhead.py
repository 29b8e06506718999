#!/usr/bin/env python3
"""The Python call's overhead against the binary's, on the sodium and book
problems: each scan file (made by `recon simulate`) reconstructed by the
binary (`recon scan.h5 --out DIR`, its wall time from outside) and by
`recon.reconstruct` on the file's arrays (its wall time around the call),
both warm (Q and the kernels cached by a first run), with each one's own
stage times (report.json's seconds; Info.seconds) beside: the difference
of wall and stages is what the interface costs.

    python3 scripts/python-overhead.py --recon target/release/recon --device cpu --json out.json
"""

import argparse
import json
import os
import pathlib
import subprocess
import tempfile
import time

import recon

PROBLEMS = {  # name: (config, lambda, iterations)
    "sodium": ("configs/sodium.toml", 0.464, 60),
    "book": ("scripts/peers/radial-128.toml", 10.0, 60),
}
STAGES = ("plan", "q", "fft_q", "fhd", "prior", "cg", "gridding", "fhd_host")

p = argparse.ArgumentParser()
p.add_argument("--recon", default="target/release/recon")
p.add_argument("--device", default="auto")
p.add_argument("--problems", default="sodium,book")
p.add_argument("--iterations", type=int, help="override each problem's iterations")
p.add_argument("--repeats", type=int, default=3)
p.add_argument("--json")
a = p.parse_args()
work = pathlib.Path(tempfile.mkdtemp(prefix="recon-py-overhead-"))
os.environ.setdefault("RECON_CACHE_DIR", str(work / "cache"))
rows = []
for name in a.problems.split(","):
    config, lam, iterations = PROBLEMS[name]
    iterations = a.iterations or iterations
    scan_file = work / f"{name}.h5"
    subprocess.run([a.recon, "simulate", "--config", config, "--out", str(scan_file)], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    s = recon.read_scan(scan_file)
    common = ["--lambda", str(lam), "--iterations", str(iterations), "--device", a.device,
              "--set", "regulariser.kind=uniform", "-q"]

    def binary(i):
        out = work / f"{name}-out-{i}"
        t = time.perf_counter()
        subprocess.run([a.recon, str(scan_file), "--out", str(out)] + common, check=True, stdout=subprocess.DEVNULL)
        wall = time.perf_counter() - t
        sec = json.loads((out / "report.json").read_text())["seconds"]
        return wall, sum(sec.get(k, 0.0) for k in STAGES), sec

    def python(_):
        t = time.perf_counter()
        _, info = recon.reconstruct(s.kspace, s.coord, s.shape, s.fov_mm, lam=lam, iterations=iterations,
                                    device=a.device, settings={"regulariser.kind": "uniform"})
        wall = time.perf_counter() - t
        return wall, sum(info.seconds.get(k, 0.0) for k in STAGES), info.seconds

    binary(-1), python(-1)  # warm: Q and the kernels in the cache, the process's first call made
    for tool, f in (("binary", binary), ("python", python)):
        runs = [f(i) for i in range(a.repeats)]
        wall, stages, sec = min(runs, key=lambda r: r[0])
        rows.append({"problem": name, "tool": tool, "wall_s": wall, "stages_s": stages,
                     "overhead_s": wall - stages, "iterations": iterations, "seconds": sec})
        print(f"{name:7} {tool:7} wall {wall:7.3f} s  stages {stages:7.3f} s  beyond them {wall - stages:6.3f} s")
if a.json:
    pathlib.Path(a.json).write_text(json.dumps(rows, indent=2))
