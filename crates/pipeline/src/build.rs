//! The builder: a validated config and its inputs turned into the run's
//! problem once, every stage timed. The run ([`crate::reconstruct`]), the
//! validation's sweeps and the benchmarks all build through here, so a
//! benchmark times exactly what a run does.

use crate::config::{Lambda, Loaded};
use crate::lambda::{gcv::Probe, measure, solve_with, Candidate, Rule, Used};
use crate::{plan, regulariser, stage_problem, stage_q, Inputs, Regulariser, Solved};
use crate::{Context, Result, Ui};
use recon_cg::{Params, Problem};
use recon_core::Complex;
use recon_encoding::{NufftBackend, Plan};
use recon_q::{CacheStatus, Stored};
use std::path::PathBuf;
use std::time::Instant;

/// A run's problem: the encoding plan, Q, the data term with F^H D on the
/// device, and the config's prior, built once and solved any number of
/// times.
pub struct Built<'b, B: NufftBackend> {
    pub plan: Plan<'b, B>,
    /// Q on the `2N` grid, as the cache stores it.
    pub q: Vec<Complex<B::Real>>,
    pub q_cache: CacheStatus,
    pub q_file: Option<PathBuf>,
    /// FFT(Q) and F^H D on the device (SENSE's sum over the coils with
    /// their maps, for several coils); [`Built::fhd`] brings F^H D to the
    /// host.
    pub problem: Problem<'b, B>,
    /// For several coils, the gridding plan the maps were estimated on
    /// (the baseline grids each coil by it) ...
    pub gridder: Option<recon_gridding::Gridding<'b, B>>,
    /// ... and the coil maps SENSE used, one per coil (for the outputs).
    pub maps: Option<Vec<Vec<Complex<f64>>>>,
    /// The config's prior.
    pub prior: Regulariser,
    /// The config's lambda: a value, `"auto"` or `"gcv"` ...
    pub setting: Lambda,
    /// ... and for the last two, how it is chosen for the image's data.
    pub rule: Option<Rule>,
    /// The lambda (relative) the last solve used and why, and what it
    /// multiplies the prior by; `None` before the first solve.
    pub lambda: Option<(Used, f64)>,
    /// The config's solver settings.
    pub params: Params,
    /// Seconds per stage: "plan", "q", "maps" (several coils), "fft_q",
    /// "maps_upload" (several coils), "fhd", "prior".
    pub seconds: Vec<(&'static str, f64)>,
}

/// What a caller may set beyond the config (the benchmarks do).
#[derive(Debug, Clone, Copy, Default)]
pub struct BuildParams {
    /// The devices that share SENSE's coils; `None`: every device of the
    /// backend where the grid is large enough to gain
    /// ([`recon_encoding::SHARE_FROM_VOXELS`]), else one.
    pub coil_devices: Option<usize>,
}

/// Builds the run's problem on `backend` from the config `l` and its inputs.
pub fn build<'b, B>(
    backend: &'b B,
    l: &Loaded,
    inputs: &Inputs,
    ui: &impl Ui,
) -> Result<Built<'b, B>>
where
    B: NufftBackend,
    B::Real: Stored,
{
    build_with(backend, l, inputs, &BuildParams::default(), ui)
}

/// [`build`], with `params`.
pub fn build_with<'b, B>(
    backend: &'b B,
    l: &Loaded,
    inputs: &Inputs,
    params: &BuildParams,
    ui: &impl Ui,
) -> Result<Built<'b, B>>
where
    B: NufftBackend,
    B::Real: Stored,
{
    let PlanQ {
        plan,
        q,
        q_cache,
        q_file,
        mut seconds,
    } = plan_and_q(backend, l, &inputs.traj, ui)?;

    // F^H D and FFT(Q) on the device (and the maps, for several coils).
    let (problem, gridder, maps) = stage_problem(
        backend,
        &plan,
        l,
        inputs,
        &q,
        params.coil_devices,
        None,
        ui,
        &mut seconds,
    )?;

    let t = Instant::now();
    let setting = l.cfg.lambda();
    let rule = rule(l, inputs)?;
    let prior = regulariser(l, inputs)?;
    if let Regulariser::Anatomical(p) = &prior {
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
    seconds.push(("prior", t.elapsed().as_secs_f64()));
    Ok(Built {
        plan,
        q,
        q_cache,
        q_file,
        problem,
        gridder,
        maps,
        prior,
        setting,
        rule,
        lambda: None,
        params: solver_params(l),
        seconds,
    })
}

/// A trajectory's encoding plan and Q (through the cache), each timed
/// ("plan", "q"): what every problem of that trajectory shares.
pub struct PlanQ<'b, B: NufftBackend> {
    pub plan: Plan<'b, B>,
    pub q: Vec<Complex<B::Real>>,
    pub q_cache: CacheStatus,
    pub q_file: Option<PathBuf>,
    pub seconds: Vec<(&'static str, f64)>,
}

/// The plan and Q of `traj` on `l`'s grid.
pub fn plan_and_q<'b, B>(
    backend: &'b B,
    l: &Loaded,
    traj: &[[f64; 3]],
    ui: &impl Ui,
) -> Result<PlanQ<'b, B>>
where
    B: NufftBackend,
    B::Real: Stored,
{
    let t = Instant::now();
    let plan = plan(backend, l, traj)?;
    let mut seconds = vec![("plan", t.elapsed().as_secs_f64())];
    let t = Instant::now();
    let (q, q_cache, q_file) = stage_q(&plan, l, ui)?;
    seconds.push(("q", t.elapsed().as_secs_f64()));
    Ok(PlanQ {
        plan,
        q,
        q_cache,
        q_file,
        seconds,
    })
}

/// The config's solver settings: iterations and tolerance.
pub fn solver_params(l: &Loaded) -> Params {
    Params {
        iterations: l.cfg.iterations(),
        tolerance: l.cfg.solver.tolerance,
    }
}

/// The rule of lambda "auto" or "gcv" for `inputs`' data (each coil's
/// samples, their noise variance where known).
fn rule(l: &Loaded, inputs: &Inputs) -> Result<Option<Rule>> {
    let m = inputs.traj.len();
    let rows: Vec<&[Complex<f64>]> = inputs.data.chunks_exact(m.max(1)).collect();
    let quadratic = !l.cfg.prior.kind.sparse();
    Rule::new(
        l.cfg.lambda(),
        quadratic,
        &rows,
        &inputs.traj,
        l.grid.n,
        inputs.sigma2,
    )
}

/// What lambda (relative) multiplies the prior by: the data term's
/// diagonal peak for the quadratic prior, `max |F^H D|` for the sparse ones.
fn lambda_abs<B: NufftBackend>(
    backend: &B,
    problem: &Problem<'_, B>,
    prior: &Regulariser,
    lambda: f64,
) -> Result<f64> {
    Ok(match prior {
        Regulariser::Sparse { .. } => problem.sparse_lambda_abs(backend, lambda)?,
        _ => problem.lambda_abs(lambda),
    })
}

impl<'b, B: NufftBackend> Built<'b, B> {
    /// F^H D (SENSE's sum over the coils) on the host, for the outputs:
    /// brought back from the device the first time it is asked for.
    pub fn fhd(&self, backend: &B) -> Result<&[Complex<B::Real>]> {
        Ok(self.problem.rhs_host(backend)?)
    }

    /// Another image on the same problem: its right-hand side `fhd` (F^H D,
    /// or SENSE's sum over the coils with the built maps) and its prior
    /// (its own reference), the data term, Q and the maps kept.
    pub fn set_image(
        &mut self,
        backend: &B,
        l: &Loaded,
        inputs: &Inputs,
        fhd: Vec<Complex<B::Real>>,
    ) -> Result<()> {
        self.problem.set_rhs(backend, fhd)?;
        self.rule = rule(l, inputs)?;
        self.prior = regulariser(l, inputs)?;
        Ok(())
    }

    /// Another image of the same trajectory seen by other coil
    /// sensitivities (another slice of a stack): its maps, data term and
    /// right-hand side made anew on the built plan and Q (and the gridding
    /// plan the maps are estimated on), and its prior. Returns the stages'
    /// seconds ("maps", "fft_q", "maps_upload", "fhd").
    pub fn set_coil_image(
        &mut self,
        backend: &'b B,
        l: &Loaded,
        inputs: &Inputs,
        ui: &impl Ui,
    ) -> Result<Vec<(&'static str, f64)>> {
        let mut seconds = Vec::new();
        let (problem, gridder, maps) = stage_problem(
            backend,
            &self.plan,
            l,
            inputs,
            &self.q,
            None,
            self.gridder.take(),
            ui,
            &mut seconds,
        )?;
        (self.problem, self.gridder, self.maps) = (problem, gridder, maps);
        self.rule = rule(l, inputs)?;
        self.prior = regulariser(l, inputs)?;
        Ok(seconds)
    }

    /// Solves with the config's prior, lambda and solver settings, with
    /// progress through `ui`; `what` says which algorithm, for errors. With
    /// lambda "auto" or "gcv", solves for each candidate of its rule's
    /// search ([`crate::lambda`]) and keeps the chosen one's image, and the
    /// lambda and why in [`Built::lambda`].
    pub fn solve(&mut self, backend: &B, what: &str, ui: &impl Ui) -> Result<Solved<B::Real>> {
        let (prior, params) = (&self.prior, self.params);
        let problem = &mut self.problem;
        let n = problem.grid().len();
        let mut probe = Probe::new(n, n);
        let (solved, used) = solve_with(self.setting, self.rule.as_ref(), ui, |lambda, need| {
            let solved = ui
                .solver(params.iterations * prior.passes(), |cb| {
                    crate::solve(backend, problem, prior, lambda, &params, cb, &|m| ui.log(m))
                })
                .context(what.to_string())?;
            // W as the candidate's last pass used it
            let (misfit, df) = measure(
                backend,
                problem,
                &mut probe,
                &solved.x,
                &solved.stencil,
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
        let abs = lambda_abs(backend, &self.problem, &self.prior, used.lambda)?;
        self.lambda = Some((used, abs));
        Ok(solved)
    }
}
