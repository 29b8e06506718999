//! `recon`: iterative non-Cartesian 3-D MRI reconstruction.
//!
//! The binary owns everything the library crates leave out on purpose:
//! reading the config, progress bars, log lines, the summary, and the
//! output files. The pipeline itself is in `pipeline.rs`, generic over the
//! backend.

mod config;
mod output;
mod pipeline;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use config::{Loaded, Precision};
use indicatif::{ProgressBar, ProgressStyle};
use pipeline::Ui;
use recon_core::{Backend, CpuBackend};
use recon_q::Stored;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

#[derive(Parser)]
#[command(
    name = "recon",
    version,
    about = "Iterative non-Cartesian 3-D MRI reconstruction"
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// TOML configuration (see configs/).
    #[arg(long, global = true)]
    config: Option<PathBuf>,
    /// Output folder, overriding `output.dir`.
    #[arg(long, global = true)]
    out: Option<PathBuf>,
}

#[derive(Subcommand)]
enum Command {
    /// Synthesise, reconstruct and report (the default).
    Run,
    /// Precompute Q for the config's trajectory into the cache, and stop.
    Q,
}

/// Progress bars on stderr; hidden automatically when stderr is not a terminal.
struct Bars;

impl Ui for Bars {
    fn log(&self, msg: &str) {
        eprintln!("{msg}");
    }

    fn stage<T>(&self, name: &str, f: impl FnOnce(&mut dyn FnMut(u64, u64)) -> T) -> T {
        let bar = ProgressBar::new(1).with_style(
            ProgressStyle::with_template(
                "{prefix:>8} [{bar:40}] {percent:>3}% {elapsed_precise} eta {eta}",
            )
            .expect("valid template")
            .progress_chars("=> "),
        );
        bar.set_prefix(name.to_string());
        let out = f(&mut |done, total| {
            bar.set_length(total);
            bar.set_position(done);
        });
        bar.finish_and_clear();
        out
    }

    fn solver<T>(&self, iterations: usize, f: impl FnOnce(&mut dyn FnMut(usize, f64)) -> T) -> T {
        let bar = ProgressBar::new(iterations as u64).with_style(
            ProgressStyle::with_template(
                "{prefix:>8} [{bar:40}] {pos}/{len} residual {msg} {elapsed_precise}",
            )
            .expect("valid template")
            .progress_chars("=> "),
        );
        bar.set_prefix("CG");
        let out = f(&mut |it, res| {
            bar.set_position(it as u64);
            bar.set_message(format!("{res:.3e}"));
        });
        bar.finish_and_clear();
        out
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> Result<()> {
    let Some(config) = cli.config.as_deref() else {
        anyhow::bail!("no config given: use `recon --config configs/sodium.toml`");
    };
    let l = config::load(config, cli.out.as_deref())?;
    if l.cfg.engine.threads > 0 {
        rayon::ThreadPoolBuilder::new()
            .num_threads(l.cfg.engine.threads)
            .build_global()
            .context("setting engine.threads")?;
    }
    match l.cfg.engine.precision {
        Precision::F32 => dispatch(&CpuBackend::<f32>::new(), &l, cli.command),
        Precision::F64 => dispatch(&CpuBackend::<f64>::new(), &l, cli.command),
    }
}

fn dispatch<B>(backend: &B, l: &Loaded, command: Option<Command>) -> Result<()>
where
    B: Backend,
    B::Real: Stored,
{
    match command.unwrap_or(Command::Run) {
        Command::Run => run_pipeline(backend, l),
        Command::Q => {
            let traj = l.cfg.trajectory.generate(&l.grid)?;
            let t = Instant::now();
            let (status, file) = pipeline::q_only(backend, l, &traj, &Bars)?;
            println!(
                "Q for {} samples on {:?}: {} in {:.2} s ({})",
                traj.len(),
                l.grid.doubled(),
                status.word(),
                t.elapsed().as_secs_f64(),
                file.map(|f| f.display().to_string())
                    .unwrap_or_else(|| "cache disabled".into())
            );
            Ok(())
        }
    }
}

fn run_pipeline<B>(backend: &B, l: &Loaded) -> Result<()>
where
    B: Backend,
    B::Real: Stored,
{
    let start = Instant::now();
    let ui = Bars;
    ui.log(&format!("device: {}", backend.describe()));
    let t = Instant::now();
    let inputs = pipeline::synthesise(l)?;
    let synth_s = t.elapsed().as_secs_f64();
    ui.log(&format!(
        "synthesised {} samples ({}) of phantom `{}` on a {:?} grid in {synth_s:.2} s",
        inputs.traj.len(),
        serde_json::to_value(&l.cfg.trajectory)?["kind"]
            .as_str()
            .unwrap_or("?"),
        l.phantom.name,
        l.grid.n
    ));
    let mut out = pipeline::reconstruct(backend, l, &inputs, &ui)?;
    out.seconds.insert(0, ("synthesis", synth_s));
    let iterative = pipeline::quality(&out.recon, &inputs.truth);
    let gridding = pipeline::quality(&out.gridding, &inputs.truth);
    let report = output::report(
        l,
        &inputs,
        &out,
        &iterative,
        &gridding,
        start.elapsed().as_secs_f64(),
    );
    output::write(&l.cfg.output.dir, l, &inputs, &out, &report)?;

    // One-screen summary.
    println!("recon: {} ({})", l.path.display(), report.device);
    println!(
        "  phantom {}, {} samples, matrix {:?}, FOV {:?} mm, noise sigma {:.3e}",
        report.phantom, report.samples, report.matrix, report.fov_mm, report.noise_sigma
    );
    println!(
        "  CG: {} iterations, relative residual {:.3e}, lambda {} x peak Q = {:.3e}",
        report.iterations, report.relative_residual, report.lambda, report.lambda_abs
    );
    println!("  Q cache: {}", report.q_cache);
    println!("                 PSNR (dB)   error (%)");
    println!(
        "  iterative    {:>10.2}  {:>10.2}",
        report.psnr_db, report.percent_error
    );
    println!(
        "  gridding     {:>10.2}  {:>10.2}",
        report.gridding_psnr_db, report.gridding_percent_error
    );
    let secs: Vec<String> = report
        .seconds
        .iter()
        .map(|(k, v)| format!("{k} {v:.2}"))
        .collect();
    println!("  seconds: {}", secs.join(", "));
    println!(
        "  wrote {}",
        l.cfg.output.dir.join("{recon.h5, report.json}").display()
    );
    Ok(())
}
