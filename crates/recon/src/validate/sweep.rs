//! `recon validate`'s lambda sweeps: PSNR over a logarithmic range of
//! lambda for each W, extended at whichever end holds the best.

use super::{SweepPoint, ValidateArgs};
use crate::config::Loaded;
use crate::pipeline::{self, Inputs, Regulariser, Ui};
use anyhow::{Context, Result};
use recon_core::{Complex, Real, Stencil};
use recon_encoding::NufftBackend;
use recon_q::Stored;

/// Points a sweep may add at either end of its range to bring the best
/// lambda inside it.
pub(super) const EXTEND: i64 = 4;

/// One W's sweep: PSNR per lambda and the image at the best.
pub(super) struct Swept {
    pub name: String,
    pub points: Vec<SweepPoint>,
    pub best: usize,
    /// The best is still the first or last point after extending the range.
    pub at_range_edge: bool,
    pub best_image: Vec<Complex<f64>>,
}

/// How a swept method reconstructs.
#[derive(Clone)]
pub(super) enum SweepMethod {
    /// The run's problem (SENSE with several coils) with this W.
    Joint(Regulariser),
    /// Several coils: each coil reconstructed alone (its own F^H D, uniform
    /// W), combined by the root sum of squares.
    CoilByCoil,
}

/// The run's problem solved with lambda chosen by `setting` ("auto" or
/// "gcv") instead of the config's: the lambda used and why, and the
/// image's PSNR.
pub(super) fn auto<B>(
    b: &B,
    l: &Loaded,
    inputs: &Inputs,
    setting: crate::config::Lambda,
    ui: &impl Ui,
) -> Result<(pipeline::lambda::Used, f64)>
where
    B: NufftBackend,
    B::Real: Stored + Real,
{
    let mut auto = l.clone();
    auto.cfg.solver.lambda = setting;
    auto.cfg.prior.lambda = None;
    let mut built = pipeline::build(b, &auto, inputs, ui)?;
    let solved = built.solve(b, &format!("lambda = \"{setting}\""), ui)?;
    let (used, _) = built.lambda.clone().expect("set by the solve");
    let img: Vec<Complex<f64>> = solved
        .x
        .iter()
        .map(|c| Complex::new(c.re.f64(), c.im.f64()))
        .collect();
    let q = pipeline::quality(&img, inputs.truth.as_deref()).context("no truth")?;
    ui.log(&format!(
        "lambda \"{setting}\": {:.3e}, PSNR {:.2} dB ({})",
        used.lambda, q.psnr_db, used.rule
    ));
    Ok((used, q.psnr_db))
}

/// PSNR over a log range of lambda for each method on one backend: the
/// run's problem built once (the plan, Q, F^H D and FFT(Q), as a run builds
/// it), a solve per method and lambda.
pub(super) fn sweep<B>(
    b: &B,
    l: &Loaded,
    inputs: &Inputs,
    args: &ValidateArgs,
    regularisers: &[(String, SweepMethod)],
    ui: &impl Ui,
) -> Result<Vec<Swept>>
where
    B: NufftBackend,
    B::Real: Stored + Real,
{
    // FFT(Q), the maps and F^H D on the device once, for every W and lambda.
    let pipeline::Built {
        plan,
        q,
        mut problem,
        ..
    } = pipeline::build(b, l, inputs, ui)?;
    // The sparse priors' ADMM preconditioned, whatever the config's prior.
    let sparse = |m: &SweepMethod| matches!(m, SweepMethod::Joint(Regulariser::Sparse { .. }));
    if l.cfg.solver.precondition && regularisers.iter().any(|(_, m)| sparse(m)) {
        problem.precondition(b, &q)?;
    }
    // Coil by coil: a single-coil problem per coil, made once.
    let mut per_coil = Vec::new();
    if regularisers
        .iter()
        .any(|(_, m)| matches!(m, SweepMethod::CoilByCoil))
    {
        for d in inputs.data.chunks_exact(inputs.traj.len()) {
            let fhd = pipeline::stage_fhd(&plan, d, ui)?;
            per_coil.push(recon_cg::Problem::new(b, &l.grid, &q, &fhd)?);
        }
    }
    let truth = inputs.truth.as_deref().expect("checked");
    let params = pipeline::solver_params(l);
    let n = args.sweep_points as i64;
    let mut out = Vec::new();
    for (name, w) in regularisers {
        // The sparse priors' lambda has its own unit (the peak of |F^H D|).
        let (lo, hi) = if sparse(w) {
            (
                args.sparse_lambda_min.log10(),
                args.sparse_lambda_max.log10(),
            )
        } else {
            (args.lambda_min.log10(), args.lambda_max.log10())
        };
        let step = (hi - lo) / (n - 1) as f64;
        // Point i is at lambda = 10^(lo + i step); i may leave 0..n when
        // the range is extended.
        let mut solve_at = |i: i64| -> Result<(SweepPoint, Vec<Complex<f64>>)> {
            let lambda = 10f64.powf(lo + step * i as f64);
            let img: Vec<Complex<f64>> = match w {
                SweepMethod::Joint(w) => {
                    let solved = pipeline::solve(
                        b,
                        &mut problem,
                        w,
                        lambda,
                        &params,
                        &mut |_, _| {},
                        &|_| {},
                    )?;
                    solved
                        .x
                        .iter()
                        .map(|c| Complex::new(c.re.f64(), c.im.f64()))
                        .collect()
                }
                SweepMethod::CoilByCoil => {
                    // sqrt(sum_c |x_c|^2)
                    let uniform = Stencil::uniform(l.grid.n);
                    let mut sum = vec![0.0f64; l.grid.len()];
                    for p in &mut per_coil {
                        let (x, _) = p.solve(b, &uniform, lambda, &params, &mut |_, _| {})?;
                        for (s, x) in sum.iter_mut().zip(&x) {
                            *s += x.re.f64().powi(2) + x.im.f64().powi(2);
                        }
                    }
                    sum.into_iter()
                        .map(|s| Complex::new(s.sqrt(), 0.0))
                        .collect()
                }
            };
            let q = pipeline::quality(&img, Some(truth)).expect("truth given");
            ui.log(&format!(
                "{name}: lambda {lambda:.3e}: PSNR {:.2} dB",
                q.psnr_db
            ));
            let p = SweepPoint {
                lambda,
                psnr_db: q.psnr_db,
                percent_error: q.percent_error,
            };
            Ok((p, img))
        };
        let mut points: Vec<(i64, SweepPoint)> = Vec::new();
        let mut best: Option<(i64, f64, Vec<Complex<f64>>)> = None;
        let mut consider =
            |i: i64,
             p: SweepPoint,
             img: Vec<Complex<f64>>,
             best: &mut Option<(i64, f64, Vec<Complex<f64>>)>| {
                if best.as_ref().is_none_or(|(_, b, _)| p.psnr_db > *b) {
                    *best = Some((i, p.psnr_db, img));
                }
                points.push((i, p));
            };
        for i in 0..n {
            let (p, img) = solve_at(i)?;
            consider(i, p, img, &mut best);
        }
        // The best at an end of the range: extend it that way, a point at a
        // time, until the best is inside (at most EXTEND points a side).
        let (mut first, mut last) = (0, n - 1);
        let mut extended = 0;
        loop {
            let b_i = best.as_ref().expect("points").0;
            let next = if b_i == first && extended < 2 * EXTEND {
                first -= 1;
                first
            } else if b_i == last && extended < 2 * EXTEND {
                last += 1;
                last
            } else {
                break;
            };
            extended += 1;
            ui.log(&format!(
                "{name}: the best lambda is at the end of the range; extending it"
            ));
            let (p, img) = solve_at(next)?;
            consider(next, p, img, &mut best);
        }
        points.sort_by_key(|(i, _)| *i);
        let (b_i, _, best_image) = best.expect("points");
        out.push(Swept {
            name: name.clone(),
            best: points
                .iter()
                .position(|(i, _)| *i == b_i)
                .expect("evaluated"),
            at_range_edge: b_i == first || b_i == last,
            points: points.into_iter().map(|(_, p)| p).collect(),
            best_image,
        });
    }
    Ok(out)
}
