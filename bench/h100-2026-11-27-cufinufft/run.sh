#!/usr/bin/env bash
# On the GPU machine, from the repository root: recon's NUFFT and cuFINUFFT
# side by side, 10^7 uniformly random points on 256^3 modes, float32,
# transform only (plan and sorting excluded by both), alternating.
#
# cuFINUFFT is built there from source (flatironinstitute/finufft at
# 9810998d, v2.5.0-191, with POET v0.0.1 and CPM.cmake; carried as
# .peer/*.tar.xz, git-ignored) for sm_90 only, unless .peer/bin/cuperftest
# is already there; cuperftest is its own benchmark (execute: mean and min
# over n_runs, CUDA events). .peer/ was made here from clones of the three
# repositories:
#   git -C finufft archive --prefix=finufft/ 9810998d CMakeLists.txt cmake include \
#       src perftest/cuda perftest/randunif.h test/cuda | xz > .peer/finufft.tar.xz
#   git -C poet archive --prefix=poet/ v0.0.1 | xz > .peer/poet.tar.xz
#   cp CPM.cmake/cmake/CPM.cmake .peer/CPM.cmake
set -u
source scripts/cuda-libs.sh
o=${OUT:-/tmp/cf}/r; mkdir -p $o
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $o/gpu.txt
repo=$PWD
if [ ! -x .peer/bin/cuperftest ]; then
  ( set -e
    cd /tmp && rm -rf finufft poet build cpm
    tar xJf $repo/.peer/finufft.tar.xz && tar xJf $repo/.peer/poet.tar.xz
    mkdir -p cpm/cpm && cp $repo/.peer/CPM.cmake cpm/cpm/CPM_0.43.1.cmake
    cmake -S finufft -B build -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DFINUFFT_USE_CPU=OFF -DFINUFFT_USE_CUDA=ON -DFINUFFT_BUILD_TESTS=ON \
      -DCMAKE_CUDA_ARCHITECTURES=90 -DCPM_SOURCE_CACHE=/tmp/cpm -DCPM_POET_SOURCE=/tmp/poet
    timeout ${BUILD_S:-480} cmake --build build -j16 --target cuperftest
  ) > $o/build.log 2>&1
  echo "build rc=$?" >> $o/build.log
  mkdir -p .peer/bin && cp /tmp/build/perftest/cuda/cuperftest .peer/bin/ 2>/dev/null \
    && cp .peer/bin/cuperftest $OUT/ 2>/dev/null
fi
[ -x .peer/bin/cuperftest ] || { tail -40 $o/build.log; cd $o && tar czf $OUT/r.tgz .; exit 1; }
ldd .peer/bin/cuperftest > $o/ldd.txt 2>&1
cf() { .peer/bin/cuperftest --prec f --type $1 --N1 256 --N2 256 --N3 256 --M 1e7 --n_runs 5 --tol $2 --method $3 2>&1 | grep -E '^(setpts|execute),' | tr '\n' ' '; }
nb() { .gpu/recon bench-nufft --device cuda --precision f32 --random-points 10000000 --matrix 256 --repeats 5 --tolerance $1 2>&1 | tail -1; }
for round in $(seq ${ROUNDS:-2}); do
  for tol in 1e-5 1e-6 1e-3; do
    echo "round $round tol $tol recon: $(nb $tol)" >> $o/compare.txt
    for m in 1 2 3; do echo "round $round tol $tol cufinufft type 1 method $m: $(cf 1 $tol $m)" >> $o/compare.txt; done
    for m in 1 2; do echo "round $round tol $tol cufinufft type 2 method $m: $(cf 2 $tol $m)" >> $o/compare.txt; done
  done
done
.peer/bin/cuperftest --prec f --type 1 --N1 256 --N2 256 --N3 256 --M 1e7 --n_runs 1 --tol 1e-5 --method 2 --debug 1 > $o/debug-type1.txt 2>&1
cd $o && tar czf $OUT/r.tgz .
