//! The fine grid's 3-D FFT, pruned to the lines the NUFFT needs.
//!
//! Only `M_d` of the `n_d` frequencies per axis are modes (about half at
//! upsampling 2). Type 1 transforms x on every row, then y only on the
//! columns of the x modes, then z only on the (x, y) mode columns: 1.75
//! grids of 1-D FFTs instead of 3. Type 2 runs the same passes in reverse,
//! where the other lines are still zero. 1-D transforms are rustfft's,
//! planned once per axis; strided lines are gathered into blocks of
//! contiguous lines, transformed together and scattered back.
//!
//! Why rustfft: it is pure Rust (no FFTW, whose GPL would bind the
//! project, and no system package), picks AVX code paths at run time, and
//! is already the CPU backend's FFT. Measured against FINUFFT (whose FFT
//! is ducc0) on the same problems, the whole type 1 and Q are as fast or
//! faster (bench/nufft-cpu-2core-2026-11-22.md), so a second FFT crate
//! would buy nothing.

use rayon::prelude::*;
use recon_core::{Complex, Real};
use rustfft::{Fft, FftDirection, FftPlanner};
use std::sync::Arc;

/// Lines gathered per block along y and z.
const BLOCK: usize = 16;

/// The pruned transforms of one fine grid shape and exponent sign.
pub(crate) struct Pruned<T: Real> {
    n: [usize; 3],
    /// The fine-grid indices of the modes per axis: `0 .. M - M/2` and
    /// `n - M/2 .. n`, as two ranges.
    used: [[std::ops::Range<usize>; 2]; 3],
    fft: [Arc<dyn Fft<T>>; 3],
}

/// A raw pointer to the grid for passes whose tasks touch disjoint
/// elements that no slice split can express (columns along z).
#[derive(Clone, Copy)]
struct Shared<T>(*mut Complex<T>);
// SAFETY: each task of a pass reads and writes only its own lines (see
// the passes), so sharing the pointer across threads races on nothing.
unsafe impl<T> Send for Shared<T> {}
unsafe impl<T> Sync for Shared<T> {}

impl<T: Real> Pruned<T> {
    /// `sign` +1 computes `sum_j g_j exp(+i 2 pi k j / n)`, -1 the other.
    pub fn new(n: [usize; 3], modes: [usize; 3], sign: i32) -> Self {
        let mut planner = FftPlanner::<T>::new();
        let dir = if sign > 0 {
            FftDirection::Inverse // rustfft's inverse is unnormalised
        } else {
            FftDirection::Forward
        };
        let used = [0, 1, 2].map(|d| {
            let (m, n) = (modes[d], n[d]);
            [0..m - m / 2, n - m / 2..n]
        });
        Pruned {
            n,
            used,
            fft: n.map(|len| planner.plan_fft(len, dir)),
        }
    }

    fn columns(&self, d: usize) -> impl Iterator<Item = usize> + '_ {
        self.used[d].iter().flat_map(|r| r.clone())
    }

    /// Type 1's transform: every x row, the x-mode columns along y, the
    /// (x, y)-mode columns along z. Lines outside are left unfinished.
    pub fn forward_pruned(&self, g: &mut [Complex<T>]) {
        self.rows_x(g);
        self.columns_y(g);
        self.columns_z(g);
    }

    /// Type 2's transform, where only mode positions are nonzero: z on
    /// the (x, y)-mode columns, y on the x-mode columns, every x row.
    pub fn backward_pruned(&self, g: &mut [Complex<T>]) {
        self.columns_z(g);
        self.columns_y(g);
        self.rows_x(g);
    }

    fn rows_x(&self, g: &mut [Complex<T>]) {
        let nx = self.n[0];
        let fft = &self.fft[0];
        let rows = (g.len() / nx)
            .div_ceil(4 * rayon::current_num_threads())
            .max(1);
        g.par_chunks_mut(rows * nx).for_each(|chunk| {
            let mut scratch = vec![Complex::default(); fft.get_inplace_scratch_len()];
            fft.process_with_scratch(chunk, &mut scratch);
        });
    }

    /// Along y, for the x-mode columns, plane by plane (parallel over z).
    fn columns_y(&self, g: &mut [Complex<T>]) {
        let [nx, ny, _] = self.n;
        let fft = &self.fft[1];
        let cols: Vec<usize> = self.columns(0).collect();
        g.par_chunks_mut(nx * ny).for_each(|plane| {
            let mut buf = vec![Complex::default(); BLOCK * ny];
            let mut scratch = vec![Complex::default(); fft.get_inplace_scratch_len()];
            for block in cols.chunks(BLOCK) {
                let lines = &mut buf[..block.len() * ny];
                for y in 0..ny {
                    for (b, &x) in block.iter().enumerate() {
                        lines[b * ny + y] = plane[y * nx + x];
                    }
                }
                fft.process_with_scratch(lines, &mut scratch);
                for y in 0..ny {
                    for (b, &x) in block.iter().enumerate() {
                        plane[y * nx + x] = lines[b * ny + y];
                    }
                }
            }
        });
    }

    /// Along z, for the (x, y)-mode columns (parallel over y).
    fn columns_z(&self, g: &mut [Complex<T>]) {
        let [nx, ny, nz] = self.n;
        assert_eq!(g.len(), nx * ny * nz, "fine grid");
        let fft = &self.fft[2];
        let xs: Vec<usize> = self.columns(0).collect();
        let ys: Vec<usize> = self.columns(1).collect();
        let shared = Shared(g.as_mut_ptr());
        ys.par_iter().for_each(|&y| {
            let ptr = shared;
            let mut buf = vec![Complex::default(); BLOCK * nz];
            let mut scratch = vec![Complex::default(); fft.get_inplace_scratch_len()];
            for block in xs.chunks(BLOCK) {
                let lines = &mut buf[..block.len() * nz];
                for z in 0..nz {
                    let row = (z * ny + y) * nx;
                    for (b, &x) in block.iter().enumerate() {
                        // SAFETY: index < nx ny nz (checked above); only
                        // this task touches row y's columns.
                        lines[b * nz + z] = unsafe { *ptr.0.add(row + x) };
                    }
                }
                fft.process_with_scratch(lines, &mut scratch);
                for z in 0..nz {
                    let row = (z * ny + y) * nx;
                    for (b, &x) in block.iter().enumerate() {
                        // SAFETY: as above.
                        unsafe { *ptr.0.add(row + x) = lines[b * nz + z] };
                    }
                }
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pruned_passes_agree_with_the_full_dft_on_the_lines_they_promise() {
        let (n, m) = ([8, 6, 10], [4, 3, 5]);
        let len = n.iter().product::<usize>();
        let g: Vec<Complex<f64>> = (0..len)
            .map(|i| Complex::new((i as f64 * 0.37).sin(), (i as f64 * 0.11).cos()))
            .collect();
        let dft = |g: &[Complex<f64>], k: [usize; 3], sign: f64| -> Complex<f64> {
            let mut acc = Complex::default();
            for z in 0..n[2] {
                for y in 0..n[1] {
                    for x in 0..n[0] {
                        let ph = sign
                            * std::f64::consts::TAU
                            * ((k[0] * x) as f64 / n[0] as f64
                                + (k[1] * y) as f64 / n[1] as f64
                                + (k[2] * z) as f64 / n[2] as f64);
                        acc += g[(z * n[1] + y) * n[0] + x] * Complex::from_polar(1.0, ph);
                    }
                }
            }
            acc
        };
        for sign in [1, -1] {
            let p = Pruned::<f64>::new(n, m, sign);
            let mut a = g.clone();
            p.forward_pruned(&mut a);
            let idx = |k: [usize; 3]| (k[2] * n[1] + k[1]) * n[0] + k[0];
            for z in p.columns(2).collect::<Vec<_>>() {
                for y in p.columns(1).collect::<Vec<_>>() {
                    for x in p.columns(0).collect::<Vec<_>>() {
                        let want = dft(&g, [x, y, z], sign as f64);
                        // 480-term sums in f64.
                        assert!((a[idx([x, y, z])] - want).norm() < 1e-12);
                    }
                }
            }
            // Backward: nonzero only at mode positions, then every output.
            let mut b = vec![Complex::default(); len];
            let mut src = vec![Complex::default(); len];
            for z in p.columns(2).collect::<Vec<_>>() {
                for y in p.columns(1).collect::<Vec<_>>() {
                    for x in p.columns(0).collect::<Vec<_>>() {
                        src[idx([x, y, z])] = g[idx([x, y, z])];
                        b[idx([x, y, z])] = g[idx([x, y, z])];
                    }
                }
            }
            p.backward_pruned(&mut b);
            for (i, v) in b.iter().enumerate() {
                let k = [i % n[0], (i / n[0]) % n[1], i / (n[0] * n[1])];
                assert!((v - dft(&src, k, sign as f64)).norm() < 1e-12);
            }
        }
    }
}
