//! The reconstruction pipeline, stage by stage, written once for any backend.
//! It knows nothing of terminals: progress goes through [`Ui`].

use crate::config::{self, Loaded, Source};
use anyhow::{Context, Result};
use recon_cg::Params;
use recon_core::{metrics, Complex, Real, Stencil, Volume};
use recon_encoding::{NufftBackend, Plan};
use recon_q::{Cache, CacheStatus, Stored};
use recon_synth::{add_coil_noise, CoilNoise};
use std::time::Instant;

mod coils;
mod memory;
mod solve;
use coils::gridding_rss;
pub use coils::{
    gridder, maps_from_data, part_plans, prepare, sense_rhs, stage_maps, stage_problem, Prepared,
};
pub use memory::{check_device_memory, check_host_memory, check_memory, samples, Work};
pub use solve::{regulariser, solve, sparse, Regulariser, Solved, SparsePrior};

/// How the pipeline reports progress; the binary implements it with indicatif.
pub trait Ui {
    /// A one-line message (stderr).
    fn log(&self, msg: &str);
    /// Runs `f` with a progress callback `(done, total)` for a named stage.
    fn stage<T>(&self, name: &str, f: impl FnOnce(&mut dyn FnMut(u64, u64)) -> T) -> T;
    /// Runs CG with a callback `(iteration, relative residual)`.
    fn solver<T>(&self, iterations: usize, f: impl FnOnce(&mut dyn FnMut(usize, f64)) -> T) -> T;
}

/// The inputs of a run.
pub struct Inputs {
    pub traj: Vec<[f64; 3]>,
    /// `[C, M]`: each coil's samples in turn.
    pub data: Vec<Complex<f64>>,
    /// Receive coils C (1: one coil of sensitivity 1, no SENSE).
    pub coils: usize,
    /// The coils' true sensitivities on the grid, when known (synthetic
    /// coils), whitened and compressed as the data.
    pub true_maps: Option<Vec<Vec<Complex<f64>>>>,
    /// Whether the coils' data (and maps) were prewhitened ...
    pub whitened: bool,
    /// ... and compressed: `(C, energy kept)`.
    pub compressed: Option<(usize, f64)>,
    /// The true image, when known (always for synthetic data). With
    /// synthetic coils it is the phantom times the root sum of squares of
    /// the true sensitivities: the image that unit-norm maps estimated from
    /// the data reconstruct.
    pub truth: Option<Vec<f64>>,
    /// A proton-density reference, on its own grid ...
    pub anatomy: Option<Volume>,
    /// ... and averaged onto the reconstruction's grid (recon_prior::resample).
    pub anatomy_on_grid: Option<Vec<f64>>,
    pub noise_sigma: f64,
    /// The power of two the data (and, to match, the truth) were multiplied
    /// by so that the largest |D| lies in [0.5, 1): see [`normalise`].
    pub data_scale: f64,
}

/// Everything a run produces.
pub struct Outputs {
    pub recon: Vec<Complex<f64>>,
    pub gridding: Vec<Complex<f64>>,
    pub fhd: Vec<Complex<f64>>,
    /// Q, kept when `output.q` asks for it.
    pub q: Option<Vec<Complex<f64>>>,
    pub info: recon_cg::Info,
    pub q_cache: CacheStatus,
    pub q_file: Option<std::path::PathBuf>,
    pub lambda_abs: f64,
    /// The regulariser W, and what the anatomical prior found (if used).
    pub stencil: Stencil,
    pub prior: Option<recon_prior::Info>,
    pub seconds: Vec<(&'static str, f64)>,
    pub device: String,
    /// GPUs that shared SENSE's coils (1 for one coil, a small grid or one
    /// device).
    pub coil_devices: usize,
}

/// The sample positions: generated, or from the scan file.
pub fn trajectory(l: &Loaded) -> Result<Vec<[f64; 3]>> {
    Ok(match &l.source {
        Source::Synthetic { trajectory, .. } => trajectory.generate(&l.grid)?,
        Source::Scan(s) => s.traj.clone(),
    })
}

/// The inputs as synthesised or read, before the coils are prepared.
pub struct Raw {
    pub traj: Vec<[f64; 3]>,
    /// `[C, M]`
    pub data: Vec<Complex<f64>>,
    pub coils: usize,
    /// The coils' sensitivities: the synthetic coils' own, or the scan
    /// file's `/coils/maps`.
    pub maps: Option<Vec<Vec<Complex<f64>>>>,
    /// The coils' noise covariance `[C, C]`, when known.
    pub covariance: Option<Vec<Complex<f64>>>,
    pub truth: Option<Vec<f64>>,
    /// Whether the truth is the phantom alone, to be weighted by the
    /// prepared maps' root sum of squares (synthetic coils).
    pub truth_by_maps: bool,
    pub anatomy: Option<Volume>,
    pub noise_sigma: f64,
}

/// k-space data on `traj`, the truth and the anatomy, with the coils
/// prepared ([`prepare`]): see [`raw_inputs`].
pub fn inputs(l: &Loaded, traj: Vec<[f64; 3]>, ui: &impl Ui) -> Result<Inputs> {
    prepared(l, raw_inputs(l, traj, ui)?, ui)
}

/// Prewhitens and compresses the coils of `raw`, and weights a synthetic
/// truth by the prepared maps ([`truth_seen`]).
pub fn prepared(l: &Loaded, raw: Raw, ui: &impl Ui) -> Result<Inputs> {
    let mut p = prepare(l, raw.data, raw.coils, raw.maps, raw.covariance.as_deref())?;
    let data_scale = normalise(&mut p.data);
    let mut truth = truth_seen(raw.truth, raw.truth_by_maps, p.maps.as_deref());
    if let Some(t) = &mut truth {
        t.iter_mut().for_each(|v| *v *= data_scale);
    }
    Ok(Inputs {
        data_scale,
        truth,
        anatomy_on_grid: ui.stage("reference on the grid", |_| {
            on_grid(&l.grid, raw.anatomy.as_ref())
        })?,
        anatomy: raw.anatomy,
        traj: raw.traj,
        data: p.data,
        coils: p.coils,
        true_maps: p.maps,
        whitened: p.whitened,
        compressed: p.compressed,
        noise_sigma: raw.noise_sigma,
    })
}

/// Multiplies `data` by the power of two that brings its largest |D| into
/// [0.5, 1), and returns it (1 for all-zero data). The float32 engine's
/// sums and dot products overflow for data of 1e10 times the usual scale
/// and underflow for 1e-20 times; every stage is linear in the data, and a
/// power of two scales every floating-point operation exactly, so the
/// normalised run's images, divided by the factor, are the very numbers
/// an unnormalised run gives wherever that one does not overflow. The
/// truth is multiplied by the same factor, so that PSNR compares like with
/// like, and [`Inputs::unscale`] undoes both for the outputs.
pub fn normalise(data: &mut [Complex<f64>]) -> f64 {
    let largest = data.iter().map(|d| d.norm()).fold(0.0, f64::max);
    if !(largest > 0.0 && largest.is_finite()) {
        return 1.0;
    }
    // largest = f 2^e with f in [0.5, 1): multiply by 2^-e.
    let e = largest.log2().floor() as i32 + 1;
    let scale = 2f64.powi(-e);
    data.iter_mut().for_each(|d| *d *= scale);
    scale
}

impl Inputs {
    /// Undoes [`normalise`] on the truth and on a run's images, for the
    /// outputs: they are then in the data's own units.
    pub fn unscale(&mut self, out: &mut Outputs) {
        let back = 1.0 / self.data_scale;
        if back == 1.0 {
            return;
        }
        for v in [&mut out.recon, &mut out.gridding, &mut out.fhd] {
            v.iter_mut().for_each(|c| *c *= back);
        }
        if let Some(t) = &mut self.truth {
            t.iter_mut().for_each(|v| *v *= back);
        }
        self.data.iter_mut().for_each(|d| *d *= back);
        self.data_scale = 1.0;
    }
}

/// The truth a run measures PSNR against: with synthetic coils
/// (`by_maps`), the phantom weighted by the prepared maps' root sum of
/// squares, the image that maps of unit norm reconstruct.
pub fn truth_seen(
    truth: Option<Vec<f64>>,
    by_maps: bool,
    maps: Option<&[Vec<Complex<f64>>]>,
) -> Option<Vec<f64>> {
    let mut truth = truth?;
    if let (true, Some(maps)) = (by_maps, maps) {
        for (t, r) in truth.iter_mut().zip(recon_coils::rss(maps)) {
            *t *= r;
        }
    }
    Some(truth)
}

/// k-space data on `traj`, the truth and the anatomy: synthesised (analytic
/// transform, per coil with `[coils]`, plus noise, and the box-averaged
/// phantoms), or from the scan.
pub fn raw_inputs(l: &Loaded, traj: Vec<[f64; 3]>, ui: &impl Ui) -> Result<Raw> {
    match &l.source {
        Source::Synthetic {
            phantom, anatomy, ..
        } => {
            let coils = l.cfg.coils.as_ref().map(|c| c.coils());
            let mut data = ui.stage("k-space", |_| match &coils {
                Some(c) => c.kspace(phantom, &l.grid, &traj),
                None => phantom.kspace(&l.grid, &traj),
            });
            let count = coils.map_or(1, |c| c.count);
            let maps: Option<Vec<Vec<Complex<f64>>>> = coils.map(|c| {
                ui.stage("coil maps", |_| {
                    c.sensitivities()
                        .iter()
                        .map(|s| s.on_grid(&l.grid))
                        .collect()
                })
            });
            let covariance = l.cfg.noise.as_ref().map(|n| {
                let correlation = l.cfg.coils.as_ref().map_or(0.0, |c| c.noise_correlation);
                let noise = CoilNoise {
                    snr: n.snr,
                    seed: n.seed,
                    correlation,
                };
                add_coil_noise(&mut data, count, noise)
            });
            let noise_sigma = covariance.as_ref().map_or(0.0, |c| c[0].sqrt());
            let pc = l
                .cfg
                .phantom
                .as_ref()
                .expect("synthetic data have [phantom]");
            let s = pc.supersample;
            // The reference on its own matrix over the same FOV.
            let anatomy = match anatomy {
                Some(a) => {
                    let m = pc.anatomy_matrix.map_or(l.grid.n, |m| m.0);
                    let g = recon_core::Grid::new(m, l.grid.fov_mm)?;
                    Some(Volume::new(
                        g,
                        ui.stage("reference", |_| a.rasterise(&g, s)),
                    )?)
                }
                None => None,
            };
            // The phantom's limits keep these finite; check rather than
            // let a NaN surface later as a solver failure.
            if let Some(m) = data
                .iter()
                .position(|d| !(d.re.is_finite() && d.im.is_finite()))
            {
                anyhow::bail!(
                    "the synthetic k-space datum {m} of phantom `{}` is {}: check the phantom's values and sizes{}",
                    phantom.name,
                    data[m],
                    if noise_sigma.is_finite() { "" } else { " and noise.snr" }
                );
            }
            Ok(Raw {
                truth: Some(ui.stage("truth", |_| phantom.rasterise(&l.grid, s))),
                truth_by_maps: coils.is_some(),
                anatomy,
                traj,
                data,
                coils: count,
                maps,
                covariance: covariance
                    .map(|c| c.into_iter().map(|v| Complex::new(v, 0.0)).collect()),
                noise_sigma,
            })
        }
        Source::Scan(s) => Ok(Raw {
            traj,
            data: s.data.clone(),
            coils: s.coils,
            maps: s.maps.clone(),
            covariance: match &s.noise {
                None => None,
                Some(recon_io::scan::CoilNoise::Covariance(c)) => Some(c.clone()),
                Some(recon_io::scan::CoilNoise::Samples(n)) => Some(
                    recon_coils::covariance(n, s.coils)
                        .context("the noise samples of the scan file (kspace/noise)")?,
                ),
            },
            truth: s.truth.clone(),
            truth_by_maps: false,
            anatomy: s.anatomy.clone(),
            noise_sigma: 0.0,
        }),
    }
}

/// The reference averaged onto `grid`, once, before anything is computed:
/// a reference whose FOV misses the grid stops the run here.
fn on_grid(grid: &recon_core::Grid, a: Option<&Volume>) -> Result<Option<Vec<f64>>> {
    let Some(a) = a else { return Ok(None) };
    let mut out = vec![0.0; grid.len()];
    recon_prior::resample(&mut out, grid, a).context("the anatomical reference")?;
    Ok(Some(out))
}

fn to_f64<T: Real>(v: &[Complex<T>]) -> Vec<Complex<f64>> {
    v.iter()
        .map(|c| Complex::new(c.re.f64(), c.im.f64()))
        .collect()
}

pub(crate) fn from_f64<T: Real>(v: &[Complex<f64>]) -> Vec<Complex<T>> {
    v.iter()
        .map(|c| Complex::new(T::of(c.re), T::of(c.im)))
        .collect()
}

fn q_cache(l: &Loaded) -> Option<Cache> {
    l.cfg.q.cache.then(|| Cache::new(config::cache_dir(&l.cfg)))
}

/// The encoding plan of a run: the config's engine, for its grid and
/// trajectory (points sorted once).
pub fn plan<'b, B: NufftBackend>(
    backend: &'b B,
    l: &Loaded,
    traj: &[[f64; 3]],
) -> Result<Plan<'b, B>> {
    Plan::new(backend, l.cfg.engine.engine(), &l.grid, traj)
        .context("planning the encoding operator")
}

/// Q only, through the cache: `recon q`.
pub fn q_only<B>(
    plan: &Plan<'_, B>,
    l: &Loaded,
    ui: &impl Ui,
) -> Result<(CacheStatus, Option<std::path::PathBuf>)>
where
    B: NufftBackend,
    B::Real: Stored,
{
    let (_, status, file) = stage_q(plan, l, ui)?;
    Ok((status, file))
}

/// Q through the cache, saying where it came from.
#[allow(clippy::type_complexity)]
pub fn stage_q<B>(
    plan: &Plan<'_, B>,
    l: &Loaded,
    ui: &impl Ui,
) -> Result<(
    Vec<Complex<B::Real>>,
    CacheStatus,
    Option<std::path::PathBuf>,
)>
where
    B: NufftBackend,
    B::Real: Stored,
{
    let cache = q_cache(l);
    let file = cache.as_ref().map(|c| recon_q::cache_file(c, plan));
    let (q, status) = ui
        .stage("Q", |p| recon_q::load_or_compute(plan, cache.as_ref(), p))
        .context("computing Q")?;
    let file_name = file
        .as_ref()
        .map(|f| f.display().to_string())
        .unwrap_or_default();
    match &status {
        CacheStatus::Hit => ui.log(&format!("Q: loaded from cache {file_name}")),
        CacheStatus::Miss => ui.log(&format!("Q: computed and cached in {file_name}")),
        CacheStatus::Invalid(why) => ui.log(&format!(
            "Q: cache file unusable ({why}); recomputed and replaced"
        )),
        CacheStatus::Disabled => ui.log("Q: computed (cache disabled)"),
        CacheStatus::NotStored(why) => ui.log(&format!(
            "warning: Q computed, but not cached ({why}); the run goes on, and the next one will compute Q again"
        )),
    }
    Ok((q, status, file))
}

/// F^H D by the plan.
pub fn stage_fhd<B: NufftBackend>(
    plan: &Plan<'_, B>,
    data: &[Complex<f64>],
    ui: &impl Ui,
) -> Result<Vec<Complex<B::Real>>> {
    let mut fhd = vec![Complex::default(); plan.grid().len()];
    ui.stage("F^H D", |p| plan.adjoint(&mut fhd, data, p))
        .context("computing F^H D")?;
    Ok(fhd)
}

/// The whole reconstruction on `backend`.
pub fn reconstruct<B>(backend: &B, l: &Loaded, inputs: &Inputs, ui: &impl Ui) -> Result<Outputs>
where
    B: NufftBackend,
    B::Real: Stored,
{
    let mut seconds = Vec::new();

    let t = Instant::now();
    let plan = plan(backend, l, &inputs.traj)?;
    seconds.push(("plan", t.elapsed().as_secs_f64()));

    let t = Instant::now();
    let (q, q_cache, q_file) = stage_q(&plan, l, ui)?;
    seconds.push(("q", t.elapsed().as_secs_f64()));

    // F^H D and FFT(Q) on the device (and the maps, for several coils).
    let (mut problem, fhd, gridder) =
        stage_problem(backend, &plan, l, inputs, &q, ui, &mut seconds)?;

    // (F^H F + lambda W^H W) rho = F^H D
    let t = Instant::now();
    let params = Params {
        iterations: l.cfg.iterations(),
        tolerance: l.cfg.solver.tolerance,
    };
    let lambda = l.cfg.lambda();
    let w = regulariser(l, inputs)?;
    let lambda_abs = match w {
        Regulariser::Sparse { .. } => problem.sparse_lambda_abs(backend, lambda)?,
        _ => problem.lambda_abs(lambda),
    };
    let coil_devices = problem.devices();
    if let Regulariser::Anatomical(p) = &w {
        let i = &p.info;
        ui.log(&format!(
            "W: anatomical, {} of {} edges cross reference boundaries ({:.1}%){}",
            i.boundary_edges,
            i.edges,
            100.0 * i.boundary_edges as f64 / i.edges as f64,
            if l.cfg.regulariser.support_threshold.is_some() {
                format!(", {} voxels outside the support", i.outside_support)
            } else {
                String::new()
            }
        ));
    }
    let solved = ui
        .solver(params.iterations * w.passes(), |cb| {
            solve(backend, &mut problem, &w, lambda, &params, cb)
        })
        .with_context(|| l.cfg.algorithm().describe())?;
    if let Some(n) = solved.prior.as_ref().and_then(|i| i.data_edges) {
        ui.log(&format!(
            "W: second pass, {n} more edges relaxed where the first pass's image has edges"
        ));
    }
    let (rho, info) = (solved.x, solved.info);
    seconds.push(("cg", t.elapsed().as_secs_f64()));

    let t = Instant::now();
    let gridding = ui.stage("gridding", |_| match &gridder {
        None => gridding(backend, l, inputs),
        Some(g) => gridding_rss(g, inputs),
    })?;
    seconds.push(("gridding", t.elapsed().as_secs_f64()));

    Ok(Outputs {
        recon: to_f64(&rho),
        gridding,
        fhd: to_f64(&fhd),
        info,
        q: l.cfg.output.q.then(|| to_f64(&q)),
        q_cache,
        q_file,
        lambda_abs,
        stencil: solved.stencil,
        prior: solved.prior,
        seconds,
        device: backend.describe(),
        coil_devices,
    })
}

/// The gridding baseline with the config's settings, on the run's backend.
/// Several coils: each coil gridded, combined by the root sum of squares.
pub fn gridding<B: NufftBackend>(
    backend: &B,
    l: &Loaded,
    inputs: &Inputs,
) -> Result<Vec<Complex<f64>>> {
    let g = gridder(backend, l, inputs)?;
    if inputs.coils > 1 {
        return gridding_rss(&g, inputs);
    }
    g.image(&inputs.data, None).context("gridding")
}

/// Image-quality figures of one reconstruction against the truth.
pub struct Quality {
    pub psnr_db: f64,
    pub percent_error: f64,
}

/// `None` when there is no truth to compare with.
pub fn quality(image: &[Complex<f64>], truth: Option<&[f64]>) -> Option<Quality> {
    let truth = truth?;
    let mag: Vec<f64> = image.iter().map(|c| c.norm()).collect();
    Some(Quality {
        psnr_db: metrics::psnr_db(&mag, truth),
        percent_error: metrics::percent_error(&mag, truth),
    })
}
