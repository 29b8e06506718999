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
mod run;
mod ui;
mod validate;

pub use recon_pipeline as pipeline;
pub use recon_pipeline::config;
pub(crate) use ui::Bars;

use anyhow::Result;
use clap::Parser;
use cli::{Cli, Command};
use config::{DeviceChoice, Loaded};
pub(crate) use recon_pipeline::{on_backend, Chosen};
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

/// Leaves `v` to the process's exit, which gives its memory back faster
/// than freeing it one allocation at a time would (1.2 s of a 256^3 run's
/// wall time on the GPU machine; a GPU's context and memory likewise); a
/// host goes on, and frees it.
pub(crate) fn leave_to_exit<T>(v: T) {
    if HOSTED.load(std::sync::atomic::Ordering::Relaxed) {
        drop(v);
    } else {
        std::mem::forget(v);
    }
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
        Command::Run(args) => run::run(args),
    }
}

#[cfg(test)]
mod tests {
    use super::error_chain;

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
