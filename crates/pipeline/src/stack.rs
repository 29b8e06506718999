//! A stack run: a 3-D scan whose trajectory is one 2-D trajectory on every
//! Cartesian k_z partition (stack of stars or of spirals), solved as one
//! 2-D problem per slice after the inverse DFT along k_z
//! ([`recon_encoding::Stack`]). The slices share the trajectory, so the
//! run builds one plan, one Q and one gridding plan, and changes only
//! F^H D (and a reference's slice) from slice to slice. `solver.stack`
//! chooses: `auto` (slices when the trajectory is a stack and there is one
//! coil), `slices` (insist) or `volume` (the 3-D problem).

use crate::config::{Loaded, StackMode};
use crate::run::to_f64;
use crate::{gridder, regulariser, Context, Inputs, Outputs, Result, Ui};
use recon_core::Complex;
use recon_encoding::{plane, NufftBackend, Stack};
use recon_q::Stored;
use std::time::Instant;

/// The stack this run solves slice by slice, if it does.
pub fn choose(l: &Loaded, inputs: &Inputs, ui: &impl Ui) -> Result<Option<Stack>> {
    let mode = l.cfg.solver.stack;
    if mode == StackMode::Volume {
        return Ok(None);
    }
    let stack = Stack::detect(&l.grid, &inputs.traj);
    match (mode, stack, inputs.coils) {
        (StackMode::Slices, None, _) => crate::bail!(
            "solver.stack = \"slices\": the trajectory is not a stack (one 2-D trajectory on every \
             Cartesian k_z partition, k_z = -Nz/2 .. Nz/2 - 1, for matrix {:?})",
            l.grid.n
        ),
        (StackMode::Slices, Some(_), c) if c > 1 => crate::bail!(
            "solver.stack = \"slices\" takes one coil in this version; the data have {c} (use \"volume\")"
        ),
        (StackMode::Auto, Some(s), c) if c > 1 => {
            ui.log(&format!(
                "stack of {} partitions found, solved in 3-D: slices take one coil in this version",
                s.len()
            ));
            Ok(None)
        }
        (_, Some(s), _) => {
            ui.log(&format!(
                "stack of {} partitions of {} samples: solved as {} 2-D slices (solver.stack = \"volume\" for the 3-D problem)",
                s.len(),
                s.plane.len(),
                s.len()
            ));
            Ok(Some(s))
        }
        (_, None, _) => Ok(None),
    }
}

/// Slice `j`'s inputs: its 2-D data, and its plane of the truth and of the
/// reference on the grid.
fn slice_inputs(stack: &Stack, inputs: &Inputs, data: Vec<Complex<f64>>, j: usize) -> Inputs {
    let grid = &stack.grid;
    Inputs {
        traj: stack.plane.clone(),
        data,
        coils: 1,
        true_maps: None,
        whitened: inputs.whitened,
        compressed: inputs.compressed,
        truth: inputs.truth.as_ref().map(|t| plane(grid, t, j).to_vec()),
        anatomy: None,
        anatomy_on_grid: inputs
            .anatomy_on_grid
            .as_ref()
            .map(|a| plane(grid, a, j).to_vec()),
        noise_sigma: inputs.noise_sigma,
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
    ui: &impl Ui,
) -> Result<Outputs>
where
    B: NufftBackend,
    B::Real: Stored,
{
    let t = Instant::now();
    let data = stack
        .slices(&inputs.data)
        .context("splitting the stack into slices")?;
    // The gridding baseline grids each slice as the 3-D baseline would see
    // it: without the voxel basis's factor, which it does not model.
    let raw = stack
        .slices_unweighted(&inputs.data)
        .context("splitting the stack into slices")?;
    let split = t.elapsed().as_secs_f64();
    let mut ls = l.clone();
    ls.grid = stack.slice;
    let nz = stack.len();
    let per = stack.slice.len();
    let mut recon = vec![Complex::default(); l.grid.len()];
    let mut gridding = vec![Complex::default(); l.grid.len()];
    let mut fhd = vec![Complex::default(); l.grid.len()];
    let mut data = data.into_iter();

    // Slice 0 builds the plan, Q and the problem; the others swap F^H D.
    let first = slice_inputs(stack, inputs, data.next().expect("a slice"), 0);
    let mut built = crate::build(backend, &ls, &first, ui)?;
    let grid0 = gridder(backend, &ls, &first)?;
    let mut seconds = built.seconds.clone();
    seconds.push(("stack", split));
    let (mut cg, mut grid_s) = (0.0, 0.0);
    let mut info: Option<recon_cg::Info> = None;
    let (mut stencil, mut prior) = (None, None);
    for (j, raw) in raw.iter().enumerate() {
        if j > 0 {
            // The next slice: its F^H D, and its prior (its plane of a reference).
            let next = slice_inputs(stack, inputs, data.next().expect("a slice"), j);
            let mut f = vec![Complex::default(); per];
            built
                .plan
                .adjoint(&mut f, &next.data, &mut |_, _| {})
                .context("computing F^H D")?;
            built.problem.set_rhs(backend, &f)?;
            built.fhd = f;
            built.prior = regulariser(&ls, &next)?;
        }
        ui.log(&format!("slice {} of {nz}", j + 1));
        let t = Instant::now();
        let solved = built.solve(backend, l.cfg.algorithm().describe(), ui)?;
        cg += t.elapsed().as_secs_f64();
        let t = Instant::now();
        let g = grid0.image(raw, None).context("gridding")?;
        grid_s += t.elapsed().as_secs_f64();
        let at = j * per..(j + 1) * per;
        recon[at.clone()].copy_from_slice(&to_f64(&solved.x));
        gridding[at.clone()].copy_from_slice(&g);
        fhd[at].copy_from_slice(&to_f64(&built.fhd));
        // The worst slice's convergence stands for the run.
        if info
            .as_ref()
            .is_none_or(|i| solved.info.relative_residual > i.relative_residual)
        {
            info = Some(solved.info);
        }
        stencil.get_or_insert(solved.stencil);
        prior = prior.or(solved.prior);
    }
    seconds.push(("cg", cg));
    seconds.push(("gridding", grid_s));
    if l.cfg.output.q {
        ui.log("output.q: the slices' Q is 2-D; not written for a stack run");
    }
    Ok(Outputs {
        recon,
        gridding,
        fhd,
        q: None,
        info: info.expect("a slice"),
        q_cache: built.q_cache,
        q_file: built.q_file,
        lambda_abs: built.lambda_abs,
        stencil: stencil.expect("a slice"),
        prior,
        seconds,
        device: backend.describe(),
        coil_devices: 1,
        maps: None,
    })
}
