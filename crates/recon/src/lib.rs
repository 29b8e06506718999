//! `recon`: iterative non-Cartesian MRI reconstruction (2-D and 3-D), the application.
//!
//! This crate owns everything the library crates leave out on purpose: the
//! command line, progress bars, log lines, the summary, the output files,
//! reading scan files in a child process, and the benchmark and validation
//! commands. The pipeline itself (configs, the builder, the stages) is the
//! library `recon-pipeline`, re-exported here as [`pipeline`] and
//! [`config`]. `src/main.rs` only calls [`main`]; the rest is a library so
//! that tests and fuzz targets can drive the config parser in-process.

mod arrange;
mod bench;
mod bench_nufft;
mod bench_sense;
mod cli;
mod commands;
mod early;
mod import;
mod inspect;
mod output;
mod parboil;
mod pictures;
mod reader;
mod report;
mod ui;
mod validate;

use pipeline::Ui;
pub use recon_pipeline as pipeline;
pub use recon_pipeline::config;
pub(crate) use ui::Bars;

use anyhow::{Context, Result};
use clap::Parser;
use cli::{Cli, Command, RunArgs};
use config::{DeviceChoice, Loaded};
pub(crate) use recon_pipeline::{on_backend, Chosen};
use recon_q::Stored;
use std::process::ExitCode;
use std::time::Instant;

/// When the process started (as near as `main` knows), or a hosted run
/// ([`run_hosted`]): a run's report accounts for its whole wall time from
/// here.
static START: std::sync::Mutex<Option<Instant>> = std::sync::Mutex::new(None);

/// Seconds spent reading scan files while loading configs (a run's
/// report counts them as its `read`, not its set-up).
static SCAN_READ: std::sync::Mutex<f64> = std::sync::Mutex::new(0.0);

/// Whether scan files are read in this process: a host such as the Python
/// package, whose executable is not recon's (the binary reads them in a
/// child process of its own executable).
static HOSTED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// One hosted run at a time in a process (the clock and the read time above
/// are the process's).
static HOSTED_RUN: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Seconds since the process (or the hosted run) started.
pub(crate) fn since_start() -> f64 {
    let mut s = START.lock().unwrap_or_else(|e| e.into_inner());
    s.get_or_insert_with(Instant::now).elapsed().as_secs_f64()
}

/// Runs the command line `args` (without the program's name) in this
/// process, as the binary would, but for a host: scan files are read in
/// this process, no signal handler is installed, the devices are released
/// at the end, and errors come back as values (their text as the binary
/// prints it: [`error_chain`]). The Python package's batch runs each scan
/// so. Runs in one process take turns.
pub fn run_hosted(args: &[String]) -> std::result::Result<(), String> {
    let _turn = HOSTED_RUN.lock().unwrap_or_else(|e| e.into_inner());
    HOSTED.store(true, std::sync::atomic::Ordering::Relaxed);
    *START.lock().unwrap_or_else(|e| e.into_inner()) = Some(Instant::now());
    *SCAN_READ.lock().unwrap_or_else(|e| e.into_inner()) = 0.0;
    let argv = std::iter::once("recon".to_string()).chain(args.iter().cloned());
    let cli = Cli::try_parse_from(argv).map_err(|e| e.to_string())?;
    ui::set_verbosity(match (cli.quiet, cli.verbose) {
        (true, _) => ui::Verbosity::Quiet,
        (_, true) => ui::Verbosity::Verbose,
        _ => ui::Verbosity::Normal,
    });
    run(cli).map_err(|e| error_chain(&e))
}

/// The `recon` command line: parses the arguments, runs, and returns the
/// exit status (errors are printed, each cause once).
pub fn main() -> ExitCode {
    since_start();
    let cli = Cli::parse();
    ui::set_verbosity(match (cli.quiet, cli.verbose) {
        (true, _) => ui::Verbosity::Quiet,
        (_, true) => ui::Verbosity::Verbose,
        _ => ui::Verbosity::Normal,
    });
    if cli.command.is_none() && cli.run.is_bare() {
        // A bare `recon` is a usage error, as clap's own are: status 2.
        let _ = <Cli as clap::CommandFactory>::command().print_help();
        return ExitCode::from(2);
    }
    // Ctrl-C, SIGTERM and SIGHUP: end the reader process, remove whatever
    // is being written (waiting for a commit in progress to finish first),
    // then stop. The reader process itself installs no handler: a signal
    // ends it at once (see reader.rs).
    let reader = matches!(cli.command, Some(Command::ReadInput(_)));
    if !reader {
        install_interrupt_handler();
    }
    let verbose = ui::verbosity() == ui::Verbosity::Verbose;
    match run(cli) {
        Ok(()) => {
            if verbose {
                eprintln!("done {:.3} s after the start", since_start());
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {}", error_chain(&e));
            ExitCode::FAILURE
        }
    }
}

fn install_interrupt_handler() {
    let _ = ctrlc::set_handler(|| {
        reader::stop_reader();
        let committed = recon_io::remove_partial_files();
        if committed {
            eprintln!("interrupted after the outputs were committed: they are complete");
        } else {
            eprintln!("interrupted: no partial output left");
        }
        std::process::exit(130);
    });
}

/// The error and its causes, `: `-separated, leaving out a cause whose text
/// the message already holds (many errors repeat their source's text).
pub fn error_chain(e: &anyhow::Error) -> String {
    let mut parts: Vec<String> = Vec::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if parts.iter().any(|p| p.contains(&text)) {
            continue;
        }
        // A context its cause repeats at its start ("conjugate gradient"
        // before "conjugate gradient: ...") is said once.
        if parts.last().is_some_and(|p| text.starts_with(p.as_str())) {
            parts.pop();
        }
        parts.push(text);
    }
    parts.join(": ")
}

/// Loads a config, its scan file read in a child process (a damaged HDF5
/// file may crash or hang the HDF5 library), and shows the warnings.
pub fn load_config(path: &std::path::Path, out: Option<&std::path::Path>) -> Result<Loaded> {
    load_settings(Some(path), &config::Settings::default(), out)
}

/// [`load_config`] of an optional config with the command line's settings
/// laid over it.
fn load_settings(
    path: Option<&std::path::Path>,
    settings: &config::Settings,
    out: Option<&std::path::Path>,
) -> Result<Loaded> {
    load_and(path, settings, out, &|_| {})
}

/// [`load_settings`], calling `checked` with the config once it is checked
/// and before its scan file is read.
fn load_and(
    path: Option<&std::path::Path>,
    settings: &config::Settings,
    out: Option<&std::path::Path>,
    checked: &dyn Fn(&config::Config),
) -> Result<Loaded> {
    let read = |p: &std::path::Path, units, beyond| {
        let t = Instant::now();
        let scan = if HOSTED.load(std::sync::atomic::Ordering::Relaxed) {
            recon_pipeline::read_in_process(p, units, beyond)
        } else {
            reader::read_isolated(p, units, beyond)
                .map_err(|e| recon_pipeline::Error::Other(e.into()))
        };
        *SCAN_READ.lock().unwrap_or_else(|e| e.into_inner()) += t.elapsed().as_secs_f64();
        scan
    };
    let l = config::load_with(path, settings, out, &read, checked)?;
    for w in &l.warnings {
        eprintln!("warning: {w}");
    }
    Ok(l)
}

/// Prints a line the pipeline's backend choice has for the user.
pub(crate) fn note(line: &str) {
    if ui::verbosity() != ui::Verbosity::Quiet {
        eprintln!("{line}");
    }
}

/// [`recon_pipeline::choose_backend`] with the default cache folder, its
/// notes on stderr.
pub(crate) fn choose_backend(e: &config::EngineCfg) -> Result<Chosen> {
    Ok(recon_pipeline::choose_backend(
        e,
        &config::default_cache_dir(),
        &note,
    )?)
}

fn backend_for(l: &mut Loaded, device: Option<DeviceChoice>) -> Result<Chosen> {
    Ok(recon_pipeline::backend_for(l, device, &note)?)
}

fn run(cli: Cli) -> Result<()> {
    let command = cli.command.unwrap_or(Command::Run(cli.run));
    match command {
        Command::Bench(args) => bench::run(&args, &Bars),
        Command::BenchNufft(args) => bench_nufft::run(&args),
        Command::BenchSense(args) => bench_sense::run(&args),
        Command::ParboilQ(args) => parboil::run(&args, &Bars),
        Command::Inspect(args) => inspect::run(&args),
        Command::Import(args) => import::run(&args),
        Command::Check(args) => commands::check(&args),
        Command::Batch(args) => commands::batch(&args),
        Command::ReadInput(args) => reader::read_input(&args),
        Command::Simulate(args) => {
            let l = load_config(&args.config, None)?;
            commands::simulate(&l, &args.out)
        }
        Command::Validate(args) => {
            args.check()?;
            let l = load_config(&args.config, args.out.as_deref())?;
            validate::run(&l, &args, &Bars)
        }
        Command::Q(args) => {
            let mut l = load_config(&args.config, None)?;
            let chosen = backend_for(&mut l, args.device)?;
            on_backend!(chosen, b => commands::q_command(b, &l))
        }
        Command::Run(args) => {
            // A GPU's driver and contexts start while the scan file is read.
            let warm = std::cell::RefCell::new(None);
            let mut l = load_run(&args, &|cfg| {
                *warm.borrow_mut() = recon_pipeline::warm_gpu(&cfg.engine, args.device);
            })?;
            // Before any computation: can the outputs be written?
            let outputs = recon_io::OutputDir::prepare(l.output_dir()?)
                .context("preparing the output folder")?;
            // Everything so far (parsing, the config, the output folder)
            // is the run's set-up; then the device is opened.
            let read = *SCAN_READ.lock().unwrap_or_else(|e| e.into_inner());
            let setup = since_start() - read;
            recon_pipeline::settle(&mut l, args.device, &note)?;
            // The input's hash, for the provenance, while the run computes.
            let input = report::InputHash::start(&l);
            let (engine, cache) = (l.cfg.engine.clone(), config::cache_dir(&l.cfg));
            let open = || recon_pipeline::choose_backend(&engine, &cache, &note);
            // A scan of several images: one config per image, reconstructed in turn.
            let images = pipeline::split(l);
            // The first image's inputs (synthetic data made, or a scan's
            // prepared) while the GPU opens, where memory allows it; the
            // memory is checked in full once the backend is chosen.
            let warm = warm.take();
            let ahead = warm.is_some() && pipeline::inputs_before_device(&images[0].1);
            let (chosen, ahead, t) = std::thread::scope(|s| {
                if !ahead {
                    let t = Instant::now();
                    return (open(), None, t);
                }
                let opening = s.spawn(open);
                let inputs = pipeline::read_first(&images, &Bars);
                // `device`: the wait beyond the inputs.
                let t = Instant::now();
                let chosen = opening
                    .join()
                    .unwrap_or_else(|p| std::panic::resume_unwind(p));
                (chosen, Some(inputs), t)
            });
            let (chosen, ahead) = (chosen?, ahead.transpose()?);
            if let Some(w) = warm {
                // The contexts' extra references, released.
                drop(w.join());
            }
            let device = t.elapsed().as_secs_f64();
            let mut opened = vec![("setup", setup), ("device", device)];
            if read > 0.0 {
                opened.push(("read", read));
            }
            let done =
                on_backend!(&chosen, b => run_pipeline(b, images, ahead, input, outputs, &opened));
            // The process ends here: the driver frees a GPU's context and
            // memory at exit faster than dropping them one by one would (a
            // host goes on, and frees them).
            if !HOSTED.load(std::sync::atomic::Ordering::Relaxed) {
                std::mem::forget(chosen);
            }
            done
        }
    }
}

/// A run's config: the config file and the flags, or the flags alone;
/// `checked` sees the config before its scan file is read.
fn load_run(args: &RunArgs, checked: &dyn Fn(&config::Config)) -> Result<Loaded> {
    let settings = args.settings.settings(args.scan.as_deref());
    if args.config.is_none() && settings.is_empty() {
        anyhow::bail!(
            "nothing to reconstruct: give a scan file (`recon scan.h5 --out DIR`) or a config \
             (`recon --config configs/sodium.toml`)"
        );
    }
    load_and(
        args.config.as_deref(),
        &settings,
        args.out.as_deref(),
        checked,
    )
}

fn run_pipeline<B>(
    backend: &B,
    images: Vec<(recon_io::geometry::Index, Loaded)>,
    ahead: Option<(pipeline::Inputs, f64)>,
    input: report::InputHash,
    outputs: recon_io::OutputDir,
    opened: &[(&'static str, f64)],
) -> Result<()>
where
    B: recon_encoding::NufftBackend,
    B::Real: Stored,
{
    let ui = Bars;
    ui.log(&format!("device: {}", backend.describe()));
    let count = images.len();
    let l = &images[0].1;
    // Before anything large is made (but the first image's inputs, if made
    // while the GPU opened): do the device and the host hold it?
    let held = ahead.as_ref().map_or(0, |(i, _)| i.bytes());
    pipeline::check_memory_holding(backend, l, pipeline::Work::Reconstruct, held)?;
    if count > 1 {
        ui.log(&format!(
            "{count} images in `{}`: {}",
            l.data_name(),
            images
                .iter()
                .map(|(i, _)| i.describe())
                .collect::<Vec<_>>()
                .join("; ")
        ));
    }
    // The kernels the run will launch, compiled (or read from the cache)
    // side by side before the first stage needs one.
    let t = Instant::now();
    ui.stage("kernels", |_| backend.prepare(&pipeline::workload(l)))
        .context("preparing the device's kernels")?;
    let mut before = opened.to_vec();
    before.push(("kernels", t.elapsed().as_secs_f64()));
    let kernels = report::kernels();
    if let Some(why) = kernels.as_ref().and_then(|k| k.not_stored.as_ref()) {
        ui.log(&format!("warning: {why}; the run goes on"));
    }
    // A run of one image writes its truth, gridding and F^H D while it
    // computes; a series writes its files once every image is done.
    let (done, report) = std::thread::scope(|s| {
        let (done, early) = if count == 1 {
            let (index, geometry) = (images[0].0, pipeline::geometry(l));
            let (early, writer) = early::start(s, &outputs, l, index, geometry);
            let done = pipeline::reconstruct_series_from(backend, &images, ahead, &early, &ui);
            (done?, early.close(writer))
        } else {
            let done =
                pipeline::reconstruct_series_from(backend, &images, ahead, &pipeline::AtEnd, &ui);
            (done?, early::Pending::none())
        };
        let report = stage_outputs(l, &done, early, input, &outputs, before, kernels)?;
        anyhow::Ok((done, report))
    })?;
    let files = output::commit(outputs)?;
    summary(l, &done, &report, &files)?;
    // The process ends here: its memory goes back with it, faster than
    // freeing the images' gigabytes one allocation at a time would (1.2 s
    // of a 256^3 run's wall time on the GPU machine). A host goes on, and
    // frees them.
    if !HOSTED.load(std::sync::atomic::Ordering::Relaxed) {
        std::mem::forget(done);
        std::mem::forget(images);
    }
    Ok(())
}

/// Writes a run's outputs into the staging folder `outputs`, from its
/// images `done` (`early`: what was written of them while they were
/// computed); returns its report.
fn stage_outputs(
    l: &Loaded,
    done: &[pipeline::Image],
    early: early::Pending<'_>,
    input: report::InputHash,
    outputs: &recon_io::OutputDir,
    mut before: Vec<(&'static str, f64)>,
    kernels: Option<recon_cuda::KernelStats>,
) -> Result<report::Report> {
    let ui = Bars;
    let count = done.len();
    let first = &done[0];
    ui.log(&format!(
        "{} {} samples of `{}` on a {:?} grid{}",
        match l.source {
            config::Source::Synthetic { .. } => "synthesised",
            config::Source::Scan(_) => "read",
        },
        first.inputs.traj.len(),
        l.data_name(),
        l.grid.n,
        if count > 1 { " per image" } else { "" }
    ));
    let indices: Vec<_> = done.iter().map(|i| i.index).collect();
    let arrangement = arrange::Arrangement::of(&indices);
    // The provenance first (`recon.h5` carries it); the report's figures
    // while the files are written.
    let t = Instant::now();
    let provenance = report::provenance(l, &first.out, input)?;
    let provenance_json = serde_json::to_string(&provenance)?;
    before.push(("report", t.elapsed().as_secs_f64()));
    let make_report = || report::report(l, done, &arrangement, &before, kernels, provenance);
    output::write(
        outputs,
        l,
        done,
        &arrangement,
        &provenance_json,
        early,
        make_report,
    )
}

/// The run's summary, on one screen.
fn summary(
    l: &Loaded,
    done: &[pipeline::Image],
    report: &report::Report,
    files: &[String],
) -> Result<()> {
    let count = done.len();
    if ui::verbosity() == ui::Verbosity::Verbose {
        // What follows (the summary, freeing memory, the process's exit)
        // is outside the report's total.
        eprintln!("outputs in place {:.3} s after the start", since_start());
    }

    // One-screen summary.
    println!(
        "recon: {} ({}; Q and F^H D by {})",
        l.path.display(),
        report.device,
        report.engine
    );
    println!(
        "  data {}, {} samples{}, matrix {:?}, FOV {:?} mm, noise sigma {}",
        report.data,
        report.samples,
        if count > 1 {
            format!(" in each of {count} images")
        } else {
            String::new()
        },
        report.matrix,
        report.fov_mm,
        report
            .noise_sigma
            .map_or("unknown (no noise data)".to_string(), |s| format!(
                "{s:.3e}"
            ))
    );
    let (unit, prior) = if report.prior_kind.sparse() {
        (
            "peak |F^H D|",
            format!("prior {}", report.prior_kind.name()),
        )
    } else {
        (
            "peak Q",
            format!("W {}", format!("{:?}", report.regulariser).to_lowercase()),
        )
    };
    println!(
        "  {}: {} iterations{}, relative residual {:.3e}, lambda {:.4} x {unit} = {:.3e} ({}), {prior}{}",
        report.algorithm.describe(),
        report.iterations,
        match report.passes.len() {
            0 | 1 => String::new(),
            _ => format!(" in {} passes ({:?})", report.passes.len(), report.passes),
        },
        report.relative_residual,
        report.lambda,
        report.lambda_abs,
        report.lambda_rule,
        if count > 1 { " (first image)" } else { "" }
    );
    println!("  Q cache: {}", report.q_cache);
    for (image, quality) in done.iter().zip(&report.quality) {
        if count > 1 {
            println!(
                "  {}: {} iterations, relative residual {:.3e}{}",
                image.index.describe(),
                image.out.info.iterations,
                image.out.info.relative_residual,
                match (image.batch, image.shared) {
                    (1, true) => ", plan and Q shared with the image before".to_string(),
                    (1, false) => String::new(),
                    (n, _) => format!(", solved with {} others in one batch", n - 1),
                }
            );
        }
        match quality {
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
            _ if count == 1 => println!("  no true image in the scan file: PSNR not computed"),
            _ => {}
        }
    }
    let secs: Vec<String> = report
        .seconds
        .iter()
        .map(|(k, v)| format!("{k} {v:.2}"))
        .collect();
    println!("  seconds: {}", secs.join(", "));
    println!(
        "  wrote {} in {}",
        files.join(", "),
        l.output_dir()?.display()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{error_chain, run_hosted};

    /// This process's resident memory, bytes.
    fn resident() -> u64 {
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let kib: u64 = status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap();
        kib << 10
    }

    // The binary leaves its images to the process's exit; a host (the
    // Python package's batch, a scan per run) must get them back.
    #[test]
    fn a_hosted_run_gives_its_images_back() {
        let tmp = tempfile::tempdir().unwrap();
        let shipped = concat!(env!("CARGO_MANIFEST_DIR"), "/../../configs/test-small.toml");
        let text = std::fs::read_to_string(shipped).unwrap();
        // 64^3 in f64: each run's images (iterative, gridding, F^H D and
        // the truth) are 14 MiB.
        let cfg = tmp.path().join("test-small.toml");
        std::fs::write(
            &cfg,
            text.replace("matrix = 16", "matrix = 64").replace(
                "../phantoms/",
                &format!("{}/../../phantoms/", env!("CARGO_MANIFEST_DIR")),
            ),
        )
        .unwrap();
        let run = |i: usize| {
            let out = tmp.path().join(format!("out-{i}"));
            let args: Vec<String> = [
                "--config",
                cfg.to_str().unwrap(),
                "--out",
                out.to_str().unwrap(),
                "-q",
            ]
            .iter()
            .map(|s| s.to_string())
            .collect();
            run_hosted(&args).unwrap();
        };
        // Two runs first: the allocator's pools and the Q cache settle.
        run(0);
        run(1);
        let before = resident();
        for i in 2..8 {
            run(i);
        }
        let grown = resident().saturating_sub(before) as f64 / (1 << 20) as f64;
        // Six runs kept would be 84 MiB or more; given back, what the
        // allocator keeps of them is a run's worth at most.
        assert!(grown < 40.0, "{grown:.1} MiB more after six runs");
    }

    #[test]
    fn an_error_chain_says_each_cause_once() {
        // A context that its cause repeats at its start.
        let inner = anyhow::anyhow!("conjugate gradient: p^H A p = NaN at iteration 1");
        let e = inner.context("conjugate gradient");
        assert_eq!(
            error_chain(&e),
            "conjugate gradient: p^H A p = NaN at iteration 1"
        );
        // A cause the message already holds, and one it does not.
        let e = anyhow::anyhow!("No such file").context("cannot read x: No such file");
        assert_eq!(error_chain(&e), "cannot read x: No such file");
        let e = anyhow::anyhow!("disk full").context("writing recon.h5");
        assert_eq!(error_chain(&e), "writing recon.h5: disk full");
    }
}
