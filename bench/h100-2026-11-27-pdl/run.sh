#!/usr/bin/env bash
# On the GPU machine, from the repository root: pdl.cu for L = 256 and 512
# (the Toeplitz product at 128^3 and 256^3), with the line kernels'
# block() made to trigger the next launch at its start (TRIGGER=start) or
# not at all (TRIGGER=none: the next launch may begin as the blocks exit).
set -u
source scripts/cuda-libs.sh
export PATH=/usr/local/cuda/bin:$PATH
d=bench/h100-2026-11-27-pdl
o=${OUT:-/tmp/pdl}; mkdir -p $o
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee $o/gpu.txt
for trig in ${TRIGGERS:-start none}; do
  c=/tmp/pdl-$trig; rm -rf $c; mkdir -p $c
  cp crates/cuda/kernels/lines.cu $c/
  t=; [ $trig = start ] && t='asm volatile("griddepcontrol.launch_dependents;" ::: "memory");'
  # after the twiddles' copy loop in block(): (trigger), wait for the launch before
  awk -v t="$t" '{print} /if \(L % THREADS == 0 \|\| i < L\) smem\[i\] = twiddles\[i\];/ {getline; print; print "#if __CUDA_ARCH__ >= 900"; print "    " t; print "    asm volatile(\"griddepcontrol.wait;\" ::: \"memory\");"; print "#endif"}' \
    crates/cuda/kernels/stockham.cuh > $c/stockham.cuh
  grep -c griddepcontrol $c/stockham.cuh
  for L in ${LENGTHS:-256 512}; do
    w=; [ $L = 512 ] && w=_wide
    nvcc -O3 -std=c++17 -arch=sm_90 -I $c -I crates/cuda/kernels -DTOEPLITZ=$L -DTOEPLITZ_DOT=$L \
      -DTOEPLITZ_XPAD=fft_lines_pad_$L -DTOEPLITZ_YPAD=fft_lines_pad_$L$w -DTOEPLITZ_Z=toeplitz_columns_$L \
      -DTOEPLITZ_YCROP=fft_lines_crop_$L$w -DTOEPLITZ_XDOT=fft_lines_crop_dot_$L \
      $d/pdl.cu -o $c/pdl-$L > $o/build-$trig-$L.log 2>&1 || { echo "build $trig $L failed"; tail -20 $o/build-$trig-$L.log; continue; }
    $c/pdl-$L 2>&1 | sed "s/^/$trig /" | tee $o/run-$trig-$L.txt
  done
done
