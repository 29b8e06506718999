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
//! forward model is type 2 with `s = -1` (see recon-encoding).
//!
//! As in FINUFFT, a [`Plan`] is made once for a mode shape and tolerance
//! (kernel, corrections, FFT plans), its points are set once (sorted into
//! slabs and bins, [`Plan::set_points`]) and it then executes any number
//! of times. Everything runs in float32 or float64 over rayon: spreading
//! over slabs of the fine grid that never write the same plane at once,
//! interpolation over points, the FFT over lines, pruned to the lines
//! the modes need ([`fft`]).

use recon_core::{Complex, Error, Real, Result};

mod fft;
mod kernel;
mod spread;

pub use kernel::Kernel;

/// Version of the NUFFT's arithmetic, part of recon's Q cache key: bump it
/// whenever a change could alter the values it computes.
pub const VERSION: u32 = 3;
use kernel::Horner;
use spread::Points;

/// A zeroed fine grid. Fresh memory costs a page fault per page on its
/// first write: 27,000 faults (53 ms) for sodium Q's 113 MB grid, 1.4 s for
/// the 2 GB grid of Q at 128^3 written by one thread. So grids of at least
/// 2 MiB are aligned to 2 MiB and offered to the kernel for transparent
/// huge pages (a fault per 2 MiB where the system allows it), and zeroed in
/// parallel. (A calloc'ed grid, zeroed by the kernel as the scattered
/// spreading touches it, was slower still.)
fn zeroed_grid<T: Real>(len: usize) -> FineGrid<T> {
    use rayon::prelude::*;
    use std::alloc::{alloc, handle_alloc_error, Layout};
    const HUGE: usize = 2 << 20;
    let bytes = len.max(1) * std::mem::size_of::<Complex<T>>();
    let align = if bytes >= HUGE {
        HUGE
    } else {
        std::mem::align_of::<Complex<T>>()
    };
    let layout = Layout::from_size_align(bytes, align).expect("fine grid size overflows");
    // SAFETY: the layout is non-zero. madvise only advises on memory this
    // function owns. Every value is written (all-zero bits are 0.0 for f32
    // and f64) before the Vec takes the memory.
    unsafe {
        let p = alloc(layout) as *mut Complex<T>;
        if p.is_null() {
            handle_alloc_error(layout);
        }
        #[cfg(target_os = "linux")]
        if align == HUGE {
            // Advice only: without huge pages the grid works the same.
            libc::madvise(p as *mut libc::c_void, bytes, libc::MADV_HUGEPAGE);
        }
        let chunk = 1 << 16;
        let base = p as usize;
        (0..len.div_ceil(chunk)).into_par_iter().for_each(|i| {
            let start = i * chunk;
            let count = chunk.min(len - start);
            std::ptr::write_bytes((base as *mut Complex<T>).add(start), 0, count);
        });
        FineGrid {
            ptr: p,
            len,
            layout,
        }
    }
}

/// A fine grid allocated by [`zeroed_grid`] (its alignment is not a
/// Vec's, so it frees itself with its own layout).
struct FineGrid<T> {
    ptr: *mut Complex<T>,
    len: usize,
    layout: std::alloc::Layout,
}

impl<T> std::ops::Deref for FineGrid<T> {
    type Target = [Complex<T>];
    fn deref(&self) -> &[Complex<T>] {
        // SAFETY: ptr holds len initialised values (zeroed_grid).
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

impl<T> std::ops::DerefMut for FineGrid<T> {
    fn deref_mut(&mut self) -> &mut [Complex<T>] {
        // SAFETY: as above, and borrowed mutably once through &mut self.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

impl<T> Drop for FineGrid<T> {
    fn drop(&mut self) {
        // SAFETY: allocated by zeroed_grid with this layout.
        unsafe { std::alloc::dealloc(self.ptr as *mut u8, self.layout) }
    }
}

/// A plan for one mode shape, kernel, sign and precision `T` (f32 or f64).
/// Points are float64 (radians); strengths, modes and the fine grid are
/// `T`; kernel values are computed in float64 and rounded to `T`.
pub struct Plan<T: Real = f64> {
    /// Modes per axis, x y z.
    pub modes: [usize; 3],
    /// The upsampled grid per axis (even, at least 2 modes and twice the kernel's width).
    pub fine: [usize; 3],
    pub kernel: Kernel,
    /// +1 or -1: the sign of the exponent.
    pub sign: i32,
    horner: Horner,
    /// `1 / K^(k / fine)` per axis, for modes `-M/2 .. M/2`.
    correction: [Vec<T>; 3],
    /// The pruned FFTs with this plan's sign and the opposite one.
    fft: fft::Pruned<T>,
    fft_opposite: fft::Pruned<T>,
    points: Option<Points>,
}

impl<T: Real> Plan<T> {
    /// A plan for `modes` (each at least 1) at tolerance `tol` (at least
    /// 1e-6 in float32, which cannot reach below).
    pub fn new(modes: [usize; 3], tol: f64, sign: i32) -> Result<Plan<T>> {
        if modes.contains(&0) {
            return Err(Error::Invalid {
                what: "NUFFT modes",
                reason: format!("every axis needs at least one mode, got {modes:?}"),
            });
        }
        if sign != 1 && sign != -1 {
            return Err(Error::Invalid {
                what: "NUFFT sign",
                reason: format!("must be +1 or -1, got {sign}"),
            });
        }
        if std::mem::size_of::<T>() == 4 && tol < 1e-6 {
            return Err(Error::Invalid {
                what: "NUFFT tolerance",
                reason: format!("{tol:e} is below what float32 reaches (1e-6)"),
            });
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
            horner: Horner::new(&kernel),
            correction,
            fft: fft::Pruned::new(fine, modes, sign),
            fft_opposite: fft::Pruned::new(fine, modes, -sign),
            points: None,
        })
    }

    /// Sets the points (radians, finite; at most 2^32 of them), sorted
    /// once for every later execution.
    pub fn set_points(&mut self, x: &[[f64; 3]]) -> Result<()> {
        if x.len() > u32::MAX as usize {
            return Err(Error::Invalid {
                what: "NUFFT points",
                reason: format!("at most 2^32, got {}", x.len()),
            });
        }
        if let Some(m) = x.iter().position(|p| p.iter().any(|v| !v.is_finite())) {
            return Err(Error::Invalid {
                what: "NUFFT points",
                reason: format!("point {m} is {:?}", x[m]),
            });
        }
        self.points = Some(Points::new(x, self.fine, &self.horner));
        Ok(())
    }

    /// The number of points set.
    pub fn len(&self) -> usize {
        self.points.as_ref().map_or(0, |p| p.u.len())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn modes_len(&self) -> usize {
        self.modes.iter().product()
    }

    fn points(&self) -> Result<&Points> {
        self.points.as_ref().ok_or(Error::Invalid {
            what: "NUFFT plan",
            reason: "no points set (call set_points first)".into(),
        })
    }

    /// Calls `f(mode index, fine-grid index, correction)` for every mode.
    fn each_mode(&self, mut f: impl FnMut(usize, usize, T)) {
        let m = self.modes;
        let n = self.fine;
        let at =
            |k: usize, d: usize| (k as i64 - (m[d] / 2) as i64).rem_euclid(n[d] as i64) as usize;
        let mut i = 0;
        for kz in 0..m[2] {
            let gz = at(kz, 2);
            for ky in 0..m[1] {
                let gy = at(ky, 1);
                let cyz = self.correction[2][kz] * self.correction[1][ky];
                let row = (gz * n[1] + gy) * n[0];
                for kx in 0..m[0] {
                    f(i, row + at(kx, 0), cyz * self.correction[0][kx]);
                    i += 1;
                }
            }
        }
    }

    /// Type 1: `out[k] = sum_m c[m] exp(s i k . x[m])`.
    pub fn type1(&self, out: &mut [Complex<T>], c: &[Complex<T>]) -> Result<()> {
        let pts = self.points()?;
        Error::check_len("NUFFT modes", self.modes_len(), out.len())?;
        Error::check_len("NUFFT strengths (one per point)", pts.u.len(), c.len())?;
        let mut grid = zeroed_grid(self.fine.iter().product());
        spread::spread(&mut grid, self.fine, &self.horner, pts, c);
        self.fft.forward_pruned(&mut grid);
        self.each_mode(|k, g, corr| out[k] = grid[g] * corr);
        Ok(())
    }

    /// The points' strengths convolved with the kernel twice, on the fine
    /// grid and without the FFT: `out[m] = sum_j K(j - u_m) sum_m' c[m']
    /// K(j - u_m')`, the spread followed by the interpolation. Pipe and
    /// Menon's density compensation iterates it.
    pub fn convolve(&self, out: &mut [Complex<T>], c: &[Complex<T>]) -> Result<()> {
        let pts = self.points()?;
        Error::check_len("NUFFT strengths (one per point)", pts.u.len(), c.len())?;
        Error::check_len("NUFFT outputs (one per point)", pts.u.len(), out.len())?;
        let mut grid = zeroed_grid(self.fine.iter().product());
        spread::spread(&mut grid, self.fine, &self.horner, pts, c);
        spread::interpolate(out, &grid, self.fine, &self.horner, pts);
        Ok(())
    }

    /// Type 2: `out[m] = sum_k f[k] exp(s i k . x[m])`.
    pub fn type2(&self, out: &mut [Complex<T>], f: &[Complex<T>]) -> Result<()> {
        self.type2_with(out, f, &self.fft)
    }

    /// Type 2 with the opposite sign, `out[m] = sum_k f[k] exp(-s i k . x[m])`:
    /// the adjoint of [`Plan::type1`].
    pub fn type1_adjoint(&self, out: &mut [Complex<T>], f: &[Complex<T>]) -> Result<()> {
        self.type2_with(out, f, &self.fft_opposite)
    }

    fn type2_with(
        &self,
        out: &mut [Complex<T>],
        f: &[Complex<T>],
        fft: &fft::Pruned<T>,
    ) -> Result<()> {
        let pts = self.points()?;
        Error::check_len("NUFFT modes", self.modes_len(), f.len())?;
        Error::check_len("NUFFT outputs (one per point)", pts.u.len(), out.len())?;
        let mut grid = zeroed_grid(self.fine.iter().product());
        self.each_mode(|k, g, corr| grid[g] = f[k] * corr);
        fft.backward_pruned(&mut grid);
        spread::interpolate(out, &grid, self.fine, &self.horner, pts);
        Ok(())
    }
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
                let mut plan = Plan::new(m, tol, sign).unwrap();
                plan.set_points(&x).unwrap();
                let mut got1 = vec![Complex::default(); ks.len()];
                plan.type1(&mut got1, &c).unwrap();
                let mut got2 = vec![Complex::default(); x.len()];
                plan.type2(&mut got2, &f).unwrap();
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
    fn clustered_points_at_the_periodic_edge_meet_the_tolerance() {
        // 3000 points in a small cluster straddling x = ±pi: every bin they
        // fill holds far more than SUBPROBLEM_POINTS, so they spread through
        // subproblem buffers that wrap around the grid's edge; a sparse
        // uniform sprinkle keeps the direct path in the same run.
        let m = [16, 12, 20];
        let mut rng = Rng(11);
        let mut x: Vec<[f64; 3]> = (0..3000)
            .map(|_| {
                [
                    std::f64::consts::PI + 0.3 * rng.sym(),
                    0.2 * rng.sym(),
                    -std::f64::consts::PI + 0.25 * rng.sym(),
                ]
            })
            .collect();
        x.extend((0..100).map(|_| [0, 1, 2].map(|_| std::f64::consts::PI * rng.sym())));
        let c: Vec<Complex<f64>> = (0..x.len())
            .map(|_| Complex::new(rng.sym(), rng.sym()))
            .collect();
        let ks = modes_of(m);
        let f: Vec<Complex<f64>> = (0..ks.len())
            .map(|_| Complex::new(rng.sym(), rng.sym()))
            .collect();
        let want1 = direct(&ks, &x, &c, 1.0);
        let want2 = direct(&x, &ks, &f, 1.0);
        for tol in [1e-3, 1e-6, 1e-9] {
            let mut plan = Plan::new(m, tol, 1).unwrap();
            plan.set_points(&x).unwrap();
            let pts = plan.points.as_ref().unwrap();
            let largest = (0..pts.bin_start.len() - 1)
                .map(|b| pts.bin_start[b + 1] - pts.bin_start[b])
                .max()
                .unwrap();
            assert!(largest >= spread::SUBPROBLEM_POINTS, "{largest}");
            let mut got1 = vec![Complex::default(); ks.len()];
            plan.type1(&mut got1, &c).unwrap();
            let mut got2 = vec![Complex::default(); x.len()];
            plan.type2(&mut got2, &f).unwrap();
            // As for spread-out points: below the tolerance.
            let (e1, e2) = (rel_l2(&got1, &want1), rel_l2(&got2, &want2));
            assert!(e1 < tol, "type 1 at {tol:e}: {e1:e}");
            assert!(e2 < tol, "type 2 at {tol:e}: {e2:e}");
            // The baseline (non-AVX) copies compute the same sums: equal
            // to rounding (FMA rounds once where they round twice).
            spread::PLAIN_ONLY.store(true, std::sync::atomic::Ordering::Relaxed);
            let mut plain1 = vec![Complex::default(); ks.len()];
            plan.type1(&mut plain1, &c).unwrap();
            let mut plain2 = vec![Complex::default(); x.len()];
            plan.type2(&mut plain2, &f).unwrap();
            spread::PLAIN_ONLY.store(false, std::sync::atomic::Ordering::Relaxed);
            assert!(rel_l2(&plain1, &got1) < 1e-13);
            assert!(rel_l2(&plain2, &got2) < 1e-13);
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
            let mut plan = Plan::<f32>::new(m, tol, 1).unwrap();
            plan.set_points(&x).unwrap();
            let mut got1 = vec![Complex::default(); ks.len()];
            plan.type1(&mut got1, &to32(&c)).unwrap();
            let mut got2 = vec![Complex::default(); x.len()];
            plan.type2(&mut got2, &to32(&f)).unwrap();
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
        let mut p = Plan::new(m, 1e-6, 1).unwrap();
        p.set_points(&x).unwrap();
        let mut a = vec![Complex::default(); 192];
        p.type1(&mut a, &c).unwrap();
        let mut b = vec![Complex::default(); 50];
        p.type1_adjoint(&mut b, &f).unwrap();
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
        let mut p = Plan::<f64>::new([4, 4, 4], 1e-6, 1).unwrap();
        let one = [Complex::new(1.0, 0.0)];
        let mut out = vec![Complex::default(); 64];
        // No points set yet.
        assert!(p.type1(&mut out, &one).is_err());
        assert!(p.set_points(&[[f64::NAN, 0.0, 0.0]]).is_err());
        p.set_points(&[[0.0; 3]]).unwrap();
        assert!(p.type1(&mut out[..63], &one).is_err());
        assert!(p.type1(&mut out, &[one[0]; 2]).is_err());
    }
}
