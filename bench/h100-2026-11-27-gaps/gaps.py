"""The CG kernels of one iteration from Nsight Compute's CSV (one row a
kernel, gpu__time_duration.sum): an iteration is taken from the kernel
after the sum of axpy_norm_partial's parts to the next such sum (builds
before 2026-11-27's fused step ended each with cg_update, right after it:
the same kernels); sums the kernels of the last full iteration (the GPU's
busy time, to be set against `recon bench`'s time per iteration) and
lists them."""
import csv, sys

UNIT = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3}
ks = []
# (the program's own output is mixed in: the CSV rows are those quoted)
for r in csv.DictReader(l for l in open(sys.argv[1]) if l.startswith('"')):
    if r.get("Metric Name") != "gpu__time_duration.sum":
        continue
    us = float(r["Metric Value"].replace(",", "")) * UNIT[r["Metric Unit"]]
    ks.append((r["Kernel Name"], us))
ends = [i + 1 for i, k in enumerate(ks[:-1]) if k[0].startswith("axpy_norm_partial")]
if len(ends) < 3:
    sys.exit(f"fewer than three axpy_norm_partial kernels among {len(ks)}")
# the last full iteration (the one after the last queued may be cut off)
a, b = ends[-3], ends[-2]
it = ks[a + 1:b + 1]
print(f"kernels of one iteration: {len(it)}, {sum(k[1] for k in it):.1f} us")
for name, us in it:
    print(f"  {name[:40]:40s} {us:8.1f} us")
