#!/usr/bin/env bash
# On the GPU machine, from the repository root: cols.cu (the z columns as
# CG's folded map runs them) for each variant of $VARIANTS at L = 512 and
# 256, with each build's registers:
#   old       e9403e0's lines.cu (no symbol, no sums), -DOLD
#   off       the tree's kernel given a null symbol (-DOFF)
#   tree      the tree's kernel with the symbol
#   nosxy     the tree's without the x and y symbol's reads (wrong, timed)
#   not0      the tree's without exp(i 2 pi tj / L)'s read (wrong, timed)
#   sincos    the tree's with exp(i 2 pi tj / L) by __sincosf, not read
#             (these three edit the kernel as it was for 5-columns-parts,
#             its x and y symbol in two tables, px apart, and the call
#             cols.cu made then, with px; on the final tree nosxy finds
#             nothing to edit, and says so)
# and, with SUMS=1, lines.cu of f54e1f0, whose kernel also
# sums multiplier |FFT(column)|^2 per block (-DSUMS):
#   off       its kernel given null symbol and sums
#   tree      its kernel: the symbol's z part read from its table, the
#             sums in double
#   float     the sums in float
#   noenergy  without the sums' accumulation (the block sums still run,
#             of zeros)
#   rot       f54e1f0's, the z symbol from exp(i 2 pi tj / L)
#             turned by constants instead of its table
#   rotfloat  rot with the sums in float
set -u
export PATH=/usr/local/cuda/bin:$PATH
o=${OUT:-/tmp/cols}/c; mkdir -p $o
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > $o/gpu.txt
d=bench/h100-2026-11-27-fold
k=crates/cuda/kernels
tofloat='s|energy \+= \(double\)w \* \(\(double\)a\.x \* a\.x \+ \(double\)a\.y \* a\.y\);|energy = fmaf(w, a.x * a.x + a.y * a.y, energy);|; s|double& energy|float\& energy|; s|double unused = 0\.0;|float unused = 0.0f;|; s|double energy = 0\.0, unused = 0\.0;|float energy = 0.0f, unused = 0.0f;|'
# The earlier lines.cu files are kept gzipped (lines-old.cu.gz: e9403e0's;
# lines-sums.cu.gz: f54e1f0's; lines-rot.cu.gz: f54e1f0's with the z
# symbol turned by constants).
for f in old sums rot; do zcat $d/lines-$f.cu.gz > /tmp/lines-$f.cu; done
if [ "${SUMS:-0}" = 1 ]; then src=/tmp/lines-sums.cu; sums=-DSUMS; else src=$k/lines.cu; sums=""; fi
for v in ${VARIANTS:-old off tree}; do
  flags="$sums"
  case $v in
    old) cp /tmp/lines-old.cu $d/lines-v.cu; flags="-DOLD" ;;
    off) cp $src $d/lines-v.cu; flags="$flags -DOFF" ;;
    tree) cp $src $d/lines-v.cu ;;
    nosxy) sed 's|sxy = lam \* (symbol\[u % w\] + symbol\[w + u / w\]);|sxy = lam;|' $src > $d/lines-v.cu ;;
    not0) sed 's|t0 = twiddles\[tj\];|t0 = make_float2(0.5f, 0.5f);|' $src > $d/lines-v.cu ;;
    sincos) sed 's|t0 = twiddles\[tj\];|__sincosf(6.2831853f * tj / L, \&t0.y, \&t0.x);|' $src > $d/lines-v.cu ;;
    float) sed -E "$tofloat" $src > $d/lines-v.cu ;;
    noenergy) grep -v 'energy += (double)w' $src > $d/lines-v.cu ;;
    rot) cp /tmp/lines-rot.cu $d/lines-v.cu ;;
    rotfloat) sed -E "$tofloat" /tmp/lines-rot.cu > $d/lines-v.cu ;;
  esac
  case $v in old|off|tree) ;; *) cmp -s $src $d/lines-v.cu && echo "$v: the edit did not apply" ;; esac
  for L in 512 256; do
    exe=/tmp/cols-$v-$L
    nvcc -O3 -std=c++17 -arch=sm_90 -I $k -DLINES_CU="\"lines-v.cu\"" -DTOEPLITZ=$L $flags $d/cols.cu -o $exe -Xptxas -v > $o/build-$v-$L.log 2>&1 \
      || { echo "build $v $L failed"; tail -20 $o/build-$v-$L.log; continue; }
    r=$(grep -A3 "Compiling entry function 'toeplitz_columns_$L'" $o/build-$v-$L.log | grep -o "Used [0-9]* registers\|[0-9]* bytes spill stores" | paste -sd' ')
    echo "$v L=$L: $r"
    $exe 2>&1 | sed "s/^/$v L=$L: /" > $o/run-$v-$L.txt
    grep -v round $o/run-$v-$L.txt | tail -1
    grep round $o/run-$v-$L.txt | awk '{print $(NF-1)}' | paste -sd' ' | sed "s/^/$v L=$L: ms /"
  done
done
rm -f $d/lines-v.cu
tar czf ${OUT:-/tmp/cols}/c.tgz -C $o .
