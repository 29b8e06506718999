//! A stack run: a 3-D scan whose trajectory is one 2-D trajectory on every
//! Cartesian k_z partition (stack of stars or of spirals), solved as one
//! 2-D problem per slice after the inverse DFT along k_z
//! ([`recon_encoding::Stack`]). The slices share the trajectory, so the
//! run builds one plan, one Q and one gridding plan, and changes only
//! F^H D (and a reference's slice) from slice to slice, or solves the
//! slices together as one batch ([`crate::batch`]). With several coils
//! each slice sees its own sensitivities: its maps, SENSE's data term and
//! F^H D are made anew on the shared plan and Q
//! ([`crate::Built::set_coil_image`]). `solver.stack` chooses: `auto`
//! (the batch where it takes the run, else slices, when the trajectory is
//! a stack), `slices` or `batch` (insist) or `volume` (the 3-D problem).

use crate::coils::gridding_rss;
use crate::config::{Loaded, StackMode};
use crate::run::to_f64;
use crate::{gridder, Context, Inputs, Outputs, Result, Ui};
use recon_core::Complex;
use recon_encoding::{plane, NufftBackend, Stack};
use recon_q::Stored;
use std::time::Instant;

/// The stack this run solves slice by slice, if it does, and whether as
/// one batch.
pub fn choose(l: &Loaded, inputs: &Inputs, ui: &impl Ui) -> Result<Option<(Stack, bool)>> {
    let mode = l.cfg.solver.stack;
    if mode == StackMode::Volume {
        return Ok(None);
    }
    let stack = Stack::detect(&l.grid, &inputs.traj);
    let Some(s) = stack else {
        // A 2-D grid's images are slices already (crate::series batches them).
        if mode == StackMode::Auto || l.grid.is_2d() {
            return Ok(None);
        }
        crate::bail!(
            "solver.stack = \"{}\": the trajectory is not a stack (one 2-D trajectory on every \
             Cartesian k_z partition, k_z = -Nz/2 .. Nz/2 - 1, for matrix {:?})",
            mode.name(),
            l.grid.n
        )
    };
    let batch = crate::batch::wanted(l, inputs)?;
    ui.log(&format!(
        "stack of {} partitions of {} samples: solved as {} 2-D slices{} (solver.stack = \"volume\" for the 3-D problem)",
        s.len(),
        s.plane.len(),
        s.len(),
        if batch { ", together as one batch" } else { ", one after the other" }
    ));
    Ok(Some((s, batch)))
}

/// Each slice's `[C, M_plane]` data from the stack's `[C, M]` data, split
/// coil by coil (`basis`: with the voxel basis's factor, as
/// [`Stack::slices`], else as [`Stack::slices_unweighted`]).
fn split(
    stack: &Stack,
    data: &[Complex<f64>],
    coils: usize,
    basis: bool,
) -> Result<Vec<Vec<Complex<f64>>>> {
    let mut slices: Vec<Vec<Complex<f64>>> = Vec::new();
    for coil in data.chunks_exact(data.len() / coils.max(1)) {
        let split = if basis {
            stack.slices(coil)
        } else {
            stack.slices_unweighted(coil)
        }
        .context("splitting the stack into slices")?;
        if slices.is_empty() {
            slices = split; // the first coil's, kept as they are
            continue;
        }
        for (out, s) in slices.iter_mut().zip(split) {
            out.extend(s);
        }
    }
    Ok(slices)
}

/// Slice `j`'s inputs: its 2-D data (`[C, M_plane]`), and its plane of the
/// truth, of the true maps and of the reference on the grid.
fn slice_inputs(stack: &Stack, inputs: &Inputs, data: Vec<Complex<f64>>, j: usize) -> Inputs {
    let grid = &stack.grid;
    Inputs {
        traj: stack.plane.clone(),
        data,
        coils: inputs.coils,
        true_maps: inputs
            .true_maps
            .as_ref()
            .map(|maps| maps.iter().map(|m| plane(grid, m, j).to_vec()).collect()),
        whitened: inputs.whitened,
        compressed: inputs.compressed,
        truth: inputs.truth.as_ref().map(|t| plane(grid, t, j).to_vec()),
        anatomy: None,
        anatomy_on_grid: inputs
            .anatomy_on_grid
            .as_ref()
            .map(|a| plane(grid, a, j).to_vec()),
        noise_sigma: inputs.noise_sigma,
        // the split's weights scale the noise (Stack::noise_gain)
        sigma2: inputs.sigma2.map(|s| s * stack.noise_gain()),
        data_scale: inputs.data_scale,
    }
}

/// The whole reconstruction of a stack, slice by slice, on `backend`; the
/// outputs as for the 3-D problem (volumes on the 3-D grid).
pub fn reconstruct<B>(
    backend: &B,
    l: &Loaded,
    inputs: &Inputs,
    stack: &Stack,
    batch: bool,
    ui: &impl Ui,
) -> Result<Outputs>
where
    B: NufftBackend,
    B::Real: Stored,
{
    let t = Instant::now();
    let coils = inputs.coils;
    let data = split(stack, &inputs.data, coils, true)?;
    // The gridding baseline grids each slice as the 3-D baseline would see
    // it: without the voxel basis's factor, which it does not model.
    let raw = split(stack, &inputs.data, coils, false)?;
    let split = t.elapsed().as_secs_f64();
    let mut ls = l.clone();
    ls.grid = stack.slice;
    if batch {
        let first = slice_inputs(stack, inputs, Vec::new(), 0);
        let seconds = vec![("stack", split)];
        return crate::batch::reconstruct_stack(
            backend, l, &ls, &first, stack, &data, &raw, seconds, ui,
        );
    }
    let nz = stack.len();
    let per = stack.slice.len();
    let mut recon = vec![Complex::default(); l.grid.len()];
    let mut gridding = vec![Complex::default(); l.grid.len()];
    let mut fhd = vec![Complex::default(); l.grid.len()];
    let mut maps = (coils > 1).then(|| vec![vec![Complex::default(); l.grid.len()]; coils]);
    let mut data = data.into_iter();

    // Slice 0 builds the plan, Q and the problem; the others swap F^H D.
    let first = slice_inputs(stack, inputs, data.next().expect("a slice"), 0);
    let mut built = crate::build(backend, &ls, &first, ui)?;
    // One coil: a gridding plan of the slices' trajectory for the baseline
    // (several coils: the one the maps are estimated on).
    let grid0 = match coils {
        1 => Some(gridder(backend, &ls, &first)?),
        _ => None,
    };
    let mut seconds = built.seconds.clone();
    seconds.push(("stack", split));
    let (mut cg, mut grid_s) = (0.0, 0.0);
    let mut info: Option<recon_cg::Info> = None;
    let mut passes = Vec::new();
    let (mut stencil, mut prior) = (None, None);
    for (j, raw) in raw.into_iter().enumerate() {
        if j > 0 && coils > 1 {
            // The next slice: its maps, data term and F^H D, and its prior.
            let next = slice_inputs(stack, inputs, data.next().expect("a slice"), j);
            for (name, s) in built.set_coil_image(backend, &ls, &next, ui)? {
                add(&mut seconds, name, s);
            }
        } else if j > 0 {
            // The next slice: its F^H D, and its prior (its plane of a reference).
            let next = slice_inputs(stack, inputs, data.next().expect("a slice"), j);
            let mut f = vec![Complex::default(); per];
            built
                .plan
                .adjoint(&mut f, &next.data, &mut |_, _| {})
                .context("computing F^H D")?;
            // its F^H D, its prior and lambda's rule for its data
            built.set_image(backend, &ls, &next, f)?;
        }
        ui.log(&format!("slice {} of {nz}", j + 1));
        let t = Instant::now();
        let solved = built.solve(backend, l.cfg.algorithm().describe(), ui)?;
        cg += t.elapsed().as_secs_f64();
        let t = Instant::now();
        let g = match (&grid0, &built.gridder) {
            (Some(g), _) => g.image(&raw, None).context("gridding")?,
            (None, Some(g)) => gridding_rss(g, &slice_inputs(stack, inputs, raw, j))?,
            (None, None) => unreachable!("several coils build their gridding plan"),
        };
        grid_s += t.elapsed().as_secs_f64();
        let at = j * per..(j + 1) * per;
        recon[at.clone()].copy_from_slice(&to_f64(&solved.x));
        gridding[at.clone()].copy_from_slice(&g);
        fhd[at.clone()].copy_from_slice(&to_f64(built.fhd(backend)?));
        if let (Some(all), Some(used)) = (maps.as_mut(), &built.maps) {
            for (m, u) in all.iter_mut().zip(used) {
                m[at.clone()].copy_from_slice(u);
            }
        }
        // The worst slice's convergence stands for the run.
        if info
            .as_ref()
            .is_none_or(|i| solved.info.relative_residual > i.relative_residual)
        {
            info = Some(solved.info);
            passes = solved.passes;
        }
        stencil.get_or_insert(solved.stencil);
        prior = prior.or(solved.prior);
    }
    seconds.push(("cg", cg));
    seconds.push(("gridding", grid_s));
    if l.cfg.output.q {
        ui.log("output.q: the slices' Q is 2-D; not written for a stack run");
    }
    // the last slice's lambda (each slice chooses its own under "auto")
    let (lambda, lambda_abs) = built.lambda.clone().expect("set by the solves");
    Ok(Outputs {
        recon,
        gridding,
        fhd,
        q: None,
        info: info.expect("a slice"),
        q_cache: built.q_cache,
        q_file: built.q_file,
        lambda_abs,
        lambda,
        passes,
        stencil: stencil.expect("a slice"),
        prior,
        seconds,
        device: backend.describe(),
        coil_devices: built.problem.devices(),
        maps,
    })
}

/// Adds `s` seconds to the stage `name` (appended if new).
fn add(seconds: &mut Vec<(&'static str, f64)>, name: &'static str, s: f64) {
    match seconds.iter_mut().find(|(n, _)| *n == name) {
        Some((_, t)) => *t += s,
        None => seconds.push((name, s)),
    }
}
