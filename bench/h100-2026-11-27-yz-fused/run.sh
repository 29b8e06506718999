#!/usr/bin/env bash
# On the GPU machine, from the repository root: the fused y-z prototype
# (yz.cu) against today's three passes, for each (L, K, C) of $CASES.
# (-I crates/cuda/kernels: the edited copies of lines.cu find dft.cuh.)
# The harness calls toeplitz_columns_L with the six arguments it had up
# to e9403e0 (bench/h100-2026-11-27-fold added three): on a later tree,
# first `zcat bench/h100-2026-11-27-fold/lines-old.cu.gz >
# crates/cuda/kernels/lines.cu` (and restore it after).
set -u
source scripts/cuda-libs.sh
export PATH=/usr/local/cuda/bin:$PATH
o=${OUT:-/tmp/yz}/r; mkdir -p $o
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $o/gpu.txt
d=bench/h100-2026-11-27-yz-fused
for c in ${CASES:-512,8,8 256,4,8 256,2,8}; do
 for v in ${VARIANTS:-new}; do
  IFS=, read L K C <<< "$c"
  w=; [ $L -ge 320 ] && [ $L -le 512 ] && w=_wide
  # new: lines.cu of the tree, every pass pruned (y lines fft_lines_pad and
  # _crop); old: lines-old.cu, made beforehand by
  #   git show 167b0a2:crates/cuda/kernels/lines.cu > bench/h100-2026-11-27-yz-fused/lines-old.cu
  if [ $v = new ]; then
    flags="-DPRUNED -DTOEPLITZ=$L -DNAME_Y=fft_lines_pad_$L$w -DNAME_Y_INV=fft_lines_crop_$L$w"
  elif [ ${v#occ} != $v ]; then
    # occA_B: new, with launch bounds asking for A threads an SM for the
    # lines, B for the columns (1536 in the tree; before, 1024)
    # (and occA_B_D: D for the columns of 16 points a thread, 512 before)
    IFS=_ read a b e <<< "${v#occ}"
    sed -E "s|[0-9]+ / THREADS\(L, W\)|$a / THREADS(L, W)|; s|: [0-9]+\) / COLUMN_THREADS|: $b) / COLUMN_THREADS|; s|8 \? [0-9]+ :|8 ? ${e:-512} :|" \
      crates/cuda/kernels/lines.cu > $d/lines-$v.cu
    flags="-DLINES_CU=\"lines-$v.cu\" -DPRUNED -DTOEPLITZ=$L -DNAME_Y=fft_lines_pad_$L$w -DNAME_Y_INV=fft_lines_crop_$L$w"
  elif [ $v = l2v ]; then
    # l2v: the tree's, the L2 prefetch hint's asm volatile (measured at
    # commit 5822d2f, where only the columns took the hint, as "l2v"
    # beside "l2n", the hint in every line kernel without volatile, which
    # the tree has since 9a2ecc2: bench/h100-2026-11-27-l2)
    sed -E 's|asm\("ld.global|asm volatile("ld.global|' crates/cuda/kernels/lines.cu > $d/lines-$v.cu
    cmp -s crates/cuda/kernels/lines.cu $d/lines-$v.cu && echo "$v: the edit did not apply"
    flags="-DLINES_CU=\"lines-$v.cu\" -DPRUNED -DTOEPLITZ=$L -DNAME_Y=fft_lines_pad_$L$w -DNAME_Y_INV=fft_lines_crop_$L$w"
  elif [ $v = wide2048 ] || [ $v = cols8 ]; then
    # wide2048: the tree's, wide line kernels bound at 2048 threads an SM;
    # cols8: the tree's, the columns at L = 256 with 8 points a thread
    if [ $v = wide2048 ]; then e='s|1536 / THREADS\(L, W\)\)|((W) ? 2048 : 1536) / THREADS(L, W))|'
    else e='s|return L == 256 \? 16 : 8;|return 8;|'; fi
    sed -E "$e" crates/cuda/kernels/lines.cu > $d/lines-$v.cu
    cmp -s crates/cuda/kernels/lines.cu $d/lines-$v.cu && echo "$v: the edit did not apply"
    flags="-DLINES_CU=\"lines-$v.cu\" -DPRUNED -DTOEPLITZ=$L -DNAME_Y=fft_lines_pad_$L$w -DNAME_Y_INV=fft_lines_crop_$L$w"
  else
    flags="-DLINES_CU=\"lines-old.cu\" -DNAME_Y=fft_lines_$L$w -DNAME_Y_INV=fft_lines_$L$w"
  fi
  exe=/tmp/yz-$L-$K-$C-$v
  nvcc -O3 -std=c++17 -arch=sm_90 -I crates/cuda/kernels -DLENGTH=$L -DK=$K -DCF=$C -DNAME_Z=toeplitz_columns_$L $flags \
    $d/yz.cu -o $exe -Xptxas -v > $o/build-$L-$K-$C-$v.log 2>&1 || { echo "build $c $v failed"; tail -30 $o/build-$L-$K-$C-$v.log; continue; }
  $exe 2>&1 | sed "s/^/$v /" | tee $o/run-$L-$K-$C-$v.txt
 done
done
cd $o && tar czf ${OUT:-/tmp/yz}/r.tgz .
