//! The floating-point type a backend computes in (f32 or f64), with a
//! branch-free `sin`/`cos` of a phase in turns that the compiler vectorises.

use num_traits::{Float, FloatConst};
use std::fmt::Debug;
use std::iter::Sum;

/// A real scalar: f32 or f64.
pub trait Real:
    rustfft::FftNum + Float + FloatConst + Default + Debug + Sum + Send + Sync + 'static
{
    /// "f32" or "f64".
    const NAME: &'static str;
    fn of(v: f64) -> Self;
    fn f64(self) -> f64;
    /// Rounds to the nearest integer without a libm call, so that loops
    /// using it still vectorise. Valid for |v| < 2^22 (f32) or 2^51 (f64).
    fn round_fast(self) -> Self;
    /// `(sin 2pi t, cos 2pi t)` for a phase `t` in turns.
    ///
    /// Range reduction is exact: `t` is split into a quarter-turn count
    /// `q = round(4t)` and a remainder `r = t - q/4` in [-1/8, 1/8], so the
    /// polynomials only see |2pi r| <= pi/4, where a Taylor series of the
    /// type's length reaches full precision. The quadrant is then applied by
    /// selects, with no branches.
    #[inline(always)]
    fn sincos_turns(t: Self) -> (Self, Self) {
        let quarter = Self::of(0.25);
        let q = (t * Self::of(4.0)).round_fast();
        let x = (t - q * quarter) * Self::TAU();
        let (s, c) = Self::sincos_small(x);
        // qm = q mod 4 in {-2, -1, 0, 1, 2}
        let qm = q - Self::of(4.0) * (q * quarter).round_fast();
        let a = qm.abs();
        let one = Self::one();
        if a == one {
            // sin(x ± pi/2) = ±cos x, cos(x ± pi/2) = ∓sin x
            (qm * c, -qm * s)
        } else {
            // a = 0: identity; a = 2: sin(x ± pi) = -sin x, cos(x ± pi) = -cos x
            ((one - a) * s, (one - a) * c)
        }
    }
    /// `(sin x, cos x)` for |x| <= pi/4.
    fn sincos_small(x: Self) -> (Self, Self);
}

impl Real for f32 {
    const NAME: &'static str = "f32";
    #[inline(always)]
    fn of(v: f64) -> Self {
        v as f32
    }
    #[inline(always)]
    fn f64(self) -> f64 {
        self as f64
    }
    #[inline(always)]
    fn round_fast(self) -> Self {
        const MAGIC: f32 = 12_582_912.0; // 1.5 * 2^23
        (self + MAGIC) - MAGIC
    }
    #[inline(always)]
    fn sincos_small(x: f32) -> (f32, f32) {
        // Taylor terms to x^9 / x^10: the next terms are below 2e-9 at pi/4.
        let x2 = x * x;
        let s = x
            * (1.0
                + x2 * (-1.0 / 6.0
                    + x2 * (1.0 / 120.0 + x2 * (-1.0 / 5040.0 + x2 * (1.0 / 362_880.0)))));
        let c = 1.0
            + x2 * (-0.5
                + x2 * (1.0 / 24.0
                    + x2 * (-1.0 / 720.0 + x2 * (1.0 / 40_320.0 + x2 * (-1.0 / 3_628_800.0)))));
        (s, c)
    }
}

impl Real for f64 {
    const NAME: &'static str = "f64";
    #[inline(always)]
    fn of(v: f64) -> Self {
        v
    }
    #[inline(always)]
    fn f64(self) -> f64 {
        self
    }
    #[inline(always)]
    fn round_fast(self) -> Self {
        const MAGIC: f64 = 6_755_399_441_055_744.0; // 1.5 * 2^52
        (self + MAGIC) - MAGIC
    }
    #[inline(always)]
    fn sincos_small(x: f64) -> (f64, f64) {
        // Taylor terms to x^15 / x^16: the next terms are below 5e-17 at pi/4.
        const S: [f64; 8] = [
            1.0,
            -1.0 / 6.0,
            1.0 / 120.0,
            -1.0 / 5040.0,
            1.0 / 362_880.0,
            -1.0 / 39_916_800.0,
            1.0 / 6_227_020_800.0,
            -1.0 / 1_307_674_368_000.0,
        ];
        const C: [f64; 9] = [
            1.0,
            -0.5,
            1.0 / 24.0,
            -1.0 / 720.0,
            1.0 / 40_320.0,
            -1.0 / 3_628_800.0,
            1.0 / 479_001_600.0,
            -1.0 / 87_178_291_200.0,
            1.0 / 20_922_789_888_000.0,
        ];
        let x2 = x * x;
        let mut s = S[7];
        for &k in S[..7].iter().rev() {
            s = s * x2 + k;
        }
        let mut c = C[8];
        for &k in C[..8].iter().rev() {
            c = c * x2 + k;
        }
        (x * s, c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check<T: Real>(tol: f64) {
        // Phases over many turns, both signs, including exact quadrant points.
        let mut worst: f64 = 0.0;
        for i in -200_000..200_000 {
            let t = i as f64 * 0.000_731 + (i % 7) as f64 * 0.125;
            let (s, c) = T::sincos_turns(T::of(t));
            // The reference sees the phase the scalar type actually holds.
            let tt = T::of(t).f64() * std::f64::consts::TAU;
            worst = worst
                .max((s.f64() - tt.sin()).abs())
                .max((c.f64() - tt.cos()).abs());
        }
        assert!(worst < tol, "{}: worst abs error {worst:e}", T::NAME);
    }

    #[test]
    fn sincos_turns_f64_matches_std() {
        // |t| up to ~150 turns: std's own reduction of 2pi t loses ~|2pi t| * eps,
        // about 2e-13; our reduction is exact, so the bound is the reference's.
        check::<f64>(5e-13);
    }

    #[test]
    fn sincos_turns_f32_matches_std() {
        // f32 has 24 bits: a few ulps of 1 (6e-8) for the polynomial and rounding.
        check::<f32>(5e-7);
    }
}
