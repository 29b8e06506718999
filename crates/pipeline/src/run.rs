//! A run's stages, written once for any backend: the plan, Q through its
//! cache, F^H D, the solve and the gridding baseline, and the image quality.

use crate::coils::gridding_rss;
use crate::config::{self, Loaded};
use crate::{gridder, Inputs};
use crate::{Context, Result, Ui};
use rayon::prelude::*;
use recon_core::{metrics, Complex, Real, Stencil};
use recon_encoding::{NufftBackend, Plan};
use recon_q::{Cache, CacheStatus, Stored};
use std::time::Instant;

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
    /// The lambda (relative) the solve used, and why.
    pub lambda: crate::lambda::Used,
    /// Each solver pass's iterations (the anatomical W runs two; `info`
    /// holds them together).
    pub passes: Vec<usize>,
    /// The regulariser W, and what the anatomical prior found (if used).
    pub stencil: Stencil,
    pub prior: Option<recon_prior::Info>,
    pub seconds: Vec<(&'static str, f64)>,
    pub device: String,
    /// GPUs that shared SENSE's coils (1 for one coil, a small grid or one
    /// device).
    pub coil_devices: usize,
    /// The coil maps SENSE used (several coils), one per coil on the grid.
    pub maps: Option<Vec<Vec<Complex<f64>>>>,
}

pub(crate) fn to_f64<T: Real>(v: &[Complex<T>]) -> Vec<Complex<f64>> {
    v.par_iter()
        .map(|c| Complex::new(c.re.f64(), c.im.f64()))
        .collect()
}

/// Values of f64 in the backend's precision.
pub fn from_f64<T: Real>(v: &[Complex<f64>]) -> Vec<Complex<T>> {
    v.par_iter()
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

/// Where an image's outputs go the moment they are final, before its
/// solve ends, so that a caller can write them while the rest computes:
/// its truth once its inputs are made, its gridding baseline and F^H D
/// before its solve starts. The run's [`Outputs`] hold them all the same.
pub trait Ready: Sync {
    /// Image `image`'s `part`, in the units the run computes in: its values
    /// times `back` are the data's own ([`Inputs::unscale`] does the same
    /// to the outputs at the end).
    fn ready(&self, image: usize, part: Part<'_>, back: f64);
}

/// An output of one image, final before its solve ends ([`Ready`]).
#[derive(Clone, Copy)]
pub enum Part<'a> {
    Truth(&'a [f64]),
    Gridding(&'a [Complex<f64>]),
    Fhd(&'a [Complex<f64>]),
}

/// Takes no part early: every output is written once the run is done.
pub struct AtEnd;

impl Ready for AtEnd {
    fn ready(&self, _: usize, _: Part<'_>, _: f64) {}
}

/// The whole reconstruction on `backend`: the builder, the solve and the
/// gridding baseline.
pub fn reconstruct<B>(backend: &B, l: &Loaded, inputs: &Inputs, ui: &impl Ui) -> Result<Outputs>
where
    B: NufftBackend,
    B::Real: Stored,
{
    if let Some((stack, batch)) = crate::stack::choose(l, inputs, ui)? {
        return crate::stack::reconstruct(backend, l, inputs, &stack, batch, ui);
    }
    let mut built = crate::build(backend, l, inputs, ui)?;
    let seconds = std::mem::take(&mut built.seconds);
    finish(
        backend,
        l,
        inputs,
        &mut built,
        Baseline::Here,
        seconds,
        (&AtEnd, 0),
        ui,
    )
}

/// Where a run's gridding baseline comes from ([`finish`]).
pub(crate) enum Baseline<'g, 'b, B: NufftBackend> {
    /// Made before the problem was built, with its seconds (and given to
    /// `early` then).
    Made(Vec<Complex<f64>>, f64),
    /// Gridded before the solve: by the built problem's gridding plan
    /// (several coils), else by this one (shared by a series' images)...
    By(&'g recon_gridding::Gridding<'b, B>),
    /// ... else by one made here.
    Here,
}

/// Solves a built problem for `inputs`, with its gridding `baseline`: a
/// run's outputs, `seconds` timing what came before. The baseline and F^H
/// D, final before the solve, go to `early` as image `image`'s.
#[allow(clippy::too_many_arguments)]
pub(crate) fn finish<'b, B>(
    backend: &'b B,
    l: &Loaded,
    inputs: &Inputs,
    built: &mut crate::Built<'b, B>,
    baseline: Baseline<'_, 'b, B>,
    mut seconds: Vec<(&'static str, f64)>,
    (early, image): (&dyn Ready, usize),
    ui: &impl Ui,
) -> Result<Outputs>
where
    B: NufftBackend,
    B::Real: Stored,
{
    let gridding = match baseline {
        Baseline::Made(gridding, made) => {
            seconds.push(("gridding", made));
            gridding
        }
        gridder => {
            let t = Instant::now();
            let gridding = ui.stage("gridding", |_| match (&built.gridder, gridder) {
                (Some(g), _) => gridding_rss(g, inputs),
                (None, Baseline::By(g)) => g.image(&inputs.data, None).context("gridding"),
                (None, _) => self::gridding(backend, l, inputs),
            })?;
            seconds.push(("gridding", t.elapsed().as_secs_f64()));
            early.ready(image, Part::Gridding(&gridding), inputs.back());
            gridding
        }
    };

    // F^H D for the outputs, from the device where the solve uses it.
    let t = Instant::now();
    let fhd = to_f64(built.fhd(backend)?);
    seconds.push(("fhd_host", t.elapsed().as_secs_f64()));
    early.ready(image, Part::Fhd(&fhd), inputs.back());

    // (F^H F + lambda W^H W) rho = F^H D
    let t = Instant::now();
    let coil_devices = built.problem.devices();
    let solved = built.solve(backend, l.cfg.algorithm().describe(), ui)?;
    let (lambda, lambda_abs) = built.lambda.clone().expect("set by the solve");
    seconds.push(("cg", t.elapsed().as_secs_f64()));

    Ok(Outputs {
        recon: to_f64(&solved.x),
        gridding,
        fhd,
        info: solved.info,
        q: l.cfg.output.q.then(|| to_f64(&built.q)),
        q_cache: built.q_cache.clone(),
        q_file: built.q_file.clone(),
        lambda_abs,
        lambda,
        passes: solved.passes,
        stencil: solved.stencil,
        prior: solved.prior,
        seconds,
        device: backend.describe(),
        coil_devices,
        maps: built.maps.clone(),
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
#[derive(Debug, Clone, Copy)]
pub struct Quality {
    pub psnr_db: f64,
    pub percent_error: f64,
}

/// `None` when there is no truth to compare with.
pub fn quality(image: &[Complex<f64>], truth: Option<&[f64]>) -> Option<Quality> {
    let (psnr_db, percent_error) = metrics::of_magnitude(image, truth?);
    Some(Quality {
        psnr_db,
        percent_error,
    })
}
