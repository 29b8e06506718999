//! `recon`: iterative non-Cartesian 3-D MRI reconstruction.
//!
//! The binary owns everything the library crates leave out on purpose:
//! reading the config, progress bars, log lines, the summary, and the
//! output files. The pipeline itself is in `pipeline.rs`, generic over the
//! backend.

mod bench;
mod config;
mod output;
mod parboil;
mod pipeline;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use config::{DeviceChoice, Loaded, Precision};
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
    /// Where to compute, overriding `engine.device`.
    #[arg(long, global = true, value_enum)]
    device: Option<DeviceChoice>,
}

#[derive(Subcommand)]
enum Command {
    /// Synthesise, reconstruct and report (the default).
    Run,
    /// Precompute Q for the config's trajectory into the cache, and stop.
    Q,
    /// Time the book's reference problem: each GPU variant, Q, F^H D and CG.
    Bench(bench::BenchArgs),
    /// Q for a Parboil mri-q input file, in Parboil's output format.
    ParboilQ(parboil::ParboilArgs),
}

/// Progress bars on stderr; hidden automatically when stderr is not a terminal.
pub(crate) struct Bars;

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
    if let Some(Command::Bench(args)) = &cli.command {
        return bench::run(args, cli.device.unwrap_or(DeviceChoice::Auto));
    }
    if let Some(Command::ParboilQ(args)) = &cli.command {
        return parboil::run(args, cli.device.unwrap_or(DeviceChoice::Auto), &Bars);
    }
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
    let mut l = l;
    if let Some(d) = cli.device {
        l.cfg.engine.device = d;
    }
    match choose_backend(&l.cfg.engine)? {
        Chosen::Cuda(b) => dispatch(&b, &l, cli.command),
        Chosen::Cpu(Precision::F32) => dispatch(&CpuBackend::<f32>::new(), &l, cli.command),
        Chosen::Cpu(Precision::F64) => dispatch(&CpuBackend::<f64>::new(), &l, cli.command),
    }
}

pub(crate) enum Chosen {
    Cuda(recon_cuda::CudaBackend),
    Cpu(Precision),
}

/// `engine.device`: `cuda` insists on a GPU; `auto` takes one when usable
/// and otherwise says, in one line, why it runs on the CPU.
pub(crate) fn choose_backend(e: &config::EngineCfg) -> Result<Chosen> {
    let options = || recon_cuda::Options {
        variant: recon_cuda::Variant::from_number(e.variant).expect("validated"),
        tuning: recon_cuda::Tuning {
            per_thread: e.per_thread,
            block: e.block,
        },
        devices: None,
    };
    match e.device {
        DeviceChoice::Cpu => Ok(Chosen::Cpu(e.precision)),
        DeviceChoice::Cuda => {
            if e.precision == Precision::F64 {
                anyhow::bail!(
                    "the GPU computes in f32: use engine.precision = \"f32\" with the cuda device"
                );
            }
            recon_cuda::probe()
                .map_err(|why| anyhow::anyhow!("device = cuda, but CUDA is unavailable: {why}"))?;
            Ok(Chosen::Cuda(
                recon_cuda::CudaBackend::new(options()).context("opening the GPU")?,
            ))
        }
        DeviceChoice::Auto => {
            if e.precision == Precision::F64 {
                eprintln!(
                    "device auto: engine.precision = f64 runs on the CPU (the GPU computes in f32)"
                );
                return Ok(Chosen::Cpu(e.precision));
            }
            match recon_cuda::probe() {
                Err(why) => {
                    eprintln!("device auto: no usable GPU ({why}); running on the CPU");
                    Ok(Chosen::Cpu(e.precision))
                }
                Ok(_) => {
                    let b = recon_cuda::CudaBackend::new(options()).context("opening the GPU")?;
                    eprintln!("device auto: using {}", b.device_names().join(" + "));
                    Ok(Chosen::Cuda(b))
                }
            }
        }
    }
}

fn dispatch<B>(backend: &B, l: &Loaded, command: Option<Command>) -> Result<()>
where
    B: Backend,
    B::Real: Stored,
{
    match command.unwrap_or(Command::Run) {
        Command::Run => run_pipeline(backend, l),
        Command::Bench(_) | Command::ParboilQ(_) => {
            unreachable!("handled before the config is read")
        }
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
    let traj = l.cfg.trajectory.generate(&l.grid)?;
    // Before anything large is made: does the device hold this problem?
    pipeline::check_memory(backend, &l.grid, traj.len())?;
    let inputs = pipeline::synthesise(l, traj)?;
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
