//! The command line's arguments: `recon SCAN` and `recon --config C` with
//! their flags, and each subcommand's own. [`SettingArgs`] turns the flags
//! into the config's settings ([`crate::config::Settings`]).

use crate::config::{self, DeviceChoice};
use crate::{bench, bench_nufft, bench_sense, import, inspect, parboil, reader, validate};
use clap::{Parser, Subcommand};
use std::path::PathBuf;

#[derive(Parser)]
#[command(
    name = "recon",
    version,
    about = "Iterative non-Cartesian MRI reconstruction, 2-D and 3-D",
    args_conflicts_with_subcommands = true
)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Option<Command>,
    /// Say nothing on stderr but warnings and errors (no progress).
    #[arg(short, long, global = true, conflicts_with = "verbose")]
    pub(crate) quiet: bool,
    /// Progress as log lines, every CG iteration's residual.
    #[arg(short, long, global = true)]
    pub(crate) verbose: bool,
    /// The default command's arguments (`recon --config X` is `recon run --config X`).
    #[command(flatten)]
    pub(crate) run: RunArgs,
}

/// A reconstruction's arguments.
#[derive(clap::Args, Debug, Clone, Default)]
pub(crate) struct RunArgs {
    /// The scan file to reconstruct (a scan file or an ISMRMRD file):
    /// `scan.file`, with the defaults for every other key.
    pub(crate) scan: Option<PathBuf>,
    /// TOML configuration, a protocol whose values the flags override
    /// (see configs/).
    #[arg(long)]
    pub(crate) config: Option<PathBuf>,
    /// Output folder, overriding `output.dir`.
    #[arg(long)]
    pub(crate) out: Option<PathBuf>,
    /// Where to compute, overriding `engine.device`.
    #[arg(long, value_enum)]
    pub(crate) device: Option<DeviceChoice>,
    #[command(flatten)]
    pub(crate) settings: SettingArgs,
}

/// The common settings as flags, and any config key by `--set`.
#[derive(clap::Args, Debug, Clone, Default)]
pub(crate) struct SettingArgs {
    /// `solver.lambda`: the prior's weight, relative to the data term's
    /// diagonal; or `auto` (the default: the discrepancy principle) or
    /// `gcv` (generalised cross-validation), chosen without a truth.
    #[arg(long, value_parser = parse_lambda)]
    pub(crate) lambda: Option<String>,
    /// `solver.iterations`.
    #[arg(long)]
    pub(crate) iterations: Option<usize>,
    /// `prior.kind`: quadratic, tv, dtv or wavelet.
    #[arg(long)]
    pub(crate) prior: Option<String>,
    /// `engine.threads`: CPU threads (0: every core).
    #[arg(long)]
    pub(crate) threads: Option<usize>,
    /// Also write the image for another tool: `cfl` (BART's recon.cfl
    /// and recon.hdr; `output.cfl`). Repeatable.
    #[arg(long, value_enum)]
    pub(crate) export: Vec<Export>,
    /// Any config key, `section.key=value` (repeatable; a TOML value, or
    /// text): `--set sense.maps=espirit --set scan.slices=[0,2]`.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub(crate) set: Vec<String>,
}

/// The formats `--export` writes.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Export {
    Cfl,
}

impl RunArgs {
    /// No argument at all.
    pub(crate) fn is_bare(&self) -> bool {
        self.scan.is_none()
            && self.config.is_none()
            && self.out.is_none()
            && self.device.is_none()
            && self.settings.settings(None).is_empty()
    }
}

impl SettingArgs {
    /// The flags as the config's settings, after `scan` (`scan.file`).
    pub(crate) fn settings(&self, scan: Option<&std::path::Path>) -> config::Settings {
        let mut set = Vec::new();
        if let Some(v) = &self.lambda {
            set.push(format!("solver.lambda={v}"));
        }
        if let Some(v) = self.iterations {
            set.push(format!("solver.iterations={v}"));
        }
        if let Some(v) = &self.prior {
            set.push(format!("prior.kind={v:?}"));
        }
        if let Some(v) = self.threads {
            set.push(format!("engine.threads={v}"));
        }
        for e in &self.export {
            match e {
                Export::Cfl => set.push("output.cfl=true".into()),
            }
        }
        set.extend(self.set.iter().cloned());
        config::Settings {
            scan: scan.map(|p| p.to_path_buf()),
            set,
        }
    }
}

/// `--lambda`: a number (kept as written) or `auto`.
fn parse_lambda(s: &str) -> Result<String, String> {
    match s {
        "auto" | "gcv" => Ok(s.into()),
        _ => match s.parse::<f64>() {
            Ok(v) if v.is_finite() && v >= 0.0 => Ok(format!("{v:?}")),
            _ => Err("expected a number >= 0, auto or gcv".into()),
        },
    }
}

/// `recon q`'s arguments: no output folder (Q goes to the cache).
#[derive(clap::Args, Debug, Clone)]
pub(crate) struct QArgs {
    /// TOML configuration (see configs/).
    #[arg(long)]
    pub(crate) config: PathBuf,
    /// Where to compute, overriding `engine.device`.
    #[arg(long, value_enum)]
    pub(crate) device: Option<DeviceChoice>,
}

/// `recon batch`'s arguments.
#[derive(clap::Args, Debug, Clone)]
pub(crate) struct BatchArgs {
    /// The manifest (TOML): the scans, their settings and output folders.
    pub(crate) manifest: PathBuf,
    /// A Dask scheduler's address (default: a local cluster, one worker
    /// per GPU or per CPU socket).
    #[arg(long)]
    pub(crate) scheduler: Option<String>,
    /// The Python that has the package (default: `$RECON_PYTHON`, else
    /// `python3`).
    #[arg(long)]
    pub(crate) python: Option<PathBuf>,
}

/// `recon check`'s arguments: those of a run.
pub(crate) type CheckArgs = RunArgs;

/// `recon simulate`'s arguments.
#[derive(clap::Args, Debug, Clone)]
pub(crate) struct SimulateArgs {
    /// TOML configuration with synthetic data ([grid], [phantom], [trajectory]).
    #[arg(long)]
    pub(crate) config: PathBuf,
    /// The scan file to write (HDF5, e.g. scan.h5), written only when complete.
    #[arg(long)]
    pub(crate) out: PathBuf,
}

#[derive(Subcommand)]
pub(crate) enum Command {
    /// Synthesise or read, reconstruct and report (the default).
    Run(RunArgs),
    /// Precompute Q for the config's trajectory into the cache, and stop.
    Q(QArgs),
    /// Write the config's synthetic data as a scan file.
    Simulate(SimulateArgs),
    /// Write a scan file from BART's cfl/hdr files or NumPy's npy/npz
    /// arrays (trajectory, k-space, noise), with the matrix and FOV given.
    Import(import::ImportArgs),
    /// Run the config through every engine, noiseless and noisy, with gridding.
    Validate(validate::ValidateArgs),
    /// Time the book's reference problem: each GPU variant, then each
    /// engine's Q, F^H D and CG.
    Bench(bench::BenchArgs),
    /// Time the NUFFT engine on the CPU or GPU: on a scan file's trajectory
    /// (plan, F^H D, F and Q, as scripts/nufft-vs-finufft.py compares it
    /// with FINUFFT), or on random points.
    BenchNufft(bench_nufft::BenchNufftArgs),
    /// Time SENSE per scan: a radial problem seen by synthetic coils (maps,
    /// F^H D over the coils, CG of the SENSE operator).
    BenchSense(bench_sense::BenchSenseArgs),
    /// Q for a Parboil mri-q input file, in Parboil's output format.
    ParboilQ(parboil::ParboilArgs),
    /// Read a scan or ISMRMRD file, check it, and print what it holds.
    Inspect(inspect::InspectArgs),
    /// Check a config (and the files it names, the memory the run needs and
    /// the output folder) without computing anything.
    Check(CheckArgs),
    /// Reconstruct every scan of a manifest, one Dask task each, through
    /// the Python package (`pip install ./python`; `python -m pydoc
    /// recon.batch` describes the manifest).
    Batch(BatchArgs),
    /// Internal: reads an untrusted input file for the parent process.
    #[command(hide = true, name = "read-input")]
    ReadInput(reader::ReadInputArgs),
}
