//! Spreading (type 1) and interpolation (type 2) on the fine grid, with
//! the points of a plan sorted once into slabs and bins.
//!
//! Spreading runs in parallel without write races and without a grid per
//! thread: the grid is cut into `L` (even) slabs of at least `w` z planes,
//! a point belongs to the slab of its footprint's first plane, and its
//! footprint then reaches at most into the next slab. Even slabs spread
//! together, then odd ones. Within a slab, points are sorted into bins of
//! 16 x 16 cells in x and y. A bin with many points spreads into a small
//! buffer of its own cells plus the kernel's overhang (a subproblem, as in
//! FINUFFT and cuFINUFFT: it stays in cache), then adds the buffer into
//! the grid; a bin with few points spreads straight into the grid.

use crate::kernel::{Horner, MAX_WIDTH};
use rayon::prelude::*;
use recon_core::{Complex, Real};
use std::ops::Range;

/// Bin edge in cells along x and y for the sort.
const BIN: usize = 16;

/// A plan's points, in sorted order.
#[derive(Debug, Clone)]
pub(crate) struct Points {
    /// Fine-grid coordinates in `[0, n_d)` per axis.
    pub u: Vec<[f64; 3]>,
    /// `u[i]` is the caller's point `order[i]`.
    pub order: Vec<u32>,
    /// The sorted points of each slab.
    pub slabs: Vec<Range<usize>>,
    /// The first plane of each slab, and one past the last slab's end.
    pub slab_planes: Vec<usize>,
    /// Bins per slab along x and y.
    pub bins: [usize; 2],
    /// The sorted points of bin `(slab * bins[1] + y) * bins[0] + x` start
    /// at `bin_start[bin]` (one more entry at the end).
    pub bin_start: Vec<usize>,
}

/// Slabs of at least `w` planes, an even number of them (or one).
fn slab_layout(nz: usize, w: usize) -> (usize, usize) {
    let want = (8 * rayon::current_num_threads()).max(2);
    let count = (nz / w).min(want) & !1;
    if count < 2 {
        return (1, nz);
    }
    // The last slab also takes the remainder.
    (count, nz / count)
}

impl Points {
    /// Sorts `x` (radians, any real value) for a fine grid `n`.
    pub fn new(x: &[[f64; 3]], n: [usize; 3], h: &Horner) -> Points {
        let w = h.width;
        let (count, size) = slab_layout(n[2], w);
        let u: Vec<[f64; 3]> = x
            .iter()
            .map(|p| {
                [0, 1, 2].map(|d| {
                    let v = (p[d] / std::f64::consts::TAU).rem_euclid(1.0) * n[d] as f64;
                    // rem_euclid of a tiny negative rounds to 1.
                    if v >= n[d] as f64 {
                        0.0
                    } else {
                        v
                    }
                })
            })
            .collect();
        let first = |v: f64, len: usize| -> usize {
            ((v - w as f64 / 2.0).ceil() as i64).rem_euclid(len as i64) as usize
        };
        let bins = [n[0].div_ceil(BIN), n[1].div_ceil(BIN)];
        let key = |p: &[f64; 3]| -> usize {
            let slab = (first(p[2], n[2]) / size).min(count - 1);
            (slab * bins[1] + first(p[1], n[1]) / BIN) * bins[0] + first(p[0], n[0]) / BIN
        };
        // Counting sort by key.
        let keys: Vec<usize> = u.iter().map(key).collect();
        let mut start = vec![0usize; count * bins[0] * bins[1] + 1];
        for &k in &keys {
            start[k + 1] += 1;
        }
        for i in 1..start.len() {
            start[i] += start[i - 1];
        }
        let per_slab = bins[0] * bins[1];
        let slabs = (0..count)
            .map(|s| start[s * per_slab]..start[(s + 1) * per_slab])
            .collect();
        let bin_start = start.clone();
        let mut order = vec![0u32; u.len()];
        for (m, &k) in keys.iter().enumerate() {
            order[start[k]] = m as u32;
            start[k] += 1;
        }
        let u = order.iter().map(|&m| u[m as usize]).collect();
        let mut slab_planes: Vec<usize> = (0..count).map(|s| s * size).collect();
        slab_planes.push(n[2]);
        Points {
            u,
            order,
            slabs,
            slab_planes,
            bins,
            bin_start,
        }
    }
}

/// A point's footprint: first cell per axis and the kernel's `W` values
/// (along a flat y axis, `WY = 1`: the one cell, weight 1).
struct Footprint<T, const W: usize> {
    first: [i64; 3],
    w: [[T; W]; 3],
}

#[inline(always)]
fn footprint<T: Real, const W: usize, const WY: usize>(
    h: &Horner,
    u: &[f64; 3],
) -> Footprint<T, W> {
    let mut first = [0; 3];
    let mut w = [[T::zero(); W]; 3];
    for d in 0..3 {
        if d == 1 && WY == 1 {
            // One mode along y: the grid has one cell, and every point sits on it.
            w[1][0] = T::one();
            continue;
        }
        let mut v = [0.0; W];
        first[d] = h.footprint(u[d], &mut v);
        for (o, x) in w[d].iter_mut().zip(&v) {
            *o = T::of(*x);
        }
    }
    Footprint { first, w }
}

/// Calls `$f::<T, W, WY>($args)` with the kernel width `W` as a constant,
/// and `WY` the width along y (`W`, or 1 on a flat grid of one y cell), so
/// that every loop over a footprint is unrolled for its width (FINUFFT
/// instantiates its spreader per width the same way, and per dimension).
macro_rules! with_width {
    ($w:expr, $flat:expr, $f:ident::<$t:ty>($($arg:expr),*)) => {
        with_width!(@arms $w, $flat, $f, $t, ($($arg),*); 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16)
    };
    (@arms $w:expr, $flat:expr, $f:ident, $t:ty, $args:tt; $($n:literal)*) => {
        match ($w, $flat) {
            $(
                ($n, false) => with_width!(@call $f, $t, $n, $n, $args),
                ($n, true) => with_width!(@call $f, $t, $n, 1, $args),
            )*
            (w, _) => unreachable!("kernel width {w} outside 2 to {MAX_WIDTH}"),
        }
    };
    (@call $f:ident, $t:ty, $w:tt, $wy:tt, ($($arg:expr),*)) => {
        $f::<$t, $w, $wy>($($arg),*)
    };
}

/// The grid as the spreading tasks share it.
#[derive(Clone, Copy)]
struct Shared<T>(*mut Complex<T>);
// SAFETY: the tasks of one phase write disjoint planes (module docs).
unsafe impl<T> Send for Shared<T> {}
unsafe impl<T> Sync for Shared<T> {}

/// `g[j] += sum_m c[m] K(j - u_m)` over the periodic fine grid `n`, with
/// `c` in the caller's order.
pub(crate) fn spread<T: Real>(
    g: &mut [Complex<T>],
    n: [usize; 3],
    h: &Horner,
    pts: &Points,
    c: &[Complex<T>],
) {
    assert_eq!(g.len(), n.iter().product::<usize>(), "fine grid");
    with_width!(h.width, n[1] == 1, spread_w::<T>(g, n, h, pts, c))
}

/// Points a bin needs before a subproblem pays for adding its buffer
/// into the grid (about `(BIN + w)^2 (S + w)` additions, against `w^3` per
/// point with scattered accesses).
pub(crate) const SUBPROBLEM_POINTS: usize = 32;

fn spread_w<T: Real, const W: usize, const WY: usize>(
    g: &mut [Complex<T>],
    n: [usize; 3],
    h: &Horner,
    pts: &Points,
    c: &[Complex<T>],
) {
    let grid = Shared(g.as_mut_ptr());
    let avx = has_avx2_fma();
    let spread_slab = |s: usize| {
        // SAFETY: the grid holds n[0] n[1] n[2] values (checked by
        // `spread`), and the phases keep tasks on disjoint planes; the AVX
        // version runs only where the CPU has AVX2 and FMA.
        unsafe {
            if avx {
                slab_avx::<T, W, WY>(grid, n, h, pts, c, s)
            } else {
                slab::<T, W, WY>(grid, n, h, pts, c, s)
            }
        }
    };
    if pts.slabs.len() == 1 {
        spread_slab(0);
        return;
    }
    for phase in 0..2 {
        (phase..pts.slabs.len())
            .into_par_iter()
            .step_by(2)
            .for_each(spread_slab);
    }
}

/// Whether this CPU has AVX2 and FMA: the spreader and interpolator then
/// run a copy compiled for them (FINUFFT's kernels are vectorised the same
/// way), twice the width of the baseline SSE2.
fn has_avx2_fma() -> bool {
    #[cfg(test)]
    if PLAIN_ONLY.load(std::sync::atomic::Ordering::Relaxed) {
        return false;
    }
    #[cfg(target_arch = "x86_64")]
    {
        std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Tests set this to run the baseline copies on any CPU.
#[cfg(test)]
pub(crate) static PLAIN_ONLY: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

/// [`slab`] compiled for AVX2 and FMA.
///
/// # Safety
/// As [`slab`], on a CPU with AVX2 and FMA.
#[cfg_attr(target_arch = "x86_64", target_feature(enable = "avx2,fma"))]
unsafe fn slab_avx<T: Real, const W: usize, const WY: usize>(
    grid: Shared<T>,
    n: [usize; 3],
    h: &Horner,
    pts: &Points,
    c: &[Complex<T>],
    s: usize,
) {
    slab::<T, W, WY>(grid, n, h, pts, c, s)
}

/// Spreads the points of slab `s`, bin by bin.
///
/// # Safety
/// `grid` holds `n[0] n[1] n[2]` values, and no other thread touches the
/// slab's planes and the `W` after them while this runs.
#[inline(always)]
unsafe fn slab<T: Real, const W: usize, const WY: usize>(
    grid: Shared<T>,
    n: [usize; 3],
    h: &Horner,
    pts: &Points,
    c: &[Complex<T>],
    s: usize,
) {
    let z0 = pts.slab_planes[s];
    let depth = pts.slab_planes[s + 1] - z0 + W;
    let (bx, by) = (BIN + W, if WY == 1 { 1 } else { BIN + W });
    let mut buf = vec![Complex::<T>::default(); bx * by * depth];
    let per_slab = pts.bins[0] * pts.bins[1];
    for b in s * per_slab..(s + 1) * per_slab {
        let range = pts.bin_start[b]..pts.bin_start[b + 1];
        if range.len() < SUBPROBLEM_POINTS {
            // SAFETY: this task owns planes z0 .. z0 + depth (mod nz)
            // in this phase (module docs).
            unsafe { spread_direct::<T, W, WY>(grid, n, h, pts, c, range) };
            continue;
        }
        let (xb, yb) = ((b % per_slab) % pts.bins[0], (b % per_slab) / pts.bins[0]);
        let origin = [xb * BIN, yb * BIN, z0];
        buf.iter_mut().for_each(|v| *v = Complex::default());
        for i in range {
            let f = footprint::<T, W, WY>(h, &pts.u[i]);
            let ci = c[pts.order[i] as usize];
            let cx: [Complex<T>; W] = std::array::from_fn(|j| ci * f.w[0][j]);
            // Local cells: the footprint's first cell lies in this bin
            // and slab, so every index is inside the buffer.
            let local = |d: usize| (f.first[d].rem_euclid(n[d] as i64) as usize) - origin[d];
            let (lx, ly, lz) = (local(0), local(1), local(2));
            for a in 0..W {
                for bb in 0..WY {
                    let wzy = f.w[2][a] * f.w[1][bb];
                    let row = ((lz + a) * by + ly + bb) * bx + lx;
                    let r: &mut [Complex<T>; W] =
                        (&mut buf[row..row + W]).try_into().expect("W cells");
                    for (g, v) in r.iter_mut().zip(&cx) {
                        *g = *g + *v * wzy;
                    }
                }
            }
        }
        // Add the buffer into the grid, wrapping periodically.
        for lz in 0..depth {
            let z = (z0 + lz) % n[2];
            for ly in 0..by {
                let y = (origin[1] + ly) % n[1];
                let src = &buf[(lz * by + ly) * bx..][..bx];
                let row = (z * n[1] + y) * n[0];
                for (lx, v) in src.iter().enumerate() {
                    let x = (origin[0] + lx) % n[0];
                    // SAFETY: in the grid, and in this task's planes.
                    unsafe {
                        let g = grid.0.add(row + x);
                        *g = *g + *v;
                    }
                }
            }
        }
    }
}

/// Spreads the sorted points `range` straight into the periodic grid.
///
/// # Safety
/// `grid` holds `n[0] n[1] n[2]` values, and no other thread touches the
/// planes these points' footprints reach while this runs.
#[inline(always)]
unsafe fn spread_direct<T: Real, const W: usize, const WY: usize>(
    grid: Shared<T>,
    n: [usize; 3],
    h: &Horner,
    pts: &Points,
    c: &[Complex<T>],
    range: Range<usize>,
) {
    for i in range {
        let f = footprint::<T, W, WY>(h, &pts.u[i]);
        let ci = c[pts.order[i] as usize];
        let cx: [Complex<T>; W] = std::array::from_fn(|j| ci * f.w[0][j]);
        let x0 = f.first[0].rem_euclid(n[0] as i64) as usize;
        let contiguous = x0 + W <= n[0];
        for a in 0..W {
            let z = (f.first[2] + a as i64).rem_euclid(n[2] as i64) as usize;
            for b in 0..WY {
                let y = (f.first[1] + b as i64).rem_euclid(n[1] as i64) as usize;
                let wzy = f.w[2][a] * f.w[1][b];
                let row = (z * n[1] + y) * n[0];
                // SAFETY: row + x < nx ny nz for every x < nx; the planes
                // are the caller's.
                unsafe {
                    if contiguous {
                        let r = &mut *(grid.0.add(row + x0) as *mut [Complex<T>; W]);
                        for (g, v) in r.iter_mut().zip(&cx) {
                            *g = *g + *v * wzy;
                        }
                    } else {
                        for (j, v) in cx.iter().enumerate() {
                            let g = grid.0.add(row + (x0 + j) % n[0]);
                            *g = *g + *v * wzy;
                        }
                    }
                }
            }
        }
    }
}

/// `out[m] = sum_j g[j] K(j - u_m)`, in the caller's order.
pub(crate) fn interpolate<T: Real>(
    out: &mut [Complex<T>],
    g: &[Complex<T>],
    n: [usize; 3],
    h: &Horner,
    pts: &Points,
) {
    assert_eq!(g.len(), n.iter().product::<usize>(), "fine grid");
    with_width!(h.width, n[1] == 1, interpolate_w::<T>(out, g, n, h, pts))
}

fn interpolate_w<T: Real, const W: usize, const WY: usize>(
    out: &mut [Complex<T>],
    g: &[Complex<T>],
    n: [usize; 3],
    h: &Horner,
    pts: &Points,
) {
    let avx = has_avx2_fma();
    let mut sorted = vec![Complex::<T>::default(); pts.u.len()];
    sorted
        .par_chunks_mut(1024)
        .zip(pts.u.par_chunks(1024))
        .for_each(|(o, u)| {
            if avx {
                // SAFETY: this CPU has AVX2 and FMA.
                unsafe { points_avx::<T, W, WY>(o, u, g, n, h) }
            } else {
                points::<T, W, WY>(o, u, g, n, h)
            }
        });
    for (v, &m) in sorted.iter().zip(&pts.order) {
        out[m as usize] = *v;
    }
}

/// [`points`] compiled for AVX2 and FMA.
///
/// # Safety
/// Only on a CPU with AVX2 and FMA.
#[cfg_attr(target_arch = "x86_64", target_feature(enable = "avx2,fma"))]
unsafe fn points_avx<T: Real, const W: usize, const WY: usize>(
    out: &mut [Complex<T>],
    u: &[[f64; 3]],
    g: &[Complex<T>],
    n: [usize; 3],
    h: &Horner,
) {
    points::<T, W, WY>(out, u, g, n, h)
}

/// Interpolates the grid at each of `u` into `out`.
#[inline(always)]
fn points<T: Real, const W: usize, const WY: usize>(
    out: &mut [Complex<T>],
    u: &[[f64; 3]],
    g: &[Complex<T>],
    n: [usize; 3],
    h: &Horner,
) {
    for (o, u) in out.iter_mut().zip(u) {
        *o = point::<T, W, WY>(u, g, n, h);
    }
}

#[inline(always)]
fn point<T: Real, const W: usize, const WY: usize>(
    u: &[f64; 3],
    g: &[Complex<T>],
    n: [usize; 3],
    h: &Horner,
) -> Complex<T> {
    let f = footprint::<T, W, WY>(h, u);
    let x0 = f.first[0].rem_euclid(n[0] as i64) as usize;
    let contiguous = x0 + W <= n[0];
    let mut acc = Complex::default();
    for a in 0..W {
        let z = (f.first[2] + a as i64).rem_euclid(n[2] as i64) as usize;
        let mut acc_z = Complex::default();
        for b in 0..WY {
            let y = (f.first[1] + b as i64).rem_euclid(n[1] as i64) as usize;
            let row = &g[(z * n[1] + y) * n[0]..][..n[0]];
            let mut acc_y = Complex::default();
            if contiguous {
                let r: &[Complex<T>; W] = row[x0..x0 + W].try_into().expect("W cells");
                for (v, wx) in r.iter().zip(&f.w[0]) {
                    acc_y = acc_y + *v * *wx;
                }
            } else {
                for (j, wx) in f.w[0].iter().enumerate() {
                    acc_y = acc_y + row[(x0 + j) % n[0]] * *wx;
                }
            }
            acc_z = acc_z + acc_y * f.w[1][b];
        }
        acc = acc + acc_z * f.w[2][a];
    }
    acc
}
