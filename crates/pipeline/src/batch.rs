//! A stack's slices solved together: one CG on the whole `[Nx, Ny, Nz]`
//! volume whose data term is every slice's 2-D F^H F side by side. The
//! slices share one trajectory, so their Toeplitz products share one Q;
//! stacked along z with Q on the plane of displacement 0
//! ([`recon_encoding::Stack::batched_q`]), they are one 3-D Toeplitz
//! product that no plane crosses, which a GPU runs as one call instead of
//! one per slice. W is plain first differences within each plane
//! ([`recon_core::Stencil::planes`]), so the batch poses each slice's
//! equations exactly; CG then shares its step sizes over the slices (one
//! Krylov space for all), which is where its iterates differ from a
//! slice-by-slice solve's. It takes the uniform quadratic prior and one
//! coil; other runs go slice by slice.

use crate::config::{Loaded, PriorKind, RegulariserKind};
use crate::run::to_f64;
use crate::{gridder, Context, Inputs, Outputs, Result, Ui};
use recon_cg::{Params, Problem};
use recon_core::{Complex, Stencil};
use recon_encoding::{NufftBackend, Stack};
use recon_q::Stored;
use std::time::Instant;

/// Whether the run's slices can be solved as one batch: one coil and the
/// uniform quadratic prior (CG).
pub fn fits(l: &Loaded, coils: usize) -> bool {
    coils == 1
        && l.cfg.prior.kind == PriorKind::Quadratic
        && l.cfg.regulariser.kind == RegulariserKind::Uniform
}

/// Solves the stack's slices as one batch; `data` and `raw` are each
/// slice's 2-D data with and without the basis factor ([`Stack::slices`],
/// [`Stack::slices_unweighted`]), `seconds` the stages so far. `slice` is
/// the run's config on the slice's grid, `first` slice 0's inputs.
#[allow(clippy::too_many_arguments)]
pub fn reconstruct<B>(
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
    let t = Instant::now();
    let plan = crate::plan(backend, slice, &stack.plane)?;
    seconds.push(("plan", t.elapsed().as_secs_f64()));

    let t = Instant::now();
    let (q, q_cache, q_file) = crate::stage_q(&plan, slice, ui)?;
    seconds.push(("q", t.elapsed().as_secs_f64()));

    // F^H D of each slice, stacked along z.
    let t = Instant::now();
    let per = stack.slice.len();
    let mut fhd = vec![Complex::default(); l.grid.len()];
    ui.stage("F^H D", |p| {
        for (j, (f, d)) in fhd.chunks_exact_mut(per).zip(data).enumerate() {
            plan.adjoint(f, d, &mut |_, _| {})?;
            p(j as u64 + 1, data.len() as u64);
        }
        Ok::<_, recon_core::Error>(())
    })
    .context("computing F^H D")?;
    seconds.push(("fhd", t.elapsed().as_secs_f64()));

    let t = Instant::now();
    let q3 = stack.batched_q(&q).context("stacking the slices' Q")?;
    let mut problem = Problem::new(backend, &l.grid, &q3, &fhd)?;
    drop(q3);
    backend.synchronize()?;
    seconds.push(("fft_q", t.elapsed().as_secs_f64()));

    // (F^H F + lambda W^H W) rho = F^H D, all slices at once
    let t = Instant::now();
    let stencil = Stencil::planes(l.grid.n);
    let (lambda, params) = (
        l.cfg.lambda(),
        Params {
            iterations: l.cfg.iterations(),
            tolerance: l.cfg.solver.tolerance,
        },
    );
    let (x, info) = ui
        .solver(params.iterations, |cb| {
            problem.solve(backend, &stencil, lambda, &params, cb)
        })
        .context(l.cfg.algorithm().describe())?;
    seconds.push(("cg", t.elapsed().as_secs_f64()));

    let t = Instant::now();
    let g = gridder(backend, slice, first)?;
    let mut gridding = Vec::with_capacity(l.grid.len());
    for r in raw {
        gridding.extend(g.image(r, None).context("gridding")?);
    }
    seconds.push(("gridding", t.elapsed().as_secs_f64()));

    Ok(Outputs {
        recon: to_f64(&x),
        gridding,
        fhd: to_f64(&fhd),
        q: None,
        info,
        q_cache,
        q_file,
        lambda_abs: problem.lambda_abs(lambda),
        stencil,
        prior: None,
        seconds,
        device: backend.describe(),
        coil_devices: 1,
        maps: None,
    })
}
