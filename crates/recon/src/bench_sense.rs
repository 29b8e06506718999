//! `recon bench-sense`: SENSE per scan, timed stage by stage.
//!
//! The book's radial problem (a cubic `--matrix`, `--samples` on radial
//! spokes of 112) seen by `--coils` synthetic coils on a ring, with the
//! sodium phantom's analytic data. Per trajectory: the plan and Q (its
//! FFT with the maps' upload). Per scan: the maps estimated from the data
//! (low-resolution gridded coil images, Inati's iteration on the host),
//! `sum_c S_c^H F^H D_c` from the host's data on the device, the CG
//! iterations of the SENSE operator, and F^H D + CG with the image brought
//! back, the figure of the issue's target. The stages are a run's: the
//! problem becomes a config with its scan in memory, built by
//! [`recon_pipeline::build_with`] and solved as a run solves. The solve
//! uses the true maps (`sense.maps = "given"`), so that the time does not
//! depend on the estimate. The per-scan stages run once for each count of
//! `--gpus` sharing the coils, in one process on the same data, with the
//! speed-up over one GPU.

use crate::bench::built::{fastest_build, in_memory, seconds};
use crate::bench_nufft::best;
use crate::config::{DeviceChoice, EngineCfg, EngineKind, Precision};
use crate::pipeline::Silent;
use anyhow::{Context, Result};
use recon_cg::Params;
use recon_core::{Complex, Real};
use recon_encoding::{Engine, NufftBackend, Plan};
use serde::Serialize;
use std::time::Instant;

#[derive(clap::Args, Debug, Clone)]
pub struct BenchSenseArgs {
    /// Receive coils, 1 to 128.
    #[arg(long, default_value_t = 32)]
    pub coils: usize,
    /// Image matrix (cubic, even, 4 to 1024).
    #[arg(long, default_value_t = 128)]
    pub matrix: usize,
    /// k-space samples (radial, 112 per spoke).
    #[arg(long, default_value_t = 284_592)]
    pub samples: usize,
    /// CG iterations per scan.
    #[arg(long, default_value_t = 30)]
    pub iterations: usize,
    /// NUFFT tolerance.
    #[arg(long, default_value_t = recon_encoding::Engine::DEFAULT_TOLERANCE)]
    pub tolerance: f64,
    /// Where to compute: auto (a GPU when usable), cpu or cuda.
    #[arg(long, value_enum, default_value = "auto")]
    pub device: DeviceChoice,
    /// GPUs sharing the coils, one run for each count, e.g. `1,2,4`;
    /// default 1 and every GPU of the host.
    #[arg(long, value_delimiter = ',')]
    pub gpus: Vec<usize>,
    /// Runs of each per-scan stage; the best is reported.
    #[arg(long, default_value_t = 3)]
    pub repeats: usize,
    /// Write the results as JSON here.
    #[arg(long)]
    pub json: Option<std::path::PathBuf>,
}

#[derive(Debug, Serialize)]
struct Results {
    device: String,
    matrix: usize,
    samples: usize,
    coils: usize,
    iterations: usize,
    synthesis_seconds: f64,
    plan_seconds: f64,
    q_seconds: f64,
    maps_estimate_seconds: f64,
    /// Agreement of the estimated maps with the true ones inside the object.
    maps_agreement: f64,
    /// Image-sized copies between GPU 0 and GPU 1, each way in turn.
    copy_gb_per_s: Option<f64>,
    /// F^H D on one device taken coil by coil (each coil's values weighed,
    /// uploaded and transformed in turn), against the runs' batched type 1.
    fhd_coil_by_coil_seconds: f64,
    runs: Vec<Run>,
}

/// The per-scan stages with the coils shared among `gpus` GPUs.
#[derive(Debug, Serialize)]
struct Run {
    gpus: usize,
    /// FFT(Q) and its copies, the maps' upload, the other GPUs' plans.
    setup_seconds: f64,
    fhd_seconds: f64,
    /// One application of the SENSE operator, and the host's time to
    /// issue it (the GPUs then work on while the host waits).
    apply_ms: f64,
    apply_issue_ms: f64,
    cg_ms_per_iteration: f64,
    fhd_plus_cg_seconds: f64,
    /// One GPU's F^H D + CG over this run's (where one GPU ran).
    speedup: Option<f64>,
}

pub fn run(args: &BenchSenseArgs) -> Result<()> {
    if !(1..=128).contains(&args.coils) {
        anyhow::bail!("--coils must be 1 to 128, got {}", args.coils);
    }
    if args.matrix < 4 || !args.matrix.is_multiple_of(2) || args.matrix > recon_core::MAX_N {
        anyhow::bail!(
            "--matrix must be even, from 4 to {}, got {}",
            recon_core::MAX_N,
            args.matrix
        );
    }
    if args.samples == 0 || args.samples > recon_core::MAX_SAMPLES {
        anyhow::bail!(
            "--samples must be 1 to {}, got {}",
            recon_core::MAX_SAMPLES,
            args.samples
        );
    }
    if args.iterations == 0 || !(1..=100).contains(&args.repeats) {
        anyhow::bail!("--iterations must be at least 1 and --repeats 1 to 100");
    }
    if let Some(path) = &args.json {
        recon_io::check_writable_file(path).context("--json")?;
    }
    let engine = EngineCfg {
        kind: EngineKind::Nufft,
        device: args.device,
        precision: Precision::F32,
        ..Default::default()
    };
    crate::on_backend!(crate::choose_backend(&engine)?, b => run_on(b, args))
}

fn run_on<B>(b: &B, args: &BenchSenseArgs) -> Result<()>
where
    B: NufftBackend,
    B::Real: recon_q::Stored,
{
    let t = Instant::now();
    let phantom =
        recon_synth::Phantom::load(&crate::bench::shipped("phantoms/sodium-brain.toml")?)?;
    let grid = recon_core::Grid::new([args.matrix; 3], [240.0; 3])?;
    let traj = crate::bench::radial_trajectory(&grid, args.samples)?;
    let coils = recon_synth::Coils {
        count: args.coils,
        arrangement: recon_synth::Arrangement::Ring,
        radius: 1.2,
    };
    let data = coils.kspace(&phantom, &grid, &traj);
    let truth: Vec<Vec<Complex<f64>>> = coils
        .sensitivities()
        .iter()
        .map(|s| s.on_grid(&grid))
        .collect();
    let maps = recon_coils::unit_norm(&truth);
    let synthesis_seconds = t.elapsed().as_secs_f64();
    eprintln!(
        "bench-sense: {} coils, {} image, {} samples on {} (synthesis {synthesis_seconds:.1} s)",
        args.coils,
        args.matrix,
        traj.len(),
        b.describe()
    );

    // Per scan: the maps from the data.
    let t = Instant::now();
    let g = recon_gridding::Gridding::new(b, &grid, &traj, &Default::default())?;
    let est = crate::pipeline::maps_from_data(&g, &grid, &data, &Default::default())?;
    let maps_estimate_seconds = t.elapsed().as_secs_f64();
    drop(g);
    let object = phantom.rasterise(&grid, 1);
    let peak = object.iter().copied().fold(0.0, f64::max);
    let mask: Vec<bool> = object.iter().map(|&v| v > 0.1 * peak).collect();
    let maps_agreement = recon_coils::agreement(&est, &maps, &mask)?;
    drop(est);

    let host_maps: Vec<Vec<Complex<B::Real>>> =
        maps.iter().map(|m| crate::pipeline::from_f64(m)).collect();
    let copy_gb_per_s = copy_rate(b, grid.len())?;
    let engine = Engine::Nufft {
        tolerance: args.tolerance,
    };
    let plan = Plan::new(b, engine, &grid, &traj)?;
    let fhd_coil_by_coil_seconds = coil_by_coil(b, args.repeats, &plan, &host_maps, &data)?;
    drop((plan, host_maps));

    let samples = traj.len();
    let l = config(args, grid, traj, data, maps)?;
    let inputs = crate::pipeline::inputs(&l, crate::pipeline::trajectory(&l)?, &Silent)?;
    let mut runs: Vec<Run> = Vec::new();
    // Per trajectory, from the builds: the plan, and Q with its plan.
    let (mut plan_seconds, mut q_seconds) = (f64::INFINITY, f64::INFINITY);
    for &gpus in &gpu_counts(b, &args.gpus)? {
        let (mut run, (plan, q)) = per_scan(b, args, &l, &inputs, gpus)?;
        (plan_seconds, q_seconds) = (plan_seconds.min(plan), q_seconds.min(q));
        let one = runs
            .iter()
            .find(|r| r.gpus == 1)
            .map(|r| r.fhd_plus_cg_seconds);
        run.speedup = one.map(|t| t / run.fhd_plus_cg_seconds);
        runs.push(run);
    }
    let r = Results {
        device: b.describe(),
        matrix: args.matrix,
        samples,
        coils: args.coils,
        iterations: args.iterations,
        synthesis_seconds,
        plan_seconds,
        q_seconds,
        maps_estimate_seconds,
        maps_agreement,
        copy_gb_per_s,
        fhd_coil_by_coil_seconds,
        runs,
    };
    println!("recon bench-sense: {}", r.device);
    println!(
        "problem: {}^3 image, {} samples, {} coils on a ring, {} CG iterations",
        r.matrix, r.samples, r.coils, r.iterations
    );
    println!(
        "per trajectory: plan {:.3} s, Q {:.3} s; per scan: maps estimated in {:.2} s (agreement with the true maps {:.3})",
        r.plan_seconds, r.q_seconds, r.maps_estimate_seconds, r.maps_agreement
    );
    println!(
        "F^H D on one device coil by coil: {:.4} s (the runs below: one type 1 batched over the coils)",
        r.fhd_coil_by_coil_seconds
    );
    if let Some(rate) = r.copy_gb_per_s {
        println!("copies between GPU 0 and GPU 1: {rate:.0} GB/s");
    }
    println!("| GPUs | FFT(Q), maps, plans | F^H D | operator (host issues it in) | CG per iteration | F^H D + CG | speed-up |");
    println!("| --- | --- | --- | --- | --- | --- | --- |");
    for run in &r.runs {
        println!(
            "| {} | {:.3} s | {:.4} s | {:.3} ms ({:.3} ms) | {:.3} ms | {:.4} s | {} |",
            run.gpus,
            run.setup_seconds,
            run.fhd_seconds,
            run.apply_ms,
            run.apply_issue_ms,
            run.cg_ms_per_iteration,
            run.fhd_plus_cg_seconds,
            run.speedup.map_or("-".into(), |s| format!("{s:.2}x"))
        );
    }
    if let Some(path) = &args.json {
        let json = serde_json::to_string_pretty(&r)? + "\n";
        recon_io::write_atomic(path, |tmp| crate::output::write_text(tmp, &json))?;
    }
    Ok(())
}

/// The counts of `--gpus`, checked against the backend's; by default 1
/// and all of them.
fn gpu_counts<B: NufftBackend>(b: &B, asked: &[usize]) -> Result<Vec<usize>> {
    let have = b.shards();
    if asked.is_empty() {
        return Ok(if have > 1 { vec![1, have] } else { vec![1] });
    }
    for &g in asked {
        anyhow::ensure!(
            (1..=have).contains(&g),
            "--gpus {g}: {} has {have} device(s) to share the coils",
            b.describe()
        );
    }
    Ok(asked.to_vec())
}

/// The problem as a run's config, its scan (data and true maps) in memory.
fn config(
    args: &BenchSenseArgs,
    grid: recon_core::Grid,
    traj: Vec<[f64; 3]>,
    data: Vec<Complex<f64>>,
    maps: Vec<Vec<Complex<f64>>>,
) -> Result<crate::config::Loaded> {
    let keys = format!(
        "[engine]\nkind = \"nufft\"\ntolerance = {:e}\n\n[sense]\nmaps = \"given\"\n\n\
         [solver]\niterations = {}\nlambda = 0.01\ntolerance = 0.0",
        args.tolerance, args.iterations
    );
    let scan = recon_io::scan::Scan {
        grid,
        traj,
        coils: args.coils,
        data,
        noise: None,
        maps: Some(maps),
        truth: None,
        anatomy: None,
        geometry: None,
        parts: Vec::new(),
    };
    in_memory("the SENSE benchmark's problem", &keys, scan)
}

/// Times the per-scan stages with the coils shared among `gpus` shards, as
/// a run builds and solves them; also the build's plan and Q seconds.
fn per_scan<B>(
    b: &B,
    args: &BenchSenseArgs,
    l: &crate::config::Loaded,
    inputs: &crate::pipeline::Inputs,
    gpus: usize,
) -> Result<(Run, (f64, f64))>
where
    B: NufftBackend,
    B::Real: recon_q::Stored,
{
    let params = crate::pipeline::BuildParams {
        coil_devices: Some(gpus),
    };
    // The build, best of `repeats` for each stage; the last one kept.
    let (mut built, times) = fastest_build(b, l, inputs, &params, args.repeats, &Silent)?;
    // FFT(Q), the maps' upload and the other GPUs' plans: the builder's
    // "fft_q" and "maps_upload" (its "maps" also makes the gridding
    // baseline's plan).
    let setup_seconds = seconds(&times, "fft_q") + seconds(&times, "maps_upload");
    let fhd_seconds = seconds(&times, "fhd");

    // One application: the host's time to issue it, and the whole.
    let n = l.grid.len();
    let x = b.upload(&vec![
        Complex::<B::Real>::new(
            B::Real::of(1.0),
            B::Real::of(0.0)
        );
        n
    ])?;
    let mut y = b.zeros(n)?;
    let (mut apply_ms, mut apply_issue_ms) = (f64::INFINITY, f64::INFINITY);
    for _ in 0..args.repeats + 1 {
        b.synchronize()?;
        let t = Instant::now();
        built.problem.data_term().apply(b, &mut y, &x)?;
        apply_issue_ms = apply_issue_ms.min(1e3 * t.elapsed().as_secs_f64());
        b.synchronize()?;
        apply_ms = apply_ms.min(1e3 * t.elapsed().as_secs_f64());
    }
    drop((x, y));

    // The solve as a run solves it, the image brought back: k and 2k
    // iterations, the difference per iteration leaving out the set-up.
    let k = args.iterations;
    let mut solve = |iterations: usize| -> Result<(f64, f64)> {
        built.params = Params {
            iterations,
            tolerance: 0.0,
        };
        let mut best = f64::INFINITY;
        let mut norm = 0.0;
        for _ in 0..args.repeats {
            let t = Instant::now();
            let solved = built.solve(b, "the SENSE benchmark's CG", &Silent)?;
            best = best.min(t.elapsed().as_secs_f64());
            norm = solved
                .x
                .iter()
                .map(|c| c.re.f64().powi(2) + c.im.f64().powi(2))
                .sum::<f64>()
                .sqrt();
        }
        Ok((best, norm))
    };
    let (once, norm) = solve(k)?;
    let (twice, _) = solve(2 * k)?;
    // The image is used: its norm shows the solve did something.
    anyhow::ensure!(
        norm.is_finite() && norm > 0.0,
        "the SENSE solve on {gpus} GPU(s) gave an image of norm {norm}"
    );
    let run = Run {
        gpus: built.problem.devices(),
        setup_seconds,
        fhd_seconds,
        apply_ms,
        apply_issue_ms,
        cg_ms_per_iteration: 1e3 * (twice - once) / k as f64,
        fhd_plus_cg_seconds: fhd_seconds + once,
        speedup: None,
    };
    Ok((run, (seconds(&times, "plan"), seconds(&times, "q"))))
}

/// Seconds (best of `repeats`) of `sum_c S_c^H F^H D_c` on one device
/// taken coil by coil ([`recon_encoding::type1_coils_by_pieces`]).
fn coil_by_coil<B: NufftBackend>(
    b: &B,
    repeats: usize,
    plan: &Plan<'_, B>,
    maps: &[Vec<Complex<B::Real>>],
    data: &[Complex<f64>],
) -> Result<f64> {
    let (p, phi) = plan.nufft().context("bench-sense runs the NUFFT engine")?;
    let maps = maps
        .iter()
        .map(|s| b.upload(s))
        .collect::<recon_core::Result<Vec<_>>>()?;
    let mut out = b.zeros(plan.grid().len())?;
    best(repeats, || {
        let maps: Vec<&B::Vector> = maps.iter().collect();
        recon_encoding::type1_coils_by_pieces(b, p, &mut out, phi, data, &maps, &mut |_, _| {})?;
        b.synchronize()?;
        Ok(())
    })
}

/// GB/s of image-sized copies between shards 0 and 1, each way in turn;
/// `None` with one shard.
fn copy_rate<B: NufftBackend>(b: &B, len: usize) -> Result<Option<f64>> {
    if b.shards() < 2 {
        return Ok(None);
    }
    let other = b.shard(1)?;
    let (mut v0, mut v1) = (b.zeros(len)?, other.zeros(len)?);
    other.transfer(&mut v1, b, &v0)?;
    b.synchronize()?;
    other.synchronize()?;
    const ROUNDS: usize = 10;
    let t = Instant::now();
    for _ in 0..ROUNDS {
        other.transfer(&mut v1, b, &v0)?;
        b.transfer(&mut v0, &other, &v1)?;
    }
    b.synchronize()?;
    other.synchronize()?;
    let bytes = (2 * ROUNDS * len * 2 * std::mem::size_of::<B::Real>()) as f64;
    Ok(Some(bytes / t.elapsed().as_secs_f64() / 1e9))
}
