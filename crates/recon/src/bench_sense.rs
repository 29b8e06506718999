//! `recon bench-sense`: SENSE per scan, timed stage by stage.
//!
//! The book's radial problem (a cubic `--matrix`, `--samples` on radial
//! spokes of 112) seen by `--coils` synthetic coils on a ring, with the
//! sodium phantom's analytic data. Per trajectory: the plan and Q (its
//! FFT with the maps' upload). Per scan: the maps estimated from the data
//! (low-resolution gridded coil images, Inati's iteration on the host),
//! `sum_c S_c^H F^H D_c` from the host's data on the device, the CG
//! iterations of the SENSE operator, and F^H D + CG with the image brought
//! back, the figure of the target. The solve uses the true maps
//! (normalised), so that the time does not depend on the estimate.

use crate::bench_nufft::best;
use crate::config::{DeviceChoice, EngineCfg, EngineKind, Precision};
use anyhow::{Context, Result};
use recon_cg::{Params, Regularised, Sense, Toeplitz};
use recon_core::{Complex, Real, Stencil};
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
    /// FFT(Q) and the maps' upload.
    setup_seconds: f64,
    maps_estimate_seconds: f64,
    /// Agreement of the estimated maps with the true ones inside the object.
    maps_agreement: f64,
    fhd_seconds: f64,
    cg_ms_per_iteration: f64,
    fhd_plus_cg_seconds: f64,
}

pub fn run(args: &BenchSenseArgs) -> Result<()> {
    if !(1..=128).contains(&args.coils) {
        anyhow::bail!("--coils must be 1 to 128, got {}", args.coils);
    }
    if args.matrix < 4 || args.matrix % 2 != 0 || args.matrix > recon_core::MAX_N {
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

fn run_on<B: NufftBackend>(b: &B, args: &BenchSenseArgs) -> Result<()> {
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

    // Per trajectory: the plan, Q, FFT(Q) with the maps' upload.
    let t = Instant::now();
    let engine = Engine::Nufft {
        tolerance: args.tolerance,
    };
    let plan = Plan::new(b, engine, &grid, &traj)?;
    b.synchronize()?;
    let plan_seconds = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let mut q = vec![Complex::<B::Real>::default(); grid.doubled().iter().product()];
    plan.q(&mut q, &mut |_, _| {})?;
    let q_seconds = t.elapsed().as_secs_f64();

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

    let t = Instant::now();
    let host_maps: Vec<Vec<Complex<B::Real>>> =
        maps.iter().map(|m| crate::pipeline::from_f64(m)).collect();
    let mut sense = Sense::new(b, Toeplitz::new(b, &grid, &q)?, &host_maps)?;
    drop(host_maps);
    b.synchronize()?;
    let setup_seconds = t.elapsed().as_secs_f64();

    // sum_c S_c^H F^H D_c, from the host's data.
    let mut rhs = b.zeros(grid.len())?;
    let fhd_seconds = best(args.repeats, || {
        plan.adjoint_coils_on_device(&mut rhs, &data, sense.maps(), &mut |_, _| {})?;
        b.synchronize()?;
        Ok(())
    })?;
    let q_peak = recon_cg::q_peak(&grid, &q)?;
    let lambda = 0.01 * q_peak * sense.map_peak();
    let params = Params {
        iterations: args.iterations,
        tolerance: 0.0,
    };
    let mut image = vec![Complex::<B::Real>::default(); grid.len()];
    let mut cg_seconds = f64::INFINITY;
    let fhd_plus_cg_seconds = best(args.repeats, || {
        plan.adjoint_coils_on_device(&mut rhs, &data, sense.maps(), &mut |_, _| {})?;
        let mut a = Regularised::new(b, &mut sense, &Stencil::uniform(grid.n), lambda)?;
        let mut x = b.zeros(grid.len())?;
        b.synchronize()?;
        let t_cg = Instant::now();
        recon_cg::solve(b, &mut a, &mut x, &rhs, &params, &mut |_, _| {})?;
        cg_seconds = cg_seconds.min(t_cg.elapsed().as_secs_f64());
        b.download(&mut image, &x)?;
        Ok(())
    })?;
    // The image is used: its norm shows the solve did something.
    let norm = image
        .iter()
        .map(|c| c.re.f64().powi(2) + c.im.f64().powi(2))
        .sum::<f64>()
        .sqrt();
    anyhow::ensure!(
        norm.is_finite() && norm > 0.0,
        "the SENSE solve gave an image of norm {norm}"
    );
    let r = Results {
        device: b.describe(),
        matrix: args.matrix,
        samples: traj.len(),
        coils: args.coils,
        iterations: args.iterations,
        synthesis_seconds,
        plan_seconds,
        q_seconds,
        setup_seconds,
        maps_estimate_seconds,
        maps_agreement,
        fhd_seconds,
        cg_ms_per_iteration: 1e3 * cg_seconds / args.iterations as f64,
        fhd_plus_cg_seconds,
    };
    println!("recon bench-sense: {}", r.device);
    println!(
        "problem: {}^3 image, {} samples, {} coils on a ring, {} CG iterations",
        r.matrix, r.samples, r.coils, r.iterations
    );
    println!(
        "per trajectory: plan {:.3} s, Q {:.3} s, FFT(Q) and maps upload {:.3} s",
        r.plan_seconds, r.q_seconds, r.setup_seconds
    );
    println!(
        "per scan: maps estimated in {:.2} s (agreement with the true maps {:.3}); F^H D {:.4} s; CG {:.3} ms/iteration; F^H D + CG {:.3} s",
        r.maps_estimate_seconds, r.maps_agreement, r.fhd_seconds, r.cg_ms_per_iteration, r.fhd_plus_cg_seconds
    );
    if let Some(path) = &args.json {
        let json = serde_json::to_string_pretty(&r)? + "\n";
        recon_io::write_atomic(path, |tmp| crate::output::write_text(tmp, &json))?;
    }
    Ok(())
}
