//! The exponential-of-semicircle (ES) spreading kernel: its shape from the
//! tolerance, its values by piecewise polynomials (as FINUFFT evaluates
//! it: a few fused multiply-adds per cell instead of a square root and an
//! exponential), and its Fourier transform by quadrature.

use recon_core::{Error, Result};

/// Kernel width limits, in grid cells: 3 serves tolerance 1e-1, 16 1e-14.
pub(crate) const MIN_WIDTH: usize = 2;
pub(crate) const MAX_WIDTH: usize = 16;

/// The ES kernel `exp(beta (sqrt(1 - z^2) - 1))`, `z = 2 t / w` for an
/// offset of `t` grid cells, zero beyond `|z| = 1`.
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
    pub fn for_tolerance(tol: f64) -> Result<Kernel> {
        if !(tol.is_finite() && (1e-14..=1e-1).contains(&tol)) {
            return Err(Error::Invalid {
                what: "NUFFT tolerance",
                reason: format!("must lie in [1e-14, 1e-1], got {tol:e}"),
            });
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

    /// For a fine grid `sigma` times the modes (at least 1.5; the least
    /// ratio over the axes): at 2 or more, [`Kernel::for_tolerance`]'s;
    /// below, from FINUFFT's rule for other upsamplings, `x = ln(1 / tol)
    /// / (pi sqrt(1 - 1 / sigma))` cells, `w = ceil(x + 1.5)` (FINUFFT
    /// takes `ceil(x)`, whose error is 1 to 3 times the tolerance; one cell
    /// more left 0.96 of it at 1e-3, where x is just below 4), and `beta =
    /// 0.97 pi (1 - 1 / (2 sigma)) w`. At 1.5 that is width 8 at 1e-5, 7
    /// at 1e-4 and 6 at 1e-3, one more than at 2; the relative L2 error,
    /// measured in 3-D, is 0.1 to 0.35 of the tolerance (tests.rs).
    pub fn for_upsampling(tol: f64, sigma: f64) -> Result<Kernel> {
        if !(sigma.is_finite() && sigma >= 1.5) {
            return Err(Error::Invalid {
                what: "NUFFT upsampling",
                reason: format!("must be at least 1.5, got {sigma}"),
            });
        }
        let two = Kernel::for_tolerance(tol)?;
        if sigma >= 2.0 {
            return Ok(two);
        }
        let pi = std::f64::consts::PI;
        let width = ((1.0 / tol).ln() / (pi * (1.0 - 1.0 / sigma).sqrt()) + 1.5).ceil() as usize;
        let width = width.clamp(MIN_WIDTH, MAX_WIDTH);
        Ok(Kernel {
            width,
            beta: 0.97 * pi * (1.0 - 0.5 / sigma) * width as f64,
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
                    .map(|(t, wk)| wk * (std::f64::consts::TAU * t * xi).cos())
                    .sum()
            })
            .collect()
    }
}

/// The kernel's values on a point's footprint, by polynomials: a point at
/// grid coordinate `u` covers cells `ceil(u - w/2) + j`, `j = 0 .. w`, at
/// offsets `j - w/2 + a` with `a = ceil(u - w/2) - u + w/2` in `[0, 1)`.
/// Each cell's value is a polynomial in `a`, fitted once per plan by
/// Chebyshev interpolation and evaluated by Clenshaw's recurrence (stable
/// at every degree, where monomial coefficients lose digits), one step
/// for all `w` cells at once, so that it vectorises.
#[derive(Debug, Clone)]
pub(crate) struct Horner {
    pub width: usize,
    /// `coef[i][j]`: the coefficient of `T_i(y)` for cell `j`, `y = 2 a - 1`.
    coef: Vec<[f64; MAX_WIDTH]>,
}

impl Horner {
    /// Degree `w + 4`: the fit's error is then a few thousandths of the
    /// tolerance (tested), far below the kernel's own.
    pub fn new(k: &Kernel) -> Horner {
        let w = k.width;
        let n = w + 5;
        let node = |m: usize| std::f64::consts::PI * (m as f64 + 0.5) / n as f64;
        let mut coef = vec![[0.0; MAX_WIDTH]; n];
        for j in 0..w {
            // f at the Chebyshev points y_m = cos(node m) of [-1, 1].
            let f: Vec<f64> = (0..n)
                .map(|m| k.at(j as f64 - w as f64 / 2.0 + (node(m).cos() + 1.0) / 2.0))
                .collect();
            // c_i = (2 - [i = 0]) / n sum_m f_m T_i(y_m), T_i(y_m) = cos(i node m)
            for (i, c) in coef.iter_mut().enumerate() {
                let s: f64 = f
                    .iter()
                    .enumerate()
                    .map(|(m, fm)| fm * (i as f64 * node(m)).cos())
                    .sum();
                c[j] = s * if i == 0 { 1.0 } else { 2.0 } / n as f64;
            }
        }
        Horner { width: w, coef }
    }

    /// The footprint of grid coordinate `u`: its first cell, and the
    /// kernel's values on the `W` cells from there (`W` is the width).
    #[inline(always)]
    pub fn footprint<const W: usize>(&self, u: f64, out: &mut [f64; W]) -> i64 {
        debug_assert_eq!(W, self.width);
        let half = W as f64 / 2.0;
        let first = (u - half).ceil();
        let y = 2.0 * (first - u + half) - 1.0;
        // Clenshaw: b_i = c_i + 2 y b_{i+1} - b_{i+2}; f = c_0 + y b_1 - b_2.
        let (mut b1, mut b2) = ([0.0; W], [0.0; W]);
        for c in self.coef[1..].iter().rev() {
            for j in 0..W {
                let b0 = c[j] + 2.0 * y * b1[j] - b2[j];
                b2[j] = b1[j];
                b1[j] = b0;
            }
        }
        for j in 0..W {
            out[j] = self.coef[0][j] + y * b1[j] - b2[j];
        }
        first as i64
    }
}

/// Nodes and weights of `n`-point Gauss-Legendre quadrature on [-1, 1],
/// by Newton's iteration on the Legendre recurrence.
pub(crate) fn gauss_legendre(n: usize) -> Vec<(f64, f64)> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gauss_legendre_integrates_polynomials_exactly() {
        // n points integrate degree 2n - 1 exactly: int x^6 on [-1, 1] = 2/7.
        let q = gauss_legendre(4);
        let s: f64 = q.iter().map(|(x, w)| w * x.powi(6)).sum();
        assert!((s - 2.0 / 7.0).abs() < 1e-14, "{s}");
        let s: f64 = q.iter().map(|(_, w)| w).sum();
        assert!((s - 2.0).abs() < 1e-14);
    }

    #[test]
    fn polynomials_match_the_kernel_well_below_the_tolerance() {
        for tol in [1e-14, 1e-12, 1e-9, 1e-6, 1e-3, 1e-2, 1e-1] {
            let k = Kernel::for_tolerance(tol).unwrap();
            let h = Horner::new(&k);
            let mut worst: f64 = 0.0;
            for i in 0..1000 {
                let u = 37.0 + i as f64 / 1000.0 + 1e-4;
                let mut v = vec![0.0; k.width];
                let first = match k.width {
                    3 => h.footprint::<3>(u, (&mut v[..]).try_into().unwrap()),
                    4 => h.footprint::<4>(u, (&mut v[..]).try_into().unwrap()),
                    5 => h.footprint::<5>(u, (&mut v[..]).try_into().unwrap()),
                    8 => h.footprint::<8>(u, (&mut v[..]).try_into().unwrap()),
                    11 => h.footprint::<11>(u, (&mut v[..]).try_into().unwrap()),
                    14 => h.footprint::<14>(u, (&mut v[..]).try_into().unwrap()),
                    16 => h.footprint::<16>(u, (&mut v[..]).try_into().unwrap()),
                    w => panic!("width {w} not in this test"),
                };
                for (j, got) in v.iter().enumerate() {
                    let want = k.at((first + j as i64) as f64 - u);
                    worst = worst.max((got - want).abs());
                }
                // Every cell the kernel reaches is in the footprint.
                assert_eq!(k.at((first - 1) as f64 - u), 0.0);
                assert_eq!(k.at((first + k.width as i64) as f64 - u), 0.0);
            }
            // The kernel peaks at 1: an absolute error of tol / 1000 is a
            // thousandth of what the tolerance allows.
            // Measured: 3e-3 to 4e-3 of the tolerance, and 1e-14 at 1e-14,
            // where the reference itself, exp(beta (...)) with beta = 37,
            // carries rounding of some 4e-15. So: a hundredth of the
            // tolerance, plus f64 rounding of the kernel.
            assert!(
                worst < tol / 100.0 + 2e-14,
                "tol {tol:e}: polynomial error {worst:e}"
            );
        }
    }
}
