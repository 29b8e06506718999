#!/usr/bin/env bash
# On the GPU machine, from the repository root, with .gpu/ (the build of
# this session's last commit), .whl/ (SigPy, torchkbnufft) and .whl-py/ (the
# package's abi3 wheel, `pip wheel ./python`, and pytest's wheels): the GPU
# tests, the package's reconstruct tests on the GPU (its memory given back
# after a call among them), and the peer comparison on this build.
set -u
o=${OUT:-/tmp/final}/r; mkdir -p $o
nvidia-smi --query-gpu=name,driver_version --format=csv > $o/gpu.txt
source scripts/cuda-libs.sh
export RECON_BIN="$PWD/.gpu/recon" RECON_REPO="$PWD"
for t in .gpu/tests/*; do "$t" --test-threads=1 > $o/test-$(basename $t).log 2>&1; echo "$(basename $t) rc=$? $(grep -E '^test result' $o/test-$(basename $t).log | tail -1)" >> $o/tests.txt; done
( python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/pysite .whl-py/*.whl \
  && PYTHONPATH=/tmp/pysite python3 -m pytest -q -rs -p no:cacheprovider python/tests/test_reconstruct.py ) > $o/pytest.log 2>&1
echo "pytest rc=$? $(tail -1 $o/pytest.log)" >> $o/tests.txt
PYTHONPATH=/tmp/pysite python3 - > $o/python-memory.txt 2>&1 <<'PY'
import numpy as np, cupy, recon
free = lambda: cupy.cuda.runtime.memGetInfo()[0] / 2**20
f0 = free()
rng = np.random.default_rng(5); n = 128
coord = rng.uniform(-n / 2, n / 2, (20000, 3)); k = rng.standard_normal(20000) + 1j * rng.standard_normal(20000)
recon.reconstruct(k, coord, (n, n, n), 240.0, lam=0.01, iterations=2, device="cuda")
print(f"free before the call {f0:.0f} MiB, after {free():.0f} MiB")
PY
PEERS_OUT=$o bash scripts/peers/run.sh > $o/peers.log 2>&1; echo "peers rc=$?" >> $o/peers.log
rm -f $o/*.h5
for i in 1 2; do
  .gpu/recon bench --device cuda --engines nufft --matrix 128 --iterations 60 > $o/bench-128-$i.txt 2>&1
  .gpu/recon bench --device cuda --engines nufft --matrix 256 --samples 1000000 --iterations 30 > $o/bench-256-$i.txt 2>&1
done
cd $o && tar czf $OUT/r.tgz .
