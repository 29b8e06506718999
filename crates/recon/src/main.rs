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
mod pictures;
mod pipeline;
mod validate;

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
    /// Write the config's synthetic data as a scan file (`--out scan.h5`).
    Simulate,
    /// Run the config through every engine, noiseless and noisy, with gridding.
    Validate(validate::ValidateArgs),
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
    // Ctrl-C: remove whatever is being written, then stop.
    let _ = ctrlc::set_handler(|| {
        recon_io::remove_partial_files();
        eprintln!("interrupted: no partial output left");
        std::process::exit(130);
    });
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
    if let Some(Command::Simulate) = &cli.command {
        let Some(out) = cli.out.as_deref() else {
            anyhow::bail!("recon simulate needs --out FILE.h5, the scan file to write");
        };
        let l = config::load(config, None)?;
        return simulate(&l, out);
    }
    let l = config::load(config, cli.out.as_deref())?;
    if let Some(Command::Validate(args)) = &cli.command {
        return validate::run(&l, args, &Bars);
    }
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
        Command::Bench(_) | Command::ParboilQ(_) | Command::Simulate | Command::Validate(_) => {
            unreachable!("handled before a backend is chosen")
        }
        Command::Q => {
            let traj = pipeline::trajectory(l)?;
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

/// `recon simulate`: synthetic data, truth and anatomy into a scan file.
fn simulate(l: &Loaded, out: &std::path::Path) -> Result<()> {
    if let config::Source::Scan(_) = l.source {
        anyhow::bail!("recon simulate writes synthetic data: the config must have [phantom] and [trajectory], not [scan]");
    }
    let traj = pipeline::trajectory(l)?;
    let inputs = pipeline::inputs(l, traj)?;
    let scan = recon_io::scan::Scan {
        grid: l.grid,
        traj: inputs.traj,
        data: inputs.data,
        truth: inputs.truth,
        anatomy: inputs.anatomy,
    };
    recon_io::scan::write_scan(out, &scan).context("writing the scan file")?;
    println!(
        "wrote {}: {} samples, matrix {:?}, FOV {:?} mm, truth{}",
        out.display(),
        scan.traj.len(),
        scan.grid.n,
        scan.grid.fov_mm,
        if scan.anatomy.is_some() {
            " and anatomy"
        } else {
            ""
        }
    );
    Ok(())
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
    let traj = pipeline::trajectory(l)?;
    // Before anything large is made: does the device hold this problem?
    pipeline::check_memory(backend, &l.grid, traj.len())?;
    let inputs = pipeline::inputs(l, traj)?;
    let synth_s = t.elapsed().as_secs_f64();
    ui.log(&format!(
        "{} {} samples of `{}` on a {:?} grid in {synth_s:.2} s",
        match l.source {
            config::Source::Synthetic { .. } => "synthesised",
            config::Source::Scan(_) => "read",
        },
        inputs.traj.len(),
        l.data_name(),
        l.grid.n
    ));
    let mut out = pipeline::reconstruct(backend, l, &inputs, &ui)?;
    out.seconds.insert(0, ("synthesis", synth_s));
    let iterative = pipeline::quality(&out.recon, inputs.truth.as_deref());
    let gridding = pipeline::quality(&out.gridding, inputs.truth.as_deref());
    let report = output::report(
        l,
        &inputs,
        &out,
        iterative.as_ref(),
        gridding.as_ref(),
        start.elapsed().as_secs_f64(),
    );
    output::write(&l.cfg.output.dir, l, &inputs, &out, &report)?;

    // One-screen summary.
    println!("recon: {} ({})", l.path.display(), report.device);
    println!(
        "  data {}, {} samples, matrix {:?}, FOV {:?} mm, noise sigma {:.3e}",
        report.data, report.samples, report.matrix, report.fov_mm, report.noise_sigma
    );
    println!(
        "  CG: {} iterations, relative residual {:.3e}, lambda {} x peak Q = {:.3e}, W {}",
        report.iterations,
        report.relative_residual,
        report.lambda,
        report.lambda_abs,
        format!("{:?}", report.regulariser).to_lowercase()
    );
    println!("  Q cache: {}", report.q_cache);
    match (&iterative, &gridding) {
        (Some(i), Some(g)) => {
            println!("                 PSNR (dB)   error (%)");
            println!(
                "  iterative    {:>10.2}  {:>10.2}",
                i.psnr_db, i.percent_error
            );
            println!(
                "  gridding     {:>10.2}  {:>10.2}",
                g.psnr_db, g.percent_error
            );
        }
        _ => println!("  no true image in the scan file: PSNR not computed"),
    }
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
