//! The CPU summation engine: `out[n] = sum_m c_m exp(±i 2pi k_m . x_n)`.
//!
//! Structured like the book's GPU kernel: the per-sample coefficients (Mu
//! for F^H D, |phi|^2 for Q) are computed by the caller first, then each
//! output point gathers over all samples, so there are no atomics. Samples
//! are kept as a structure of arrays, padded to whole chunks of `LANES` with
//! zero coefficients; the inner loop runs `LANES` independent accumulators
//! over fixed-size arrays, which lets the compiler vectorise it without
//! reassociating floating-point sums.

use crate::backend::{Sign, Targets};
use crate::{Complex, Error, Progress, Real, Result};
use rayon::prelude::*;

const LANES: usize = 8;

/// Samples in structure-of-arrays form, padded to a multiple of `LANES`.
struct Samples<T> {
    kx: Vec<T>,
    ky: Vec<T>,
    kz: Vec<T>,
    cr: Vec<T>,
    ci: Vec<T>,
}

impl<T: Real> Samples<T> {
    fn new(k: &[[f64; 3]], c: &[Complex<T>]) -> Self {
        let len = k.len().div_ceil(LANES) * LANES;
        let mut s = Samples {
            kx: vec![T::zero(); len],
            ky: vec![T::zero(); len],
            kz: vec![T::zero(); len],
            cr: vec![T::zero(); len],
            ci: vec![T::zero(); len],
        };
        for (m, (k, c)) in k.iter().zip(c).enumerate() {
            s.kx[m] = T::of(k[0]);
            s.ky[m] = T::of(k[1]);
            s.kz[m] = T::of(k[2]);
            s.cr[m] = c.re;
            s.ci[m] = c.im;
        }
        s
    }

    /// `sum_m c_m exp(i s 2pi k_m . x)`, with `s = ±1`.
    #[inline(never)]
    fn gather(&self, x: [T; 3], s: T) -> Complex<T> {
        let mut ar = [T::zero(); LANES];
        let mut ai = [T::zero(); LANES];
        let chunks = self
            .kx
            .chunks_exact(LANES)
            .zip(self.ky.chunks_exact(LANES))
            .zip(self.kz.chunks_exact(LANES))
            .zip(self.cr.chunks_exact(LANES).zip(self.ci.chunks_exact(LANES)));
        for (((kx, ky), kz), (cr, ci)) in chunks {
            let kx: &[T; LANES] = kx.try_into().unwrap();
            let ky: &[T; LANES] = ky.try_into().unwrap();
            let kz: &[T; LANES] = kz.try_into().unwrap();
            let cr: &[T; LANES] = cr.try_into().unwrap();
            let ci: &[T; LANES] = ci.try_into().unwrap();
            for l in 0..LANES {
                // phase in turns: t = k . x
                let t = kx[l] * x[0] + ky[l] * x[1] + kz[l] * x[2];
                let (sin, cos) = T::sincos_turns(t);
                let sin = sin * s;
                // (cr + i ci)(cos + i sin)
                ar[l] = ar[l] + (cr[l] * cos - ci[l] * sin);
                ai[l] = ai[l] + (ci[l] * cos + cr[l] * sin);
            }
        }
        Complex::new(ar.iter().copied().sum(), ai.iter().copied().sum())
    }
}

/// Output points per progress report (and per launch on a GPU).
const RANGE: usize = 1 << 14;

/// The engine itself; see the module docs.
pub fn sum_exp<T: Real>(
    out: &mut [Complex<T>],
    targets: Targets<'_>,
    first: usize,
    sources: &[[f64; 3]],
    coef: &[Complex<T>],
    sign: Sign,
    progress: Progress<'_>,
) -> Result<()> {
    targets.check_slab(first, out.len())?;
    Error::check_len("sum_exp coefficients", sources.len(), coef.len())?;
    let samples = Samples::new(sources, coef);
    let s = match sign {
        Sign::Plus => T::one(),
        Sign::Minus => -T::one(),
    };
    let total = out.len() as u64;
    let mut done = 0u64;
    for (r, range) in out.chunks_mut(RANGE).enumerate() {
        let start = first + r * RANGE;
        range.par_iter_mut().enumerate().for_each(|(i, o)| {
            let p = targets.point(start + i);
            *o = samples.gather([T::of(p[0]), T::of(p[1]), T::of(p[2])], s);
        });
        done += range.len() as u64;
        progress(done, total);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Lattice;

    /// The definition, term by term, with std's sin/cos in f64.
    fn naive(
        targets: &[[f64; 3]],
        k: &[[f64; 3]],
        c: &[Complex<f64>],
        s: f64,
    ) -> Vec<Complex<f64>> {
        targets
            .iter()
            .map(|x| {
                k.iter()
                    .zip(c)
                    .map(|(k, c)| {
                        let t = k[0] * x[0] + k[1] * x[1] + k[2] * x[2];
                        c * Complex::from_polar(1.0, s * std::f64::consts::TAU * t)
                    })
                    .sum()
            })
            .collect()
    }

    fn problem() -> (Lattice, Vec<[f64; 3]>, Vec<Complex<f64>>) {
        let lat = Lattice {
            n: [6, 4, 5],
            origin: [-0.5, -0.5, -0.5],
            step: [1.0 / 6.0, 0.25, 0.2],
        };
        // 37 samples: not a multiple of LANES, so padding is exercised.
        let k: Vec<[f64; 3]> = (0..37)
            .map(|m| {
                let m = m as f64;
                [(m * 1.7).sin() * 3.0, (m * 0.9).cos() * 2.5, m * 0.1 - 1.8]
            })
            .collect();
        let c = (0..37)
            .map(|m| Complex::new(1.0 + (m as f64).sin(), (m as f64 * 0.3).cos()))
            .collect();
        (lat, k, c)
    }

    #[test]
    fn f64_engine_matches_definition() {
        let (lat, k, c) = problem();
        let pts: Vec<[f64; 3]> = (0..lat.len()).map(|i| lat.point(i)).collect();
        for (sign, s) in [(Sign::Plus, 1.0), (Sign::Minus, -1.0)] {
            let mut out = vec![Complex::default(); lat.len()];
            let mut calls = 0;
            sum_exp(
                &mut out,
                Targets::Lattice(lat),
                0,
                &k,
                &c,
                sign,
                &mut |_, _| calls += 1,
            )
            .unwrap();
            assert!(calls >= 1);
            // f64 throughout: agreement to rounding.
            assert!(crate::metrics::nrmse(&out, &naive(&pts, &k, &c, s)) < 1e-13);
        }
    }

    #[test]
    fn f32_engine_is_within_single_precision() {
        let (lat, k, c) = problem();
        let pts: Vec<[f64; 3]> = (0..lat.len()).map(|i| lat.point(i)).collect();
        let c32: Vec<Complex<f32>> = c
            .iter()
            .map(|c| Complex::new(c.re as f32, c.im as f32))
            .collect();
        let mut out = vec![Complex::default(); lat.len()];
        sum_exp(
            &mut out,
            Targets::List(&pts),
            0,
            &k,
            &c32,
            Sign::Plus,
            &mut |_, _| {},
        )
        .unwrap();
        let out64: Vec<Complex<f64>> = out
            .iter()
            .map(|c| Complex::new(c.re as f64, c.im as f64))
            .collect();
        // f32 inputs and arithmetic over 37 terms: ~1e-6 relative.
        assert!(crate::metrics::nrmse(&out64, &naive(&pts, &k, &c, 1.0)) < 1e-5);
    }

    #[test]
    fn a_slab_of_targets_is_the_same_slice_of_the_whole() {
        let (lat, k, c) = problem();
        let mut whole = vec![Complex::default(); lat.len()];
        sum_exp(
            &mut whole,
            Targets::Lattice(lat),
            0,
            &k,
            &c,
            Sign::Plus,
            &mut |_, _| {},
        )
        .unwrap();
        let (first, len) = (lat.len() / 3, lat.len() / 2);
        let mut slab = vec![Complex::default(); len];
        sum_exp(
            &mut slab,
            Targets::Lattice(lat),
            first,
            &k,
            &c,
            Sign::Plus,
            &mut |_, _| {},
        )
        .unwrap();
        // Each target is computed from its own index, by the same code.
        assert_eq!(slab, whole[first..first + len]);
    }

    #[test]
    fn lengths_are_checked() {
        let (lat, k, c) = problem();
        // More outputs than targets from `first` on.
        for (first, len) in [(0, lat.len() + 1), (2, lat.len() - 1), (usize::MAX, 2)] {
            let mut out = vec![Complex::default(); len];
            let err = sum_exp(
                &mut out,
                Targets::Lattice(lat),
                first,
                &k,
                &c,
                Sign::Plus,
                &mut |_, _| {},
            );
            assert!(matches!(err, Err(Error::Invalid { .. })), "{first} {len}");
        }
        // A coefficient per source.
        let mut out = vec![Complex::default(); lat.len()];
        let err = sum_exp(
            &mut out,
            Targets::Lattice(lat),
            0,
            &k,
            &c[1..],
            Sign::Plus,
            &mut |_, _| {},
        );
        assert!(matches!(err, Err(Error::Length { .. })));
    }
}
