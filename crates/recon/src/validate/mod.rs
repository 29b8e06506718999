//! `recon validate`: one problem through a matrix of engines and noise
//! levels, with the gridding baseline, answering three questions: does fast
//! GPU arithmetic cost image quality, does the NUFFT engine, and how much
//! better than gridding is the iterative reconstruction? Optionally sweeps lambda, and compares the
//! uniform W with the anatomical one (each at its own best lambda).

use crate::config::{DeviceChoice, Loaded, NoiseCfg, Precision, Source};
use crate::pipeline::{self, Outputs, Regulariser, SparsePrior, Ui};
use anyhow::{Context, Result};
use recon_core::{metrics, Complex};
use serde::Serialize;
use std::collections::BTreeMap;

mod auto;
mod method;
mod report;
mod sweep;
use method::{run_method, Method};
use report::{markdown, write};
use sweep::{sweep, SweepMethod, Swept, EXTEND};

/// The priors table's rows of the sparse priors.
pub const TV: &str = "TV";
pub const DTV: &str = "directional TV";
pub const WAVELET: &str = "l1 wavelets";

/// The priors table's row of coils reconstructed one by one.
const COIL_BY_COIL: &str = "each coil alone, uniform W, root sum of squares";

#[derive(clap::Args, Debug, Clone)]
pub struct ValidateArgs {
    /// TOML configuration (see configs/).
    #[arg(long)]
    pub config: std::path::PathBuf,
    /// Output folder, overriding `output.dir`.
    #[arg(long)]
    pub out: Option<std::path::PathBuf>,
    /// Also reconstruct over a logarithmic range of lambda and report the best.
    #[arg(long)]
    pub lambda_sweep: bool,
    /// Smallest lambda of the sweep (> 0).
    #[arg(long, default_value_t = 1e-3)]
    pub lambda_min: f64,
    /// Largest lambda of the sweep; the range is extended when the best
    /// lies at either end.
    #[arg(long, default_value_t = 10.0)]
    pub lambda_max: f64,
    /// Lambdas from the smallest to the largest, evenly spaced in log (>= 2).
    #[arg(long, default_value_t = 13)]
    pub sweep_points: usize,
    /// SNR of the noisy case when the config itself is noiseless.
    #[arg(long, default_value_t = 30.0)]
    pub snr: f64,
    /// Require the iterative result to beat gridding by this many dB on
    /// noiseless data (otherwise the margin is only reported).
    #[arg(long)]
    pub gridding_margin: Option<f64>,
    /// Compare W on the noisy data: uniform, anatomical (the config's
    /// [regulariser] settings) and gridding, each W at its own best lambda
    /// over the sweep range. Needs a reference image (phantom.anatomy).
    #[arg(long)]
    pub priors: bool,
    /// With --priors: also the sparse priors, total variation and (with a
    /// reference) directional TV, each over its own sweep of lambda
    /// (relative to the peak of |F^H D|), by the config's solver settings.
    #[arg(long)]
    pub sparse: bool,
    /// Smallest lambda of the sparse priors' sweep (> 0).
    #[arg(long, default_value_t = 1e-4)]
    pub sparse_lambda_min: f64,
    /// Largest lambda of the sparse priors' sweep.
    #[arg(long, default_value_t = 1e-2)]
    pub sparse_lambda_max: f64,
    /// Require TV to beat the best quadratic W by this many dB (otherwise
    /// the margin is only reported).
    #[arg(long)]
    pub tv_margin: Option<f64>,
    /// Require directional TV to beat the anatomical W by this many dB.
    #[arg(long)]
    pub dtv_margin: Option<f64>,
    /// Skip the matrix of engines; run only the sweeps (--lambda-sweep,
    /// --priors, --auto-lambda) on the noisy data.
    #[arg(long)]
    pub sweeps_only: bool,
    /// Check lambda = "auto" against the truth: on the noisy data, sweep
    /// the config's own prior over lambda, choose lambda by the discrepancy
    /// principle on the same problem, and require its PSNR within
    /// --auto-margin dB of the sweep's best.
    #[arg(long)]
    pub auto_lambda: bool,
    /// With --auto-lambda: how far below the sweep's best PSNR the
    /// automatic lambda's may be.
    #[arg(long, default_value_t = 1.0)]
    pub auto_margin: f64,
}

#[derive(Debug, Serialize)]
pub struct Row {
    pub data: String,
    pub method: String,
    pub device: String,
    pub psnr_db: f64,
    pub percent_error: f64,
    /// ||image - float64 image|| / ||float64 image|| (iterative rows).
    pub relative_difference_to_f64: Option<f64>,
    pub seconds: BTreeMap<String, f64>,
    #[serde(skip)]
    residuals: Vec<f64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct SweepPoint {
    pub lambda: f64,
    pub psnr_db: f64,
    pub percent_error: f64,
}

#[derive(Debug, Serialize)]
pub struct Validation {
    pub config: String,
    pub data: String,
    pub matrix: [usize; 3],
    pub samples: usize,
    pub lambda: crate::config::Lambda,
    pub iterations: usize,
    pub rows: Vec<Row>,
    pub checks: Vec<Check>,
    pub lambda_sweep: Option<Vec<SweepPoint>>,
    pub best_lambda: Option<f64>,
    /// The best lambda is still at an end of the range after extending it.
    pub best_lambda_at_range_edge: Option<bool>,
    /// `--auto-lambda`'s finding.
    pub auto_lambda: Option<auto::AutoLambda>,
    pub priors: Option<Priors>,
}

/// Uniform against anatomical W on the noisy data.
#[derive(Debug, Serialize)]
pub struct Priors {
    pub data: String,
    /// Gridding, uniform W, anatomical W.
    pub rows: Vec<PriorRow>,
    /// The anatomical prior's settings and what it found.
    pub edge_threshold: f64,
    pub edge_weight: f64,
    pub support_threshold: Option<f64>,
    /// Data edges of a second pass, in noise deviations; `None`: one pass.
    pub data_threshold: Option<f64>,
    pub prior: recon_prior::Info,
    pub sweeps: Vec<(String, Vec<SweepPoint>)>,
}

#[derive(Debug, Serialize)]
pub struct PriorRow {
    pub method: String,
    /// `None` for gridding, which has none.
    pub best_lambda: Option<f64>,
    /// The best lambda is the first or last of the sweep even after
    /// extending the range: widen it.
    pub at_range_edge: bool,
    pub psnr_db: f64,
    pub percent_error: f64,
}

#[derive(Debug, Serialize)]
pub struct Check {
    pub what: String,
    pub value: f64,
    /// The bound, or `None` for a figure that is only reported.
    pub bound: Option<String>,
    pub passed: Option<bool>,
    /// Why a check could not be made (then `passed` is `None`).
    pub not_run: Option<String>,
}

fn row(
    data: &str,
    method: String,
    out: &Outputs,
    truth: &[f64],
    reference: Option<&[Complex<f64>]>,
    image: &[Complex<f64>],
) -> Row {
    let q = pipeline::quality(image, Some(truth)).expect("truth given");
    Row {
        data: data.to_string(),
        method,
        device: out.device.clone(),
        psnr_db: q.psnr_db,
        percent_error: q.percent_error,
        relative_difference_to_f64: reference.map(|r| metrics::nrmse(image, r)),
        seconds: out
            .seconds
            .iter()
            .map(|(k, v)| (k.to_string(), *v))
            .collect(),
        residuals: out.info.residuals.clone(),
    }
}

impl ValidateArgs {
    /// Checks every number; errors name the option.
    pub fn check(&self) -> Result<()> {
        if !(self.lambda_min.is_finite() && self.lambda_min > 0.0) {
            anyhow::bail!(
                "--lambda-min must be positive (the sweep is logarithmic), got {}",
                self.lambda_min
            );
        }
        if !(self.lambda_max.is_finite() && self.lambda_max > self.lambda_min) {
            anyhow::bail!(
                "--lambda-max must be finite and above --lambda-min ({}), got {}",
                self.lambda_min,
                self.lambda_max
            );
        }
        if !(2..=1000).contains(&self.sweep_points) {
            anyhow::bail!(
                "--sweep-points must be 2 to 1000, got {}",
                self.sweep_points
            );
        }
        if !(self.snr.is_finite() && self.snr > 0.0) {
            anyhow::bail!("--snr must be positive and finite, got {}", self.snr);
        }
        for (name, m) in [
            ("--gridding-margin", self.gridding_margin),
            ("--tv-margin", self.tv_margin),
            ("--dtv-margin", self.dtv_margin),
        ] {
            if let Some(m) = m {
                if !m.is_finite() {
                    anyhow::bail!("{name} must be finite, got {m}");
                }
            }
        }
        if !(self.sparse_lambda_min.is_finite() && self.sparse_lambda_min > 0.0) {
            anyhow::bail!(
                "--sparse-lambda-min must be positive (the sweep is logarithmic), got {}",
                self.sparse_lambda_min
            );
        }
        if !(self.sparse_lambda_max.is_finite() && self.sparse_lambda_max > self.sparse_lambda_min)
        {
            anyhow::bail!(
                "--sparse-lambda-max must be finite and above --sparse-lambda-min ({}), got {}",
                self.sparse_lambda_min,
                self.sparse_lambda_max
            );
        }
        if self.sparse && !self.priors {
            anyhow::bail!("--sparse adds the sparse priors to --priors: give --priors too");
        }
        if (self.tv_margin.is_some() || self.dtv_margin.is_some()) && !self.sparse {
            anyhow::bail!("--tv-margin and --dtv-margin check the sparse priors: give --sparse");
        }
        Ok(())
    }
}

pub fn run(l: &Loaded, args: &ValidateArgs, ui: &impl Ui) -> Result<()> {
    if args.sweeps_only && !(args.lambda_sweep || args.priors || args.auto_lambda) {
        anyhow::bail!(
            "--sweeps-only needs --lambda-sweep, --priors or --auto-lambda: there is nothing else \
             to run"
        );
    }
    // Before any computation: can the outputs be written?
    let outputs =
        recon_io::OutputDir::prepare(l.output_dir()?).context("preparing the output folder")?;
    // The CPU float64 engine runs first: the host must hold it.
    pipeline::check_host_memory(l, pipeline::Work::Reconstruct, 8, false)?;
    let traj = pipeline::trajectory(l)?;
    // The data cases: synthetic data noiseless and noisy; a scan file as given.
    let mut cases: Vec<(String, Loaded)> = Vec::new();
    match &l.source {
        Source::Synthetic { .. } => {
            let mut clean = l.clone();
            clean.cfg.noise = None;
            let mut noisy = l.clone();
            let n = l.cfg.noise.clone().unwrap_or(NoiseCfg {
                snr: args.snr,
                seed: 1,
            });
            let name = format!("noisy (SNR {})", n.snr);
            noisy.cfg.noise = Some(n);
            cases.push(("noiseless".into(), clean));
            cases.push((name, noisy));
        }
        Source::Scan(_) => cases.push(("scan data".into(), l.clone())),
    }
    let gpu = match recon_cuda::probe() {
        Ok(_) => true,
        Err(why) => {
            ui.log(&format!(
                "validate: no usable GPU ({why}); the GPU rows run on the CPU in float32"
            ));
            false
        }
    };
    let mut rows = Vec::new();
    let mut checks = Vec::new();
    let mut noisy_inputs = None;
    for (name, case) in &cases {
        let inputs = pipeline::inputs(case, traj.clone(), ui)?;
        let truth = inputs
            .truth
            .clone()
            .context("validate needs a true image: the scan file has none")?;
        let mut reference: Option<(Outputs, f64)> = None;
        let methods: &[Method] = if args.sweeps_only { &[] } else { &Method::ALL };
        for &e in methods {
            ui.log(&format!("validate: {name}, {}", e.name()));
            let (out, method) = run_method(e, gpu, case, &inputs, ui)?;
            let r = row(
                name,
                method,
                &out,
                &truth,
                reference.as_ref().map(|(o, _)| &o.recon[..]),
                &out.recon,
            );
            if let Some((_, f64_psnr)) = &reference {
                let (bound, what) = match e {
                    Method::CpuF32 => (0.05, "float32 against float64"),
                    Method::GpuFast => (0.1, "hardware sin/cos against float64"),
                    Method::Nufft(t) if t <= 1e-6 => (0.01, "NUFFT against exact, float64"),
                    // float32's own bound, as for the exact engine in float32.
                    Method::GpuNufft => (0.05, "NUFFT on the GPU against exact, float64"),
                    _ => (f64::INFINITY, ""),
                };
                if bound.is_finite() {
                    let d = (r.psnr_db - f64_psnr).abs();
                    // Without a GPU the GPU rows ran on the CPU: their
                    // check would compare two CPU runs.
                    let not_run = (e.wants_gpu() && !gpu)
                        .then(|| "no GPU: the row ran on the CPU in float32".to_string());
                    checks.push(Check {
                        what: format!("{name}: {what} ({})", r.method),
                        value: d,
                        bound: Some(format!("<= {bound} dB")),
                        passed: if not_run.is_some() {
                            None
                        } else {
                            Some(d <= bound)
                        },
                        not_run,
                    });
                }
            }
            if reference.is_none() {
                let g = row(name, "gridding".into(), &out, &truth, None, &out.gridding);
                if name == "noiseless" {
                    let margin = r.psnr_db - g.psnr_db;
                    checks.push(Check {
                        what: "noiseless: iterative (float64) over gridding".into(),
                        value: margin,
                        bound: args.gridding_margin.map(|m| format!(">= {m} dB")),
                        passed: args.gridding_margin.map(|m| margin >= m),
                        not_run: None,
                    });
                }
                reference = Some((out, r.psnr_db));
                rows.push(r);
                rows.push(g);
            } else {
                rows.push(r);
            }
        }
        noisy_inputs = Some((name.clone(), case.clone(), inputs));
    }
    let (case_name, case, inputs) = noisy_inputs.as_ref().expect("one case at least");
    // The sweeps: uniform W, and the anatomical W when comparing priors.
    let mut stencils = Vec::new();
    if args.lambda_sweep || args.priors {
        stencils.push((
            "uniform W".to_string(),
            SweepMethod::Joint(Regulariser::Uniform),
        ));
    }
    // Several coils: also each coil alone, combined by the root sum of
    // squares, the alternative to SENSE without maps.
    if args.priors && inputs.coils > 1 {
        stencils.push((COIL_BY_COIL.to_string(), SweepMethod::CoilByCoil));
    }
    let mut prior_info = None;
    if args.priors {
        let anatomy = inputs.anatomy_on_grid.as_ref().context(
            "--priors needs an anatomical reference: set phantom.anatomy, or use a scan file with /reference/anatomy",
        )?;
        let p = recon_prior::Prior::new(&l.grid, anatomy, &l.cfg.regulariser.params())
            .context("building W from the anatomical reference")?;
        prior_info = Some(p.info.clone());
        stencils.push((
            "anatomical W".to_string(),
            SweepMethod::Joint(Regulariser::Anatomical(Box::new(p))),
        ));
        if args.sparse {
            let dtv = SparsePrior::Dtv {
                reference: anatomy.clone(),
                eta: l.cfg.prior.eta,
            };
            for (name, prior) in [
                (TV, SparsePrior::Tv),
                (DTV, dtv),
                (
                    WAVELET,
                    SparsePrior::Wavelet {
                        shifts: l.cfg.prior.shifts,
                    },
                ),
            ] {
                stencils.push((
                    name.to_string(),
                    SweepMethod::Joint(pipeline::sparse(l, prior)),
                ));
            }
        }
    }
    // --auto-lambda: the config's own prior, swept last.
    let own = auto::own_name(case);
    if args.auto_lambda {
        let w = pipeline::regulariser(case, inputs)?;
        stencils.push((own.clone(), SweepMethod::Joint(w)));
    }
    // The sweeps run with the config's engine, in float32 on the GPU when
    // there is one, else on the CPU (and the automatic lambda with them).
    let mut auto = None;
    let swept = if stencils.is_empty() {
        Vec::new()
    } else {
        let mut e = case.cfg.engine.clone();
        e.precision = Precision::F32;
        e.device = if gpu {
            DeviceChoice::Cuda
        } else {
            DeviceChoice::Cpu
        };
        let chosen = crate::choose_backend(&e)?;
        crate::on_backend!(chosen, b => {
            if args.auto_lambda {
                auto = Some(auto::solve(b, case, inputs, ui)?);
            }
            sweep(b, case, inputs, args, &stencils, ui)
        })?
    };
    let auto_lambda =
        auto.map(|found| auto::finding(found, &swept, &own, case_name, args, &mut checks));
    let (sweep_points, best, best_at_edge) = match swept.first() {
        Some(s) if args.lambda_sweep => (
            Some(s.points.clone()),
            Some(s.points[s.best].lambda),
            Some(s.at_range_edge),
        ),
        _ => (None, None, None),
    };
    let (priors, prior_gridding) = match prior_info {
        Some(info) => {
            // The baseline of the priors' table, in float64 on the CPU.
            let cpu = recon_core::CpuBackend::<f64>::new();
            let g = ui.stage("gridding", |_| pipeline::gridding(&cpu, case, inputs))?;
            let truth = inputs.truth.as_deref().expect("checked");
            let p = compare_priors(case_name, case, args, truth, &g, &swept, info, &mut checks);
            (Some(p), Some(g))
        }
        None => (None, None),
    };
    let v = Validation {
        config: l.path.display().to_string(),
        data: l.data_name(),
        matrix: l.grid.n,
        samples: traj.len(),
        lambda: l.cfg.lambda(),
        iterations: l.cfg.iterations(),
        rows,
        checks,
        lambda_sweep: sweep_points,
        best_lambda: best,
        best_lambda_at_range_edge: best_at_edge,
        priors,
        auto_lambda,
    };
    let files = write(outputs, l, &v, inputs, &swept, prior_gridding.as_deref())?;
    print!("{}", markdown(&v));
    println!(
        "\nwrote {} in {}",
        files.join(", "),
        l.output_dir()?.display()
    );
    // The outputs stay written; the status says a check failed.
    let failed: Vec<&str> = v
        .checks
        .iter()
        .filter(|c| c.passed == Some(false))
        .map(|c| c.what.as_str())
        .collect();
    if !failed.is_empty() {
        anyhow::bail!("{} check(s) failed: {}", failed.len(), failed.join("; "));
    }
    Ok(())
}

/// The priors table: gridding and each W at its best lambda, with checks
/// that the anatomical W beats both.
#[allow(clippy::too_many_arguments)]
fn compare_priors(
    name: &str,
    l: &Loaded,
    args: &ValidateArgs,
    truth: &[f64],
    gridding: &[Complex<f64>],
    swept: &[Swept],
    prior: recon_prior::Info,
    checks: &mut Vec<Check>,
) -> Priors {
    let gq = pipeline::quality(gridding, Some(truth)).expect("truth given");
    let mut rows = vec![PriorRow {
        method: "gridding".into(),
        best_lambda: None,
        at_range_edge: false,
        psnr_db: gq.psnr_db,
        percent_error: gq.percent_error,
    }];
    for s in swept {
        let p = &s.points[s.best];
        rows.push(PriorRow {
            method: s.name.clone(),
            best_lambda: Some(p.lambda),
            at_range_edge: s.at_range_edge,
            psnr_db: p.psnr_db,
            percent_error: p.percent_error,
        });
    }
    let psnr = |m: &str| rows.iter().find(|r| r.method == m).map(|r| r.psnr_db);
    // Several coils: SENSE (uniform W) over each coil alone and over
    // gridding.
    if let (Some(u), Some(c)) = (psnr("uniform W"), psnr(COIL_BY_COIL)) {
        for (other, v) in [(COIL_BY_COIL, c), ("gridding", gq.psnr_db)] {
            let margin = u - v;
            checks.push(Check {
                what: format!("{name}: SENSE, uniform W, over {other} (each at its best)"),
                value: margin,
                bound: Some("> 0 dB".into()),
                passed: Some(margin > 0.0),
                not_run: None,
            });
        }
    }
    if let (Some(a), Some(u)) = (psnr("anatomical W"), psnr("uniform W")) {
        for (other, v) in [("uniform W", u), ("gridding", gq.psnr_db)] {
            let margin = a - v;
            checks.push(Check {
                what: format!("{name}: anatomical W over {other} (each at its best)"),
                value: margin,
                bound: Some("> 0 dB".into()),
                passed: Some(margin > 0.0),
                not_run: None,
            });
        }
    }
    // The sparse priors against the quadratic W that uses the same
    // information: TV against the uniform W (no reference), directional TV
    // against the anatomical W (the bounds when asked for).
    for (method, over, margin) in [
        (TV, "uniform W", args.tv_margin),
        (DTV, "anatomical W", args.dtv_margin),
        (DTV, TV, None),
        (WAVELET, "uniform W", None),
    ] {
        if let (Some(m), Some(v)) = (psnr(method), psnr(over)) {
            let gain = m - v;
            checks.push(Check {
                what: format!("{name}: {method} over {over} (each at its best)"),
                value: gain,
                bound: margin.map(|b| format!(">= {b} dB")),
                passed: margin.map(|b| gain >= b),
                not_run: None,
            });
        }
    }
    let r = &l.cfg.regulariser;
    Priors {
        data: name.to_string(),
        rows,
        edge_threshold: r.edge_threshold,
        edge_weight: r.edge_weight,
        support_threshold: r.support_threshold,
        data_threshold: r.params().data_threshold,
        prior,
        sweeps: swept
            .iter()
            .map(|s| (s.name.clone(), s.points.clone()))
            .collect(),
    }
}
