//! Non-uniform FFTs on the CPU, the way FINUFFT computes them (Barnett,
//! Magland and af Klinteberg 2019): spread with the exponential-of-semicircle
//! kernel onto a grid upsampled by sigma = 2, FFT, and divide by the
//! kernel's Fourier transform (type 1); or the same steps in reverse
//! (type 2). The kernel's width and shape follow from the tolerance.
//!
//! Conventions (FINUFFT's, 3-D, modes centred):
//! - type 1: `f[k] = sum_m c_m exp(s i k . x_m)` for `k_d` in `-M_d/2 .. M_d/2`;
//! - type 2: `c_m = sum_k f[k] exp(s i k . x_m)`;
//!
//! with `s = ±1`, points `x_m` in radians (periodic in 2 pi), and `f`
//! stored x fastest with mode `-M_d/2` first. recon's sums map onto these
//! with `x_m = 2 pi k_m / N_d` (k in cycles/FOV): F^H D is type 1 with
//! `s = +1` on the image grid, Q is type 1 on the doubled grid, and the
//! forward model is type 2 with `s = -1`.
//!
//! This first engine runs in float32 or float64, parallel over rayon: type 2 over points,
//! type 1 over z-slabs of the fine grid, each spreading into a buffer of
//! its own (no write races). It is tested here against direct summation.

use recon_core::{Backend, Complex, CpuBackend, Direction, Real};

pub mod mri;

/// Kernel width limits, in grid cells: 3 serves tolerance 1e-1, 16 1e-14.
const MIN_WIDTH: usize = 2;
const MAX_WIDTH: usize = 16;

/// The exponential-of-semicircle kernel `exp(beta (sqrt(1 - z^2) - 1))`,
/// `z = 2 t / w` for an offset of `t` grid cells, zero beyond `|z| = 1`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Kernel {
    /// Width in grid cells.
    pub width: usize,
    pub beta: f64,
}

impl Kernel {
    /// For upsampling 2: `w = ceil(log10(1 / tol)) + 2`, `beta = 2.30 w`
    /// (less for the narrowest, as FINUFFT tunes them). FINUFFT takes one
    /// cell less, and its relative L2 error is then 1 to 3 times the
    /// tolerance (measured here, 3-D, tolerances 1e-2 to 1e-12); one more
    /// cell keeps the error below the tolerance, as recon promises.
    pub fn for_tolerance(tol: f64) -> Result<Kernel, String> {
        if !(tol.is_finite() && (1e-14..=1e-1).contains(&tol)) {
            return Err(format!("tolerance must lie in [1e-14, 1e-1], got {tol}"));
        }
        let width = ((1.0 / tol).log10().ceil() as usize + 2).clamp(MIN_WIDTH, MAX_WIDTH);
        // beta / w as FINUFFT tunes it for the narrowest kernels.
        let per_cell = match width {
            2 => 2.20,
            3 => 2.26,
            4 => 2.38,
            _ => 2.30,
        };
        Ok(Kernel {
            width,
            beta: per_cell * width as f64,
        })
    }

    /// The kernel at an offset of `t` cells.
    pub fn at(&self, t: f64) -> f64 {
        let z = 2.0 * t / self.width as f64;
        if z.abs() >= 1.0 {
            return 0.0;
        }
        (self.beta * ((1.0 - z * z).sqrt() - 1.0)).exp()
    }

    /// Its Fourier transform `int K(t) cos(2 pi t xi) dt` (t in cells, xi
    /// in cycles per cell) at each of `xis`, by Gauss-Legendre quadrature in
    /// z (nodes computed once): the kernel is smooth inside its support and
    /// negligible (e^-beta) at its ends.
    pub fn transform(&self, xis: &[f64]) -> Vec<f64> {
        let half = self.width as f64 / 2.0;
        let nodes: Vec<(f64, f64)> = gauss_legendre(4 * self.width + 8)
            .into_iter()
            .map(|(z, w)| (half * z, w * half * self.at(half * z)))
            .collect();
        xis.iter()
            .map(|xi| {
                nodes
                    .iter()
                    .map(|(t, wk)| wk * (2.0 * std::f64::consts::PI * t * xi).cos())
                    .sum()
            })
            .collect()
    }
}

/// Nodes and weights of `n`-point Gauss-Legendre quadrature on [-1, 1],
/// by Newton's iteration on the Legendre recurrence.
fn gauss_legendre(n: usize) -> Vec<(f64, f64)> {
    (0..n)
        .map(|i| {
            let mut x = (std::f64::consts::PI * (i as f64 + 0.75) / (n as f64 + 0.5)).cos();
            let mut dp = 1.0;
            for _ in 0..100 {
                let (mut p0, mut p1) = (1.0, x);
                for k in 2..=n {
                    let p2 = ((2 * k - 1) as f64 * x * p1 - (k - 1) as f64 * p0) / k as f64;
                    p0 = p1;
                    p1 = p2;
                }
                // P_n(x) = p1, P_{n-1}(x) = p0
                dp = n as f64 * (x * p1 - p0) / (x * x - 1.0);
                let dx = p1 / dp;
                x -= dx;
                if dx.abs() < 1e-16 {
                    break;
                }
            }
            (x, 2.0 / ((1.0 - x * x) * dp * dp))
        })
        .collect()
}

/// A footprint's kernel weights along one axis, on the stack (this runs
/// once per point and axis).
#[derive(Clone, Copy)]
struct Weights<T> {
    w: [T; MAX_WIDTH + 1],
    len: usize,
}

impl<T> Weights<T> {
    fn iter(&self) -> std::slice::Iter<'_, T> {
        self.w[..self.len].iter()
    }
}

/// A plan for one mode shape, kernel, sign and precision `T` (f32 or f64):
/// the upsampled grid and the kernel's transform per axis, computed once
/// and reused for any points. Points are float64 (radians); strengths,
/// modes and the fine grid are `T`, kernel weights are computed in float64
/// and rounded to `T`.
#[derive(Debug, Clone)]
pub struct Plan<T: Real = f64> {
    /// Modes per axis, x y z.
    pub modes: [usize; 3],
    /// The upsampled grid per axis (even, at least 2 modes and the kernel's width).
    pub fine: [usize; 3],
    pub kernel: Kernel,
    /// +1 or -1: the sign of the exponent.
    pub sign: i32,
    /// `1 / K^(k / fine)` per axis, for modes `-M/2 .. M/2`.
    correction: [Vec<T>; 3],
}

impl<T: Real> Plan<T> {
    /// A plan for `modes` (each at least 1) at tolerance `tol` (at least
    /// 1e-6 in float32, which cannot reach below).
    pub fn new(modes: [usize; 3], tol: f64, sign: i32) -> Result<Plan<T>, String> {
        if modes.contains(&0) {
            return Err(format!("every axis needs at least one mode, got {modes:?}"));
        }
        if sign != 1 && sign != -1 {
            return Err(format!("the sign must be +1 or -1, got {sign}"));
        }
        if std::mem::size_of::<T>() == 4 && tol < 1e-6 {
            return Err(format!(
                "tolerance {tol:e} is below what float32 reaches (1e-6)"
            ));
        }
        let kernel = Kernel::for_tolerance(tol)?;
        let fine = modes.map(|m| (2 * m).max(2 * kernel.width).next_multiple_of(2));
        let correction = [0, 1, 2].map(|d| {
            let (m, n) = (modes[d] as i64, fine[d] as f64);
            let xis: Vec<f64> = (-m / 2..m - m / 2).map(|k| k as f64 / n).collect();
            kernel
                .transform(&xis)
                .into_iter()
                .map(|v| T::of(1.0 / v))
                .collect()
        });
        Ok(Plan {
            modes,
            fine,
            kernel,
            sign,
            correction,
        })
    }

    fn modes_len(&self) -> usize {
        self.modes.iter().product()
    }

    /// The kernel's grid footprint of point `x` along an axis of `n` cells:
    /// the first cell and the weights of `width + 1` cells from it.
    fn footprint(&self, x: f64, n: usize) -> (i64, Weights<T>) {
        let w = self.kernel.width;
        // grid coordinate in cells, in [0, n)
        let u = (x / (2.0 * std::f64::consts::PI)).rem_euclid(1.0) * n as f64;
        let first = (u - w as f64 / 2.0).ceil() as i64;
        let mut weights = Weights {
            w: [T::zero(); MAX_WIDTH + 1],
            len: w + 1,
        };
        for (j, v) in weights.w[..=w].iter_mut().enumerate() {
            *v = T::of(self.kernel.at((first + j as i64) as f64 - u));
        }
        (first, weights)
    }

    /// Calls `f(index, weight)` over point `x`'s footprint, where the
    /// index is into planes of the fine grid's x-y size and `plane(first,
    /// a)` gives the plane of the footprint's `a`-th z cell (`first` is the
    /// footprint's first z cell, unwrapped).
    fn each_cell(
        &self,
        x: &[f64; 3],
        plane: impl Fn(i64, usize) -> usize,
        mut f: impl FnMut(usize, T),
    ) {
        let fp = [0, 1, 2].map(|d| self.footprint(x[d], self.fine[d]));
        let n = self.fine.map(|v| v as i64);
        for (a, wz) in fp[2].1.iter().enumerate() {
            let z = plane(fp[2].0, a) as i64;
            for (b, wy) in fp[1].1.iter().enumerate() {
                let y = (fp[1].0 + b as i64).rem_euclid(n[1]);
                let row = ((z * n[1] + y) * n[0]) as usize;
                let wzy = *wz * *wy;
                for (c, wx) in fp[0].1.iter().enumerate() {
                    let xi = (fp[0].0 + c as i64).rem_euclid(n[0]) as usize;
                    f(row + xi, wzy * *wx);
                }
            }
        }
    }

    /// The plane of a footprint's `a`-th z cell on the whole periodic grid.
    fn global_plane(&self) -> impl Fn(i64, usize) -> usize {
        let nz = self.fine[2] as i64;
        move |first, a| (first + a as i64).rem_euclid(nz) as usize
    }

    /// Spreads `c` at `x` onto the fine grid, in parallel without write
    /// races: points are sorted by the z-slab where their footprint starts;
    /// each slab spreads into its own buffer of its planes plus the kernel's
    /// overhang, and the buffers are added into the grid in turn.
    fn spread(&self, x: &[[f64; 3]], c: &[Complex<T>]) -> Vec<Complex<T>> {
        use rayon::prelude::*;
        let [nx, ny, nz] = self.fine;
        let plane = nx * ny;
        let w = self.kernel.width;
        // Several slabs a thread, so uneven point densities still balance.
        let slabs = (4 * rayon::current_num_threads()).clamp(1, nz);
        let size = nz.div_ceil(slabs);
        let first_plane = |p: &[f64; 3]| self.footprint(p[2], nz).0.rem_euclid(nz as i64) as usize;
        let mut by_slab: Vec<Vec<usize>> = vec![Vec::new(); nz.div_ceil(size)];
        for (m, p) in x.iter().enumerate() {
            by_slab[first_plane(p) / size].push(m);
        }
        let buffers: Vec<(usize, Vec<Complex<T>>)> = by_slab
            .par_iter()
            .enumerate()
            .filter(|(_, pts)| !pts.is_empty())
            .map(|(s, pts)| {
                let start = s * size;
                let mut buf = vec![Complex::default(); (size + w + 1) * plane];
                let local = |first: i64, a: usize| first.rem_euclid(nz as i64) as usize - start + a;
                for &m in pts {
                    self.each_cell(&x[m], local, |i, wt| buf[i] = buf[i] + c[m] * wt);
                }
                (start, buf)
            })
            .collect();
        let mut grid = vec![Complex::default(); nx * ny * nz];
        for (start, buf) in buffers {
            for (p, chunk) in buf.chunks_exact(plane).enumerate() {
                let z = (start + p) % nz;
                grid[z * plane..(z + 1) * plane]
                    .iter_mut()
                    .zip(chunk)
                    .for_each(|(g, v)| *g = *g + *v);
            }
        }
        grid
    }

    /// The un-normalised DFT of the fine grid with this plan's sign.
    fn fft(&self, grid: &mut Vec<Complex<T>>) {
        let cpu = CpuBackend::<T>::new();
        if self.sign > 0 {
            // The backend's inverse carries 1 / len.
            cpu.fft3(grid, self.fine, Direction::Inverse)
                .expect("fine-grid shape");
            let len = T::of(grid.len() as f64);
            grid.iter_mut().for_each(|v| *v = *v * len);
        } else {
            cpu.fft3(grid, self.fine, Direction::Forward)
                .expect("fine-grid shape");
        }
    }

    /// Fine-grid index of mode `k` (as `-M/2 ..`) along each axis, with its
    /// correction.
    fn each_mode(&self, mut f: impl FnMut(usize, usize, T)) {
        let m = self.modes;
        let n = self.fine;
        let mut i = 0;
        for kz in 0..m[2] {
            let gz = (kz as i64 - (m[2] / 2) as i64).rem_euclid(n[2] as i64) as usize;
            for ky in 0..m[1] {
                let gy = (ky as i64 - (m[1] / 2) as i64).rem_euclid(n[1] as i64) as usize;
                let cyz = self.correction[2][kz] * self.correction[1][ky];
                for kx in 0..m[0] {
                    let gx = (kx as i64 - (m[0] / 2) as i64).rem_euclid(n[0] as i64) as usize;
                    f(
                        i,
                        (gz * n[1] + gy) * n[0] + gx,
                        cyz * self.correction[0][kx],
                    );
                    i += 1;
                }
            }
        }
    }

    /// Type 1: `out[k] = sum_m c[m] exp(s i k . x[m])`.
    pub fn type1(
        &self,
        out: &mut [Complex<T>],
        x: &[[f64; 3]],
        c: &[Complex<T>],
    ) -> Result<(), String> {
        check(out.len(), self.modes_len(), "modes")?;
        check(c.len(), x.len(), "strengths (one per point)")?;
        let mut grid = self.spread(x, c);
        self.fft(&mut grid);
        self.each_mode(|k, g, corr| out[k] = grid[g] * corr);
        Ok(())
    }

    /// Type 2: `out[m] = sum_k f[k] exp(s i k . x[m])`.
    pub fn type2(
        &self,
        out: &mut [Complex<T>],
        x: &[[f64; 3]],
        f: &[Complex<T>],
    ) -> Result<(), String> {
        check(f.len(), self.modes_len(), "modes")?;
        check(out.len(), x.len(), "outputs (one per point)")?;
        let mut grid = vec![Complex::default(); self.fine.iter().product()];
        self.each_mode(|k, g, corr| grid[g] = f[k] * corr);
        self.fft(&mut grid);
        // Interpolation reads the grid only: parallel over points.
        use rayon::prelude::*;
        let global = self.global_plane();
        out.par_iter_mut().zip(x.par_iter()).for_each(|(o, p)| {
            let mut acc = Complex::default();
            self.each_cell(p, &global, |i, w| acc = acc + grid[i] * w);
            *o = acc;
        });
        Ok(())
    }
}

fn check(got: usize, want: usize, what: &str) -> Result<(), String> {
    if got != want {
        return Err(format!("{what}: expected {want} values, got {got}"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fixed pseudo-random stream (SplitMix64).
    struct Rng(u64);
    impl Rng {
        fn f(&mut self) -> f64 {
            self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
        }
        fn sym(&mut self) -> f64 {
            2.0 * self.f() - 1.0
        }
    }

    /// The modes `-M/2 .. M/2` per axis, x fastest, as the plans store them.
    fn modes_of(m: [usize; 3]) -> Vec<[f64; 3]> {
        let centred = |i: usize, d: usize| i as f64 - (m[d] / 2) as f64;
        let mut v = Vec::new();
        for z in 0..m[2] {
            for y in 0..m[1] {
                for x in 0..m[0] {
                    v.push([centred(x, 0), centred(y, 1), centred(z, 2)]);
                }
            }
        }
        v
    }

    fn rel_l2(a: &[Complex<f64>], b: &[Complex<f64>]) -> f64 {
        let num: f64 = a.iter().zip(b).map(|(x, y)| (x - y).norm_sqr()).sum();
        let den: f64 = b.iter().map(|y| y.norm_sqr()).sum();
        (num / den).sqrt()
    }

    fn direct(ks: &[[f64; 3]], x: &[[f64; 3]], c: &[Complex<f64>], sign: f64) -> Vec<Complex<f64>> {
        ks.iter()
            .map(|k| {
                x.iter()
                    .zip(c)
                    .map(|(p, v)| {
                        let ph = sign * (k[0] * p[0] + k[1] * p[1] + k[2] * p[2]);
                        v * Complex::new(ph.cos(), ph.sin())
                    })
                    .sum()
            })
            .collect()
    }

    /// `n` random points in [-pi, pi)^3 with random strengths, and the
    /// modes of `m` with random coefficients.
    #[allow(clippy::type_complexity)]
    fn problem(
        seed: u64,
        m: [usize; 3],
        n: usize,
    ) -> (
        Vec<[f64; 3]>,
        Vec<Complex<f64>>,
        Vec<[f64; 3]>,
        Vec<Complex<f64>>,
    ) {
        let mut rng = Rng(seed);
        let x = (0..n)
            .map(|_| [0, 1, 2].map(|_| std::f64::consts::PI * rng.sym()))
            .collect();
        let c = (0..n).map(|_| Complex::new(rng.sym(), rng.sym())).collect();
        let ks = modes_of(m);
        let f = (0..ks.len())
            .map(|_| Complex::new(rng.sym(), rng.sym()))
            .collect();
        (x, c, ks, f)
    }

    #[test]
    fn type1_and_type2_meet_the_tolerance_against_direct_sums() {
        // Non-cubic, with an odd axis.
        let m = [10, 7, 12];
        let (x, c, ks, f) = problem(3, m, 300);
        for sign in [1, -1] {
            let want1 = direct(&ks, &x, &c, sign as f64);
            let want2 = direct(&x, &ks, &f, sign as f64);
            for tol in [1e-2, 1e-3, 1e-6, 1e-9, 1e-12] {
                let plan = Plan::new(m, tol, sign).unwrap();
                let mut got1 = vec![Complex::default(); ks.len()];
                plan.type1(&mut got1, &x, &c).unwrap();
                let mut got2 = vec![Complex::default(); x.len()];
                plan.type2(&mut got2, &x, &f).unwrap();
                let (e1, e2) = (rel_l2(&got1, &want1), rel_l2(&got2, &want2));
                // The kernel's width is chosen for the tolerance: the
                // relative L2 error stays below it (measured: 0.08 to 0.28 of
                // it; FINUFFT's one-cell-narrower kernel gave 1 to 3 times).
                assert!(e1 < tol, "type 1, sign {sign}, tol {tol:e}: {e1:e}");
                assert!(e2 < tol, "type 2, sign {sign}, tol {tol:e}: {e2:e}");
            }
        }
    }

    #[test]
    fn float32_meets_tolerances_down_to_1e_6() {
        let m = [12, 9, 10];
        let (x, c, ks, f) = problem(5, m, 400);
        let to32 = |v: &[Complex<f64>]| -> Vec<Complex<f32>> {
            v.iter()
                .map(|z| Complex::new(z.re as f32, z.im as f32))
                .collect()
        };
        let to64 = |v: &[Complex<f32>]| -> Vec<Complex<f64>> {
            v.iter()
                .map(|z| Complex::new(z.re as f64, z.im as f64))
                .collect()
        };
        let want1 = direct(&ks, &x, &c, 1.0);
        let want2 = direct(&x, &ks, &f, 1.0);
        for tol in [1e-2, 1e-4, 1e-6] {
            let plan = Plan::<f32>::new(m, tol, 1).unwrap();
            let mut got1 = vec![Complex::default(); ks.len()];
            plan.type1(&mut got1, &x, &to32(&c)).unwrap();
            let mut got2 = vec![Complex::default(); x.len()];
            plan.type2(&mut got2, &x, &to32(&f)).unwrap();
            let (e1, e2) = (rel_l2(&to64(&got1), &want1), rel_l2(&to64(&got2), &want2));
            // Against float64 direct sums: the kernel's error plus float32
            // rounding, still below the tolerance.
            assert!(e1 < tol, "float32 type 1 at {tol:e}: {e1:e}");
            assert!(e2 < tol, "float32 type 2 at {tol:e}: {e2:e}");
        }
        // Below 1e-6 float32 cannot deliver: refused.
        assert!(Plan::<f32>::new(m, 1e-7, 1).is_err());
    }

    #[test]
    fn type2_is_the_adjoint_of_type1_with_the_opposite_sign() {
        let mut rng = Rng(8);
        let m = [8, 6, 4];
        let x: Vec<[f64; 3]> = (0..50)
            .map(|_| [0, 1, 2].map(|_| 3.0 * rng.sym()))
            .collect();
        let c: Vec<Complex<f64>> = (0..50)
            .map(|_| Complex::new(rng.sym(), rng.sym()))
            .collect();
        let f: Vec<Complex<f64>> = (0..192)
            .map(|_| Complex::new(rng.sym(), rng.sym()))
            .collect();
        let p1 = Plan::new(m, 1e-6, 1).unwrap();
        let p2 = Plan::new(m, 1e-6, -1).unwrap();
        let mut a = vec![Complex::default(); 192];
        p1.type1(&mut a, &x, &c).unwrap();
        let mut b = vec![Complex::default(); 50];
        p2.type2(&mut b, &x, &f).unwrap();
        // <A c, f> = <c, A^H f>: the same spread, FFT and correction in
        // reverse, so equal to rounding (1e-12), whatever the tolerance.
        let lhs: Complex<f64> = a.iter().zip(&f).map(|(u, v)| u.conj() * v).sum();
        let rhs: Complex<f64> = c.iter().zip(&b).map(|(u, v)| u.conj() * v).sum();
        assert!((lhs - rhs).norm() <= 1e-12 * lhs.norm(), "{lhs} vs {rhs}");
    }

    #[test]
    fn bad_settings_are_refused() {
        assert!(Plan::<f64>::new([4, 4, 4], 0.5, 1).is_err());
        assert!(Plan::<f64>::new([4, 4, 4], 1e-15, 1).is_err());
        assert!(Plan::<f64>::new([4, 4, 4], f64::NAN, 1).is_err());
        assert!(Plan::<f64>::new([0, 4, 4], 1e-6, 1).is_err());
        assert!(Plan::<f64>::new([4, 4, 4], 1e-6, 0).is_err());
        let p = Plan::<f64>::new([4, 4, 4], 1e-6, 1).unwrap();
        let mut out = vec![Complex::default(); 63];
        assert!(p
            .type1(&mut out, &[[0.0; 3]], &[Complex::new(1.0, 0.0)])
            .is_err());
    }

    #[test]
    fn gauss_legendre_integrates_polynomials_exactly() {
        // n points integrate degree 2n - 1 exactly: int x^6 on [-1, 1] = 2/7.
        let q = gauss_legendre(4);
        let s: f64 = q.iter().map(|(x, w)| w * x.powi(6)).sum();
        assert!((s - 2.0 / 7.0).abs() < 1e-14, "{s}");
        let s: f64 = q.iter().map(|(_, w)| w).sum();
        assert!((s - 2.0).abs() < 1e-14);
    }
}
