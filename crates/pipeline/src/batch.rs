//! 2-D problems that share one trajectory solved together: a stack's
//! slices, or the images (slices, contrasts, ...) of a multi-slice 2-D
//! scan. Their Toeplitz products share one Q; stacked along z with Q on
//! the plane of displacement 0 ([`recon_encoding::batched_q`]), they are
//! one 3-D Toeplitz product on `[Nx, Ny, P]` that no plane crosses, which a
//! GPU runs as one call instead of one per image. W is plain first
//! differences within each plane ([`recon_core::Stencil::planes`]), so the
//! batch poses each image's equations exactly; one CG then shares its step
//! sizes over the images (one Krylov space for all), which is where its
//! iterates differ from an image-by-image solve's. It takes the uniform
//! quadratic prior and one coil; other runs go one image at a time.

use crate::build::{plan_and_q, solver_params, PlanQ};
use crate::config::{Loaded, PriorKind, RegulariserKind, StackMode};
use crate::lambda::{gcv::Probe, measure, solve_with, Candidate, Rule, Used};
use crate::run::to_f64;
use crate::{gridder, Context, Inputs, Outputs, Result, Ui};
use recon_cg::Problem;
use recon_core::{Complex, Grid, Stencil};
use recon_encoding::{batched_q, NufftBackend, Stack};
use recon_q::Stored;
use std::time::Instant;

/// Whether images of this run can be solved as one batch: one coil and
/// the uniform quadratic prior (CG). ([`wanted`] also asks that the coils
/// were not compressed, as images that share a problem do in crate::series.)
pub fn fits(l: &Loaded, coils: usize) -> bool {
    coils == 1
        && l.cfg.prior.kind == PriorKind::Quadratic
        && l.cfg.regulariser.kind == RegulariserKind::Uniform
}

/// Whether `solver.stack` has slices (a stack's, or a 2-D scan's images)
/// solved as one batch, for a run with `inputs`: `batch` insists (an error
/// naming the key where the batch cannot take the run), `auto` batches
/// where it can, `slices` and `volume` never.
pub fn wanted(l: &Loaded, inputs: &Inputs) -> Result<bool> {
    let fits = fits(l, inputs.coils) && inputs.compressed.is_none();
    Ok(match l.cfg.solver.stack {
        StackMode::Batch if !fits => crate::bail!(
            "solver.stack = \"batch\" takes one coil, uncompressed, and the uniform quadratic \
             prior (prior.kind = \"quadratic\", regulariser.kind = \"uniform\"); this run has {} \
             coils{}, prior.kind = \"{}\" and regulariser.kind = \"{}\" (use \"slices\")",
            inputs.coils,
            match inputs.compressed {
                Some((from, _)) => format!(" compressed from {from}"),
                None => String::new(),
            },
            l.cfg.prior.kind.name(),
            l.cfg.regulariser.kind.name()
        ),
        StackMode::Batch => true,
        StackMode::Auto => fits,
        StackMode::Slices | StackMode::Volume => false,
    })
}

/// A batch's solution: each image's, and what they share.
pub struct Solved<T> {
    /// Image after image, each on the 2-D grid ...
    pub x: Vec<Complex<T>>,
    /// ... and each image's F^H D.
    pub fhd: Vec<Complex<T>>,
    pub info: recon_cg::Info,
    /// The lambda used and why (one for the whole batch), and its
    /// absolute value.
    pub lambda: Used,
    pub lambda_abs: f64,
    /// Stages "fhd", "fft_q" and "cg".
    pub seconds: Vec<(&'static str, f64)>,
}

/// Solves the 2-D problems of `data` (each image's samples on the shared
/// plan's trajectory) together: each image's F^H D, stacked along z, and
/// one CG on `(F^H F + lambda W^H W) x = F^H D` with `l`'s lambda and
/// iterations (lambda "auto" or "gcv": one for the batch, chosen over all
/// its data, of noise variance `sigma2` per sample where known). An odd count is padded by an image of zeros, whose
/// solution stays 0 (the batch's grid needs an even z).
pub fn solve<B>(
    backend: &B,
    l: &Loaded,
    shared: &PlanQ<'_, B>,
    data: &[&[Complex<f64>]],
    sigma2: Option<f64>,
    ui: &impl Ui,
) -> Result<Solved<B::Real>>
where
    B: NufftBackend,
{
    let slice = shared.plan.grid();
    let per = slice.len();
    let planes = data.len() + data.len() % 2;
    let grid = Grid::new([slice.n[0], slice.n[1], planes], slice.fov_mm)?;
    let mut seconds = Vec::new();

    // F^H D of each image, stacked along z.
    let t = Instant::now();
    let mut fhd = vec![Complex::default(); grid.len()];
    ui.stage("F^H D", |p| {
        for (j, (f, d)) in fhd.chunks_exact_mut(per).zip(data).enumerate() {
            shared.plan.adjoint(f, d, &mut |_, _| {})?;
            p(j as u64 + 1, data.len() as u64);
        }
        Ok::<_, recon_core::Error>(())
    })
    .context("computing F^H D")?;
    seconds.push(("fhd", t.elapsed().as_secs_f64()));

    let t = Instant::now();
    let q = batched_q(slice, planes, &shared.q).context("stacking the images' Q")?;
    let mut problem = Problem::new(backend, &grid, &q, &fhd)?;
    fhd.truncate(data.len() * per);
    drop(q);
    backend.synchronize()?;
    seconds.push(("fft_q", t.elapsed().as_secs_f64()));

    // (F^H F + lambda W^H W) x = F^H D, all images at once
    let t = Instant::now();
    let stencil = Stencil::planes(grid.n);
    let params = solver_params(l);
    // the batch's prior is the uniform quadratic one
    let rule = Rule::new(
        l.cfg.lambda(),
        true,
        data,
        shared.plan.traj(),
        slice.n,
        sigma2,
    )?;
    // GCV's probe: zero on the padding plane, which holds no samples
    let mut probe = Probe::new(grid.len(), data.len() * per);
    let ((mut x, info), lambda) = solve_with(l.cfg.lambda(), rule.as_ref(), ui, |lambda, need| {
        let solved = ui
            .solver(params.iterations, |cb| {
                problem.solve(backend, &stencil, lambda, &params, cb)
            })
            .context(l.cfg.algorithm().describe())?;
        let (misfit, df) = measure(
            backend,
            &mut problem,
            &mut probe,
            &solved.0,
            &stencil,
            lambda,
            &params,
            need,
        )?;
        Ok(Candidate {
            x: solved,
            misfit,
            df,
        })
    })?;
    x.truncate(data.len() * per);
    seconds.push(("cg", t.elapsed().as_secs_f64()));
    Ok(Solved {
        x,
        fhd,
        info,
        lambda_abs: problem.lambda_abs(lambda.lambda),
        lambda,
        seconds,
    })
}

/// A stack's slices solved as one batch; `data` and `raw` are each slice's
/// 2-D data with and without the basis factor ([`Stack::slices`],
/// [`Stack::slices_unweighted`]), `seconds` the stages so far. `slice` is
/// the run's config on the slice's grid, `first` slice 0's inputs.
#[allow(clippy::too_many_arguments)]
pub fn reconstruct_stack<B>(
    backend: &B,
    l: &Loaded,
    slice: &Loaded,
    first: &Inputs,
    stack: &Stack,
    data: &[Vec<Complex<f64>>],
    raw: &[Vec<Complex<f64>>],
    mut seconds: Vec<(&'static str, f64)>,
    ui: &impl Ui,
) -> Result<Outputs>
where
    B: NufftBackend,
    B::Real: Stored,
{
    let shared = plan_and_q(backend, slice, &stack.plane, ui)?;
    let data: Vec<&[Complex<f64>]> = data.iter().map(|d| d.as_slice()).collect();
    let sigma2 = first.sigma2; // the slices' (the split's gain applied)
    let solved = solve(backend, slice, &shared, &data, sigma2, ui)?;
    seconds.extend(shared.seconds.iter().chain(&solved.seconds));

    let t = Instant::now();
    let g = gridder(backend, slice, first)?;
    let mut gridding = Vec::with_capacity(l.grid.len());
    for r in raw {
        gridding.extend(g.image(r, None).context("gridding")?);
    }
    seconds.push(("gridding", t.elapsed().as_secs_f64()));

    Ok(Outputs {
        recon: to_f64(&solved.x),
        gridding,
        fhd: to_f64(&solved.fhd),
        q: None,
        passes: vec![solved.info.iterations],
        info: solved.info,
        q_cache: shared.q_cache.clone(),
        q_file: shared.q_file.clone(),
        lambda_abs: solved.lambda_abs,
        lambda: solved.lambda,
        stencil: Stencil::planes(l.grid.n),
        prior: None,
        seconds,
        device: backend.describe(),
        coil_devices: 1,
        maps: None,
    })
}
