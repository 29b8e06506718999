//! The pipeline's stages timed for one engine. Per trajectory: the plan,
//! Q (to the host, as the cache stores it) and the Toeplitz set-up (FFT of
//! Q on the device). Per scan: F^H D from the host's data to the device,
//! the CG iterations, and both together with the image brought back.

use super::{max_rel_error, BenchArgs, Problem};
use anyhow::Result;
use recon_cg::{Params, Regularised, Toeplitz};
use recon_core::{Complex, Real, Stencil};
use recon_encoding::{Engine, NufftBackend, Plan};
use serde::Serialize;
use std::time::Instant;

#[derive(Debug, Serialize)]
pub(super) struct Stages {
    pub engine: String,
    /// Making the plan (for the NUFFT: kernel, FFT plans, sorted points).
    pub plan_seconds: f64,
    /// Q's own plan (the NUFFT's on the doubled grid), once per trajectory.
    pub q_plan_seconds: f64,
    /// Q from its plan, brought to the host.
    pub q_seconds: f64,
    pub q_max_rel_error: f64,
    /// FFT of Q on the device, once per trajectory.
    pub toeplitz_seconds: f64,
    pub fhd_seconds: f64,
    pub fhd_max_rel_error: f64,
    pub cg_ms_per_iteration: f64,
    pub fhd_plus_cg_seconds: f64,
    pub iterations: usize,
}

/// The time of `f` in seconds and its result: of one run if `once`, else
/// the best of two (the first run of a stage may load libraries or make
/// FFT plans once per process).
fn timed<T>(once: bool, mut f: impl FnMut() -> Result<T>) -> Result<(f64, T)> {
    let t = Instant::now();
    let out = f()?;
    let first = t.elapsed().as_secs_f64();
    if once {
        return Ok((first, out));
    }
    let t = Instant::now();
    let out = f()?;
    Ok((first.min(t.elapsed().as_secs_f64()), out))
}

/// A host buffer of `len` values, filled so that its pages are mapped
/// before a clock starts (a fresh vector's first writes cost as much as
/// the copy that fills it).
fn mapped<T: Real>(len: usize) -> Vec<Complex<T>> {
    vec![Complex::new(T::of(1.0), T::of(0.0)); len]
}

pub(super) fn stages<B: NufftBackend>(
    b: &B,
    engine: Engine,
    args: &BenchArgs,
    p: &Problem,
    ui: &crate::Bars,
) -> Result<Stages> {
    use crate::pipeline::Ui;
    ui.log(&format!(
        "bench: {} on {}: Q on {:?}, F^H D, {} CG iterations",
        engine.describe(),
        b.describe(),
        p.grid.doubled(),
        args.iterations
    ));
    let t = Instant::now();
    let plan = Plan::new(b, engine, &p.grid, &p.traj)?;
    let plan_seconds = t.elapsed().as_secs_f64();
    // The exact engine's sums are long and steady: timed once.
    let exact = engine == Engine::Exact;
    // Q's plan (the NUFFT's on the doubled grid): for the NUFFT the better
    // of two (the first may initialise cuFFT), made one at a time, since
    // each holds a fine grid eight times Q.
    let make_q_plan = || -> Result<(f64, _)> {
        let t = Instant::now();
        let qp = plan.q_plan()?;
        b.synchronize()?;
        Ok((t.elapsed().as_secs_f64(), qp))
    };
    let (mut q_plan_seconds, mut qp) = make_q_plan()?;
    if !exact {
        drop(qp);
        let (s, again) = make_q_plan()?;
        (q_plan_seconds, qp) = (q_plan_seconds.min(s), again);
    }
    // Then Q itself, into a host buffer made beforehand.
    let mut q = mapped(p.grid.doubled().iter().product());
    let (q_seconds, ()) = ui.stage("Q", |pr| {
        timed(exact, || Ok(plan.q_execute(&qp, &mut q, &mut *pr)?))
    })?;
    drop(qp);

    // Per trajectory, once Q is known: the Toeplitz set-up.
    let t = Instant::now();
    let mut toeplitz = Toeplitz::new(b, &p.grid, &q)?;
    b.synchronize()?;
    let toeplitz_seconds = t.elapsed().as_secs_f64();

    // Per scan: F^H D, left on the device, then CG from it.
    let (fhd_seconds, rhs) = ui.stage("F^H D", |pr| {
        timed(exact, || {
            let mut fhd = b.zeros(p.grid.len())?;
            plan.adjoint_on_device(&mut fhd, &p.data, &mut *pr)?;
            b.synchronize()?;
            Ok(fhd)
        })
    })?;
    let mut fhd = vec![Complex::default(); p.grid.len()];
    b.download(&mut fhd, &rhs)?;
    let lambda = recon_cg::lambda_abs(0.01, &p.grid, &q)?;
    let mut a = Regularised::new(b, &mut toeplitz, &Stencil::uniform(p.grid.n), lambda)?;
    let mut x = b.zeros(p.grid.len())?;
    let params = Params {
        iterations: args.iterations,
        tolerance: 0.0,
    };
    // The host's image buffer, made once per run like the plan.
    let mut xh = mapped(p.grid.len());
    let t_cg = Instant::now();
    let info = ui.solver(params.iterations, |cb| {
        recon_cg::solve(b, &mut a, &mut x, &rhs, &params, cb)
    })?;
    let iters = t_cg.elapsed().as_secs_f64();
    b.download(&mut xh, &x)?;
    let cg_total = t_cg.elapsed().as_secs_f64();
    Ok(Stages {
        engine: engine.describe(),
        plan_seconds,
        q_plan_seconds,
        q_seconds,
        q_max_rel_error: max_rel_error(&q, &p.q_check, &p.q_ref),
        toeplitz_seconds,
        fhd_seconds,
        fhd_max_rel_error: max_rel_error(&fhd, &p.check, &p.fhd_ref),
        cg_ms_per_iteration: 1e3 * iters / info.iterations.max(1) as f64,
        fhd_plus_cg_seconds: fhd_seconds + cg_total,
        iterations: info.iterations,
    })
}

pub(super) fn print(stages: &[Stages], q_grid: &str) {
    println!(
        "{:<64} {:>9} {:>10} {:>9} {:>9} {:>9} {:>9} {:>9} {:>10} {:>10}",
        "engine",
        "plan (s)",
        "Q plan (s)",
        "Q (s)",
        "Q err",
        "FFT Q (s)",
        "F^H D (s)",
        "FHD err",
        "CG (ms/it)",
        "F^H D + CG"
    );
    for s in stages {
        println!(
            "{:<64} {:>9.4} {:>10.4} {:>9.4} {:>9.2e} {:>9.4} {:>9.4} {:>9.2e} {:>10.3} {:>10.4}",
            s.engine,
            s.plan_seconds,
            s.q_plan_seconds,
            s.q_seconds,
            s.q_max_rel_error,
            s.toeplitz_seconds,
            s.fhd_seconds,
            s.fhd_max_rel_error,
            s.cg_ms_per_iteration,
            s.fhd_plus_cg_seconds
        );
    }
    if let Some(s) = stages.first() {
        println!(
            "(Q's plan, Q on {q_grid} and its FFT: per trajectory; F^H D + CG: per scan, {} iterations, the image brought back)",
            s.iterations
        );
    }
}
