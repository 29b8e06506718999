//! The discrepancy principle's search (lambda = "auto"; see the parent
//! module): brackets the lambda whose misfit meets the noise's energy by
//! factors of 10, then closes in by regula falsi.

use super::{Choice, Target};
use crate::{bail, Result};

/// The search's range of relative lambda, its first candidate and the
/// misfit ratio it accepts (`|ln(misfit / target)| <= ln(1 + TOLERANCE)`).
pub const RANGE: (f64, f64) = (1e-6, 1e4);
pub const START: f64 = 1e-2;
pub const TOLERANCE: f64 = 0.02;
/// The most candidates one search solves.
pub const MAX_SOLVES: usize = 14;

/// The discrepancy principle's lambda: `solve(lambda)` returns a candidate
/// solution and its misfit less `||D||^2` ([`recon_cg::Problem::misfit`]).
/// Brackets the target by factors of 10 from [`START`] within [`RANGE`],
/// then closes in by regula falsi (Illinois) on `ln misfit` against
/// `ln lambda`. Returns the solution of the candidate nearest the target.
pub fn discrepancy<T>(
    target: &Target,
    mut solve: impl FnMut(f64) -> Result<(T, f64)>,
) -> Result<(T, Choice)> {
    if !(target.noise_energy > 0.0 && target.noise_energy.is_finite()) {
        bail!(
            "lambda = \"auto\": the noise energy to reach is {}",
            target.noise_energy
        );
    }
    let mut s = Search {
        tried: Vec::new(),
        best: None,
        target: *target,
    };
    let met = |f: f64| f.abs() <= (1.0 + TOLERANCE).ln();

    // Bracket: lo below the target, hi above, a factor of 10 apart.
    let mut lambda = START;
    let mut f = s.eval(&mut solve, lambda)?;
    let (mut lo, mut hi);
    if met(f) {
        return Ok(s.finish(None));
    }
    if f < 0.0 {
        loop {
            let next = lambda * 10.0;
            if next > RANGE.1 {
                let why = format!(
                    "the misfit stays below the noise level up to lambda = {:e} (noise \
                     overestimated?)",
                    RANGE.1
                );
                return Ok(s.finish(Some(why)));
            }
            let f_next = s.eval(&mut solve, next)?;
            if met(f_next) {
                return Ok(s.finish(None));
            }
            if f_next > 0.0 {
                (lo, hi) = ((lambda.ln(), f), (next.ln(), f_next));
                break;
            }
            (lambda, f) = (next, f_next);
        }
    } else {
        loop {
            let next = lambda / 10.0;
            if next < RANGE.0 {
                let why = format!(
                    "the misfit stays above the noise level down to lambda = {:e}: the model \
                     does not fit the data to their noise (noise underestimated, or the \
                     trajectory, FOV or coils disagree with the data)",
                    RANGE.0
                );
                return Ok(s.finish(Some(why)));
            }
            let f_next = s.eval(&mut solve, next)?;
            if met(f_next) {
                return Ok(s.finish(None));
            }
            if f_next < 0.0 {
                (lo, hi) = ((next.ln(), f_next), (lambda.ln(), f));
                break;
            }
            (lambda, f) = (next, f_next);
        }
    }

    // Regula falsi (Illinois) on f(u) = ln g(e^u), with f(lo) < 0 < f(hi).
    let mut side = 0i8;
    while s.tried.len() < MAX_SOLVES {
        let u = (lo.0 * hi.1 - hi.0 * lo.1) / (hi.1 - lo.1);
        let fu = s.eval(&mut solve, u.exp())?;
        if met(fu) {
            return Ok(s.finish(None));
        }
        if fu < 0.0 {
            lo = (u, fu);
            if side == -1 {
                hi.1 /= 2.0;
            }
            side = -1;
        } else {
            hi = (u, fu);
            if side == 1 {
                lo.1 /= 2.0;
            }
            side = 1;
        }
    }
    let why = format!("{MAX_SOLVES} candidates did not meet the target within {TOLERANCE}");
    Ok(s.finish(Some(why)))
}

/// The candidates solved so far, and the nearest one's solution.
struct Search<T> {
    tried: Vec<(f64, f64)>,
    /// `|ln(misfit / target)|` and the solution of the nearest candidate.
    best: Option<(f64, f64, T)>,
    target: Target,
}

impl<T> Search<T> {
    /// Solves at `lambda`: `ln(misfit / target)`.
    fn eval(
        &mut self,
        solve: &mut impl FnMut(f64) -> Result<(T, f64)>,
        lambda: f64,
    ) -> Result<f64> {
        let (x, misfit) = solve(lambda)?;
        // The misfit is a difference of large numbers, never below 0 in
        // exact arithmetic: a tiny positive floor keeps ln finite.
        let g =
            ((misfit + self.target.data_energy).max(0.0) / self.target.noise_energy).max(1e-300);
        self.tried.push((lambda, g));
        let f = g.ln();
        if self.best.as_ref().is_none_or(|(b, _, _)| f.abs() < *b) {
            self.best = Some((f.abs(), lambda, x));
        }
        Ok(f)
    }

    fn finish(self, unmet: Option<String>) -> (T, Choice) {
        let (_, lambda, x) = self.best.expect("at least one candidate was solved");
        (
            x,
            Choice {
                lambda,
                tried: self.tried,
                unmet,
            },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lambda::NoiseSource;

    fn target(noise: f64) -> Target {
        Target {
            samples: 100,
            data_energy: 10.0,
            noise_energy: noise,
            sigma2: 1.0,
            source: NoiseSource::NoiseData,
        }
    }

    // A misfit growing as a power of lambda: the search finds the lambda
    // where it crosses the target, from either side of START.
    #[test]
    fn the_search_meets_a_monotone_misfit() {
        for (crossing, power) in [(3.7e-4, 0.5), (250.0, 1.0), (0.02, 2.0)] {
            let g = |l: f64| 4.0 * (l / crossing).powf(power); // g = 4 at the crossing
            let (x, c) = discrepancy(&target(4.0), |l| Ok((l, g(l) - 10.0))).unwrap();
            assert!(c.unmet.is_none(), "{c:?}");
            // within the tolerance on the misfit: |ln g/4| <= ln 1.05
            assert!(
                (g(c.lambda) / 4.0 - 1.0).abs() <= TOLERANCE + 1e-12,
                "{c:?}"
            );
            assert_eq!(x, c.lambda, "the solution is the chosen candidate's");
            assert!(c.tried.len() <= MAX_SOLVES);
        }
    }

    #[test]
    fn an_unreachable_target_says_why_and_takes_the_nearest() {
        // Misfit always above the target: the smallest lambda, with a reason.
        let (_, c) = discrepancy(&target(1.0), |l| Ok((l, 2.0 + l - 10.0))).unwrap();
        assert!((c.lambda / 1e-6 - 1.0).abs() < 1e-12, "{}", c.lambda); // by factors of 10 from START
        assert!(c
            .unmet
            .as_deref()
            .unwrap()
            .contains("above the noise level"));
        // Always below, rising: the largest.
        let (_, c) = discrepancy(&target(100.0), |l| Ok((l, 1.0 + 1e-4 * l - 10.0))).unwrap();
        assert!((c.lambda / 1e4 - 1.0).abs() < 1e-12, "{}", c.lambda);
        assert!(c
            .unmet
            .as_deref()
            .unwrap()
            .contains("below the noise level"));
    }
}
