//! `recon bench-nufft`: times the CPU NUFFT engine on a scan file's
//! trajectory, for a side-by-side comparison with FINUFFT on the same
//! points (`scripts/nufft-vs-finufft.py` runs both).
//!
//! Each sum is timed as FINUFFT times its execute step: the plan and its
//! sorted points are made once (and timed apart), then each transform runs
//! a few times and the best is kept. The L2 norm of each result is printed
//! so that the script can check that both tools solved the same problem.

use crate::inspect::{read_isolated, UnitsArg};
use anyhow::{Context, Result};
use recon_core::{Complex, CpuBackend, Real};
use recon_encoding::{Engine, Plan};
use std::time::Instant;

#[derive(clap::Args, Debug, Clone)]
pub struct BenchNufftArgs {
    /// Scan file (recon's format; `recon simulate` writes one).
    #[arg(long)]
    pub scan: std::path::PathBuf,
    /// NUFFT tolerance.
    #[arg(long, default_value_t = 1e-6)]
    pub tolerance: f64,
    /// f32 or f64.
    #[arg(long, default_value = "f64")]
    pub precision: crate::config::Precision,
    /// Runs of each transform; the best is reported.
    #[arg(long, default_value_t = 3)]
    pub repeats: usize,
    /// CPU threads; 0 uses every core.
    #[arg(long, default_value_t = 0)]
    pub threads: usize,
}

/// The best of `repeats` runs of `f`, in seconds.
fn best(repeats: usize, mut f: impl FnMut() -> Result<()>) -> Result<f64> {
    let mut best = f64::INFINITY;
    for _ in 0..repeats {
        let t = Instant::now();
        f()?;
        best = best.min(t.elapsed().as_secs_f64());
    }
    Ok(best)
}

fn norm<T: Real>(v: &[Complex<T>]) -> f64 {
    v.iter()
        .map(|c| c.re.f64().powi(2) + c.im.f64().powi(2))
        .sum::<f64>()
        .sqrt()
}

fn run_in<T: Real>(args: &BenchNufftArgs, scan: &recon_io::scan::Scan) -> Result<()> {
    let cpu = CpuBackend::<T>::new();
    let engine = Engine::Nufft {
        tolerance: args.tolerance,
    };
    let (grid, traj) = (&scan.grid, &scan.traj);
    let t = Instant::now();
    let plan = Plan::new(&cpu, engine, grid, traj).context("planning the NUFFT")?;
    let plan_s = t.elapsed().as_secs_f64();
    let mut fhd = vec![Complex::<T>::default(); grid.len()];
    let adjoint_s = best(args.repeats, || {
        Ok(plan.adjoint(&mut fhd, &scan.data, &mut |_, _| {})?)
    })?;
    let mut d = vec![Complex::<T>::default(); traj.len()];
    let forward_s = best(args.repeats, || {
        Ok(plan.forward(&mut d, &fhd, &mut |_, _| {})?)
    })?;
    // Q makes its own plan on the doubled grid each time: timed whole.
    let mut q = vec![Complex::<T>::default(); grid.doubled().iter().product()];
    let q_s = best(args.repeats, || Ok(plan.q(&mut q, &mut |_, _| {})?))?;
    println!(
        "{{\"tool\": \"recon\", \"engine\": \"{}\", \"precision\": \"{}\", \"threads\": {}, \
         \"matrix\": {:?}, \"samples\": {}, \"plan_s\": {plan_s:.4}, \"type1_s\": {adjoint_s:.4}, \
         \"type2_s\": {forward_s:.4}, \"q_s\": {q_s:.4}, \"type1_norm\": {:e}, \"type2_norm\": {:e}, \
         \"q_norm\": {:e}}}",
        engine.describe(),
        T::NAME,
        rayon::current_num_threads(),
        grid.n,
        traj.len(),
        norm(&fhd),
        norm(&d),
        norm(&q)
    );
    Ok(())
}

pub fn run(args: &BenchNufftArgs) -> Result<()> {
    if args.repeats == 0 || args.repeats > 100 {
        anyhow::bail!("--repeats must be 1 to 100, got {}", args.repeats);
    }
    if args.threads > 4096 {
        anyhow::bail!(
            "--threads must be 0 (all cores) to 4096, got {}",
            args.threads
        );
    }
    Engine::Nufft {
        tolerance: args.tolerance,
    }
    .check(match args.precision {
        crate::config::Precision::F32 => 4,
        crate::config::Precision::F64 => 8,
    })
    .context("--tolerance")?;
    if args.threads > 0 {
        rayon::ThreadPoolBuilder::new()
            .num_threads(args.threads)
            .build_global()
            .context("setting --threads")?;
    }
    let (_, scan) = read_isolated(&args.scan, UnitsArg::CyclesPerFov, true)?;
    match args.precision {
        crate::config::Precision::F32 => run_in::<f32>(args, &scan),
        crate::config::Precision::F64 => run_in::<f64>(args, &scan),
    }
}
