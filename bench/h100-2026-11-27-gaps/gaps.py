"""The CG kernels of one iteration from Nsight Compute's CSV (one row a
kernel, gpu__time_duration.sum): each iteration ends with cg_update; sums
the kernels of the last full iteration (the GPU's busy time, to be set
against `recon bench`'s time per iteration) and lists them."""
import csv, sys

UNIT = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3}
ks = []
# (the program's own output is mixed in: the CSV rows are those quoted)
for r in csv.DictReader(l for l in open(sys.argv[1]) if l.startswith('"')):
    if r.get("Metric Name") != "gpu__time_duration.sum":
        continue
    us = float(r["Metric Value"].replace(",", "")) * UNIT[r["Metric Unit"]]
    ks.append((r["Kernel Name"], us))
ends = [i for i, k in enumerate(ks) if k[0].startswith("cg_update")]
if len(ends) < 2:
    sys.exit(f"fewer than two cg_update kernels among {len(ks)}")
a, b = ends[-2], ends[-1]
it = ks[a + 1:b + 1]
print(f"kernels of one iteration: {len(it)}, {sum(k[1] for k in it):.1f} us")
for name, us in it:
    print(f"  {name[:40]:40s} {us:8.1f} us")
