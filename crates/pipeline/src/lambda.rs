//! Choosing lambda without a truth. `"auto"` takes the discrepancy
//! principle (Morozov; the search is [`discrepancy`]): the regularised
//! image should explain the data down to the noise and no further, so
//! lambda is raised until the data misfit `sum_c ||F S_c x - D_c||^2`
//! equals the noise's expected energy `E ||n||^2 = M C sigma^2` (M samples,
//! C coils, sigma^2 each sample's noise variance). A smaller lambda fits
//! noise, a larger one blurs structure the data hold. Where the misfit
//! stays above the noise at every lambda (model error) and the prior is
//! quadratic, it falls back to generalised cross-validation (`"gcv"`,
//! [`gcv`]), which needs no noise level and counts model error as noise.
//!
//! The noise variance comes from the scan's noise data (a noise scan or
//! covariance; after prewhitening each virtual coil's variance is their
//! mean diagonal, see `recon_coils::whitening`). Without noise data it is
//! estimated from the outer k-space, where a scan holds little signal: the
//! median of `|D|^2` over the samples in the outermost tenth of the
//! trajectory's radius, divided by ln 2 (`|n|^2` of complex Gaussian noise
//! is exponential, with median `sigma^2 ln 2`). Key design decision: the
//! misfit is measured without the forward operator, from the normal
//! equations' parts the solver already holds,
//! `||F x - D||^2 = x^H A x - 2 Re(x^H b) + ||D||^2`
//! ([`recon_cg::Problem::misfit`]), so each candidate costs its solve and
//! one product by the data term, on any backend and for any prior.

use crate::config::Lambda;
use crate::{bail, Result, Ui};
use recon_core::Complex;

mod discrepancy;
pub mod gcv;

pub use discrepancy::{discrepancy, MAX_SOLVES, RANGE, START, TOLERANCE};

/// Where the noise level came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoiseSource {
    /// The scan's noise scan or covariance (or the synthetic noise).
    NoiseData,
    /// Estimated from the outer k-space of the data.
    OuterKspace,
}

/// The discrepancy principle's target for one problem.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Target {
    /// Data values (samples times coils or images) ...
    pub samples: usize,
    /// ... and `||D||^2` over them.
    pub data_energy: f64,
    /// `E ||n||^2 = M C sigma^2`: the misfit to reach.
    pub noise_energy: f64,
    /// Each sample's noise variance sigma^2, and where it came from.
    pub sigma2: f64,
    pub source: NoiseSource,
}

/// The fewest samples an outer-k-space estimate of the noise takes.
pub const OUTER_SAMPLES: usize = 32;

impl Target {
    /// The target of the data `rows` (each coil's, or each image's, samples
    /// on `traj`; on a grid of `n` voxels), with each sample's noise
    /// variance `sigma2` when known, else estimated from the outer k-space.
    pub fn new(
        rows: &[&[Complex<f64>]],
        traj: &[[f64; 3]],
        n: [usize; 3],
        sigma2: Option<f64>,
    ) -> Result<Target> {
        let data_energy: f64 = rows
            .iter()
            .flat_map(|r| r.iter())
            .map(|d| d.norm_sqr())
            .sum();
        let samples: usize = rows.iter().map(|r| r.len()).sum();
        let (sigma2, source) = match sigma2 {
            Some(s) if s > 0.0 && s.is_finite() => (s, NoiseSource::NoiseData),
            _ => (outer_kspace(rows, traj, n)?, NoiseSource::OuterKspace),
        };
        Ok(Target {
            samples,
            data_energy,
            noise_energy: samples as f64 * sigma2,
            sigma2,
            source,
        })
    }

    /// The rule, as the report says it.
    pub fn describe(&self) -> String {
        format!(
            "discrepancy principle, noise variance {:.3e} per sample {}",
            self.sigma2,
            match self.source {
                NoiseSource::NoiseData => "from the noise data (a noise scan or covariance)",
                NoiseSource::OuterKspace => "estimated from the outer k-space (no noise data)",
            }
        )
    }
}

/// The data values `rows` hold and their energy `||D||^2`.
fn energy(rows: &[&[Complex<f64>]]) -> (usize, f64) {
    let samples = rows.iter().map(|r| r.len()).sum();
    let energy = rows
        .iter()
        .flat_map(|r| r.iter())
        .map(|d| d.norm_sqr())
        .sum();
    (samples, energy)
}

/// sigma^2 from the samples in the outermost tenth of the trajectory's
/// radius (each axis's k over its Nyquist limit, the largest of them).
fn outer_kspace(rows: &[&[Complex<f64>]], traj: &[[f64; 3]], n: [usize; 3]) -> Result<f64> {
    let radius = |k: &[f64; 3]| {
        (0..3)
            .filter(|&d| n[d] > 1)
            .map(|d| k[d].abs() / (n[d] as f64 / 2.0))
            .fold(0.0, f64::max)
    };
    let r: Vec<f64> = traj.iter().map(radius).collect();
    let largest = r.iter().copied().fold(0.0, f64::max);
    let mut energies: Vec<f64> = rows
        .iter()
        .flat_map(|row| {
            row.iter()
                .zip(&r)
                .filter(|(_, &r)| r >= 0.9 * largest)
                .map(|(d, _)| d.norm_sqr())
        })
        .collect();
    if energies.len() < OUTER_SAMPLES {
        bail!(
            "lambda = \"auto\" cannot estimate the noise: the scan has no noise data and only {} \
             samples lie in the outer tenth of its k-space (at least {OUTER_SAMPLES} are needed); \
             give lambda a value (--lambda) or add a noise scan",
            energies.len()
        );
    }
    let mid = energies.len() / 2;
    let (_, median, _) = energies.select_nth_unstable_by(mid, f64::total_cmp);
    let sigma2 = *median / std::f64::consts::LN_2;
    if !(sigma2 > 0.0 && sigma2.is_finite()) {
        bail!(
            "lambda = \"auto\" cannot estimate the noise: the outer k-space's samples are {} \
             (noiseless data?); give lambda a value (--lambda)",
            if sigma2 == 0.0 { "zero" } else { "not finite" }
        );
    }
    Ok(sigma2)
}

/// The lambda a solve used and why: for `report.json` and the summary.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Used {
    /// Relative lambda.
    pub lambda: f64,
    /// "given", or the rule that chose (with its noise level, for the
    /// discrepancy principle).
    pub rule: String,
    /// The search's candidates: relative lambda and misfit over the
    /// target (empty for a given lambda).
    pub tried: Vec<(f64, f64)>,
    /// Why the target was not met, where it was not.
    pub unmet: Option<String>,
}

/// How lambda is chosen for one problem (`"auto"` or `"gcv"`).
#[derive(Debug, Clone, PartialEq)]
pub enum Rule {
    /// `"auto"`: the discrepancy principle on this target; where the
    /// misfit stays above the noise level however small lambda (model
    /// error: the noise level does not describe the data's error) and the
    /// prior is quadratic, GCV instead.
    Discrepancy { target: Target, quadratic: bool },
    /// `"gcv"` (the quadratic priors): GCV ([`gcv`]) over `samples` data
    /// values of energy `||D||^2`.
    Gcv { samples: usize, data_energy: f64 },
}

impl Rule {
    /// The rule `setting` asks for (`None` for a given lambda), for a
    /// problem with a `quadratic` prior or not, on the data `rows` (see
    /// [`Target::new`]).
    pub fn new(
        setting: Lambda,
        quadratic: bool,
        rows: &[&[Complex<f64>]],
        traj: &[[f64; 3]],
        n: [usize; 3],
        sigma2: Option<f64>,
    ) -> Result<Option<Rule>> {
        Ok(match setting {
            Lambda::Fixed(_) => None,
            Lambda::Gcv => {
                let (samples, data_energy) = energy(rows);
                Some(Rule::Gcv {
                    samples,
                    data_energy,
                })
            }
            Lambda::Auto => Some(Rule::Discrepancy {
                target: Target::new(rows, traj, n, sigma2)?,
                quadratic,
            }),
        })
    }
}

/// What a candidate's solve must also measure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    Nothing,
    /// Its misfit less `||D||^2` ([`recon_cg::Problem::misfit`]).
    Misfit,
    /// And its degrees of freedom `tr(A^-1 T)` by the probe [`gcv::probe`].
    MisfitAndDf,
}

/// What `need` asks of a candidate `x` of `problem`, solved with W's
/// `weights` at `lambda`: its misfit less `||D||^2` and its degrees of
/// freedom by `probe` (each NaN where not asked).
#[allow(clippy::too_many_arguments)]
pub fn measure<B: recon_core::Backend>(
    backend: &B,
    problem: &mut recon_cg::Problem<'_, B>,
    probe: &mut gcv::Probe<B::Real>,
    x: &[Complex<B::Real>],
    weights: &recon_core::Stencil,
    lambda: f64,
    params: &recon_cg::Params,
    need: Need,
) -> Result<(f64, f64)> {
    let misfit = match need {
        Need::Nothing => f64::NAN,
        _ => problem.misfit(backend, x)?,
    };
    let df = match need {
        Need::MisfitAndDf => probe.df(backend, problem, weights, lambda, params)?,
        _ => f64::NAN,
    };
    Ok((misfit, df))
}

/// A candidate solution and what was measured of it (NaN where not).
pub struct Candidate<T> {
    pub x: T,
    pub misfit: f64,
    pub df: f64,
}

/// Solves once at the config's lambda, or, for "auto" and "gcv", for each
/// candidate of the rule's search (which they need), logging each through
/// `ui`.
pub fn solve_with<T>(
    setting: Lambda,
    rule: Option<&Rule>,
    ui: &impl Ui,
    mut solve: impl FnMut(f64, Need) -> Result<Candidate<T>>,
) -> Result<(T, Used)> {
    let rule = match (setting, rule) {
        (Lambda::Fixed(lambda), _) => {
            let c = solve(lambda, Need::Nothing)?;
            let used = Used {
                lambda,
                rule: "given".into(),
                tried: Vec::new(),
                unmet: None,
            };
            return Ok((c.x, used));
        }
        (_, Some(r)) => r,
        (_, None) => bail!("lambda = \"{setting}\" needs its rule (a bug: none was made)"),
    };
    let (x, choice, name) = match rule {
        Rule::Discrepancy { target, quadratic } => {
            let mut solve_dp = |lambda: f64| {
                let c = solve(lambda, Need::Misfit)?;
                let g = (c.misfit + target.data_energy) / target.noise_energy;
                ui.log(&format!(
                    "lambda {lambda:.3e}: misfit {g:.3} times the noise's energy"
                ));
                Ok((c.x, c.misfit))
            };
            let (x, choice) = discrepancy(target, &mut solve_dp)?;
            let above = choice.tried.iter().all(|(_, g)| *g > 1.0 + TOLERANCE);
            match (above, quadratic) {
                (true, true) => {
                    ui.log(&format!(
                        "the misfit stays above the noise level down to lambda = {:e}: the data \
                         hold error beyond their noise (model error); choosing by generalised \
                         cross-validation instead",
                        RANGE.0
                    ));
                    drop(x);
                    let (x, mut choice, name) =
                        by_gcv(target.samples, target.data_energy, ui, &mut solve)?;
                    choice.unmet = Some(format!(
                        "the misfit stays above the discrepancy principle's target ({}) at every \
                         lambda; GCV chose instead",
                        target.describe()
                    ));
                    (x, choice, name)
                }
                _ => (x, choice, target.describe()),
            }
        }
        Rule::Gcv {
            samples,
            data_energy,
        } => by_gcv(*samples, *data_energy, ui, &mut solve)?,
    };
    if let Some(why) = &choice.unmet {
        ui.log(&format!(
            "warning: lambda = \"{setting}\" took {:.3e}: {why}",
            choice.lambda
        ));
    }
    let used = Used {
        lambda: choice.lambda,
        rule: name,
        tried: choice.tried,
        unmet: choice.unmet,
    };
    Ok((x, used))
}

/// GCV's choice over `samples` data values of energy `data_energy`, each
/// candidate logged: the solution, the search's findings and the rule.
fn by_gcv<T>(
    samples: usize,
    data_energy: f64,
    ui: &impl Ui,
    solve: &mut impl FnMut(f64, Need) -> Result<Candidate<T>>,
) -> Result<(T, Choice, String)> {
    let (x, choice) = gcv::gcv(samples, |lambda| {
        let c = solve(lambda, Need::MisfitAndDf)?;
        let misfit = c.misfit + data_energy;
        ui.log(&format!(
            "lambda {lambda:.3e}: misfit {:.4e} of ||D||^2, {:.1} degrees of freedom of {samples}",
            misfit / data_energy,
            c.df
        ));
        Ok((c.x, misfit, c.df))
    })?;
    let name = format!(
        "generalised cross-validation (randomised trace, one probe) over {samples} samples"
    );
    Ok((x, choice, name))
}

/// What the search found.
#[derive(Debug, Clone, PartialEq)]
pub struct Choice {
    /// The relative lambda chosen.
    pub lambda: f64,
    /// Each candidate tried, in order: relative lambda and its score, the
    /// misfit over the target (the discrepancy principle, 1 at its
    /// choice) or V over the least V (GCV, 1 at its choice).
    pub tried: Vec<(f64, f64)>,
    /// `None` when the misfit met the target within [`TOLERANCE`]; else why
    /// not (the nearest candidate was taken).
    pub unmet: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_outer_kspace_gives_the_noise_of_pure_noise() {
        // Complex Gaussian noise of variance 2 on a uniform grid of k: the
        // median estimate over ~1300 outer samples is within a few percent.
        let mut state = 12345u64;
        let mut uniform = move || {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((state >> 11) as f64 + 0.5) / (1u64 << 53) as f64
        };
        let m = 20000;
        let traj: Vec<[f64; 3]> = (0..m)
            .map(|_| {
                [
                    16.0 * (2.0 * uniform() - 1.0),
                    16.0 * (2.0 * uniform() - 1.0),
                    0.0,
                ]
            })
            .collect();
        let data: Vec<Complex<f64>> = (0..m)
            .map(|_| {
                // Box-Muller: variance 1 per part, 2 per complex sample
                let (u, v) = (uniform(), uniform());
                let r = (-2.0 * u.ln()).sqrt();
                let a = 2.0 * std::f64::consts::PI * v;
                Complex::new(r * a.cos(), r * a.sin())
            })
            .collect();
        let t = Target::new(&[&data], &traj, [32, 32, 1], None).unwrap();
        assert_eq!(t.source, NoiseSource::OuterKspace);
        // ~3800 samples: the median's relative error is about 1/sqrt(n)
        assert!((t.sigma2 / 2.0 - 1.0).abs() < 0.08, "{}", t.sigma2);
        assert!((t.noise_energy / (m as f64 * t.sigma2) - 1.0).abs() < 1e-12);
        // Known noise is taken as given.
        let t = Target::new(&[&data], &traj, [32, 32, 1], Some(3.0)).unwrap();
        assert_eq!((t.sigma2, t.source), (3.0, NoiseSource::NoiseData));
        // Too few samples to estimate from: an error naming the way out.
        let e = Target::new(&[&data[..40]], &traj[..40], [32, 32, 1], None).unwrap_err();
        assert!(e.to_string().contains("--lambda"), "{e}");
    }
}
