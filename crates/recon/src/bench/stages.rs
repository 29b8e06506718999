//! The pipeline's stages timed for one engine, as a run builds them
//! ([`recon_pipeline::build`]): the benchmark's problem becomes a config
//! with its scan in memory, and the builder times its stages. Per
//! trajectory: the plan, Q (with its own plan, to the host, as the cache
//! stores it) and the Toeplitz set-up (FFT of Q on the device, and F^H D
//! uploaded). Per scan: F^H D from the host's data, the solve's time per
//! iteration, and F^H D + the solve with the image brought back.

use super::built::{fastest_build, in_memory, seconds};
use super::{max_rel_error, BenchArgs, Problem};
use crate::pipeline::{self, Ui};
use anyhow::{Context, Result};
use recon_cg::Params;
use recon_core::{Complex, Real};
use recon_encoding::{Engine, NufftBackend};
use recon_q::Stored;
use serde::Serialize;
use std::time::Instant;

#[derive(Debug, Serialize)]
pub(super) struct Stages {
    pub engine: String,
    /// Making the plan (for the NUFFT: kernel, FFT plans, sorted points).
    pub plan_seconds: f64,
    /// Q with its own plan (the NUFFT's on the doubled grid), brought to
    /// the host: once per trajectory.
    pub q_seconds: f64,
    pub q_max_rel_error: f64,
    /// FFT of Q on the device and the problem's vectors, once per trajectory.
    pub toeplitz_seconds: f64,
    pub fhd_seconds: f64,
    pub fhd_max_rel_error: f64,
    pub cg_ms_per_iteration: f64,
    pub fhd_plus_cg_seconds: f64,
    pub iterations: usize,
}

/// The benchmark's problem as a run's config: `engine`, CG with the
/// uniform quadratic prior at lambda 0.01, no Q cache.
fn config(engine: Engine, p: &Problem) -> Result<crate::config::Loaded> {
    let engine = match engine {
        Engine::Exact => "kind = \"exact\"".to_string(),
        Engine::Nufft { tolerance } => format!("kind = \"nufft\"\ntolerance = {tolerance:e}"),
    };
    let scan = recon_io::scan::Scan {
        grid: p.grid,
        traj: p.traj.clone(),
        coils: 1,
        data: p.data.clone(),
        noise: None,
        maps: None,
        truth: None,
        anatomy: None,
        geometry: None,
        parts: Vec::new(),
    };
    let keys = format!("[engine]\n{engine}\n\n[solver]\nlambda = 0.01\ntolerance = 0.0");
    in_memory("the benchmark's problem", &keys, scan)
}

pub(super) fn stages<B>(
    b: &B,
    engine: Engine,
    args: &BenchArgs,
    p: &Problem,
    ui: &crate::Bars,
) -> Result<Stages>
where
    B: NufftBackend,
    B::Real: Stored,
{
    ui.log(&format!(
        "bench: {} on {}: Q on {:?}, F^H D, {} CG iterations",
        engine.describe(),
        b.describe(),
        p.grid.doubled(),
        args.iterations
    ));
    let l = config(engine, p).context("the benchmark's problem as a config")?;
    let inputs = pipeline::inputs(&l, p.traj.clone(), ui)?;
    // The kernels compiled (or read) before the first build, as a run does.
    b.prepare(&pipeline::workload(&l))?;
    // Built as a run builds it: once for the exact engine (its sums are
    // long and steady), else the better of two for each stage (the first
    // may initialise cuFFT), the first dropped before the second is built.
    let builds = if engine == Engine::Exact { 1 } else { 2 };
    let (mut built, times) = fastest_build(b, &l, &inputs, &Default::default(), builds, ui)?;

    // The solve as a run solves (the image brought back): k and 2k
    // iterations, so that the time per iteration leaves out the solve's
    // set-up and the download; each the better of two, so that neither
    // pays for first touches of memory (a GPU's pool grows in the first).
    let k = args.iterations.max(1);
    let mut solve = |iterations: usize| -> Result<(f64, usize)> {
        built.params = Params {
            iterations,
            tolerance: 0.0,
        };
        let mut best = (f64::INFINITY, 0);
        for _ in 0..2 {
            let t = Instant::now();
            let solved = built.solve(b, "the benchmark's CG", ui)?;
            best = (
                best.0.min(t.elapsed().as_secs_f64()),
                solved.info.iterations,
            );
        }
        Ok(best)
    };
    let (once, iterations) = solve(k)?;
    let (twice, iterations2) = solve(2 * k)?;
    let per_iteration = (twice - once) / (iterations2 - iterations).max(1) as f64;

    // F^H D of the normalised data, back in the data's units.
    let back = B::Real::of(1.0 / inputs.data_scale);
    let fhd: Vec<Complex<B::Real>> = built.fhd(b)?.iter().map(|v| *v * back).collect();
    let fhd_seconds = seconds(&times, "fhd");
    Ok(Stages {
        engine: engine.describe(),
        plan_seconds: seconds(&times, "plan"),
        q_seconds: seconds(&times, "q"),
        q_max_rel_error: max_rel_error(&built.q, &p.q_check, &p.q_ref),
        toeplitz_seconds: seconds(&times, "fft_q"),
        fhd_seconds,
        fhd_max_rel_error: max_rel_error(&fhd, &p.check, &p.fhd_ref),
        cg_ms_per_iteration: 1e3 * per_iteration,
        fhd_plus_cg_seconds: fhd_seconds + once,
        iterations,
    })
}

pub(super) fn print(stages: &[Stages], q_grid: &str) {
    println!(
        "{:<64} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>10} {:>10}",
        "engine",
        "plan (s)",
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
            "{:<64} {:>9.4} {:>9.4} {:>9.2e} {:>9.4} {:>9.4} {:>9.2e} {:>10.3} {:>10.4}",
            s.engine,
            s.plan_seconds,
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
            "(Q with its plan on {q_grid}, and its FFT: per trajectory; F^H D + CG: per scan, {} iterations, the image brought back; stages as a run builds them)",
            s.iterations
        );
    }
}
