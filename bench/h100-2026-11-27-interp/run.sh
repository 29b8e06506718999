#!/usr/bin/env bash
# On the GPU machine, from the repository root, with .gpu/ from
# scripts/gpu-build.sh: type 2 through shared memory (the default, auto)
# against the thread-per-point interpolation (--spreading global, whose
# type 2 is the old kernel), 10^7 random points on 256^3, alternating.
set -u
source scripts/cuda-libs.sh
o=${OUT:-/tmp/interp}; mkdir -p $o
R=.gpu/recon
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $o/gpu.txt
for round in 1 2 3; do
  for tol in 1e-5 1e-3 1e-6; do
    for s in auto global; do
      echo "round $round tol $tol spreading $s: $($R bench-nufft --device cuda --precision f32 --random-points 10000000 --matrix 256 --repeats 5 --tolerance $tol --spreading $s 2>&1 | tail -1)" >> $o/bench-nufft.txt
    done
  done
done
# Host memory: transparent huge pages, and the cost of touching fresh memory.
cat /sys/kernel/mm/transparent_hugepage/enabled /sys/kernel/mm/transparent_hugepage/defrag > $o/thp.txt 2>&1
python3 - >> $o/thp.txt 2>&1 <<'PY'
import mmap, time
for huge in (False, True, False, True):
    m = mmap.mmap(-1, 1 << 30)
    if huge:
        m.madvise(mmap.MADV_HUGEPAGE)
    t = time.time()
    for i in range(0, 1 << 30, 4096):
        m[i] = 1
    t1 = time.time() - t
    t = time.time()
    m.close()
    print(f"1 GiB touched page by page, MADV_HUGEPAGE {huge}: {t1:.3f} s, unmapped {time.time() - t:.3f} s")
PY
