//! Reading untrusted input files in a child process.
//!
//! Scan files and ISMRMRD files are HDF5, and the HDF5 library can crash
//! (a corrupted global heap: SIGSEGV) or loop forever (a corrupted B-tree)
//! on a damaged file, in the system's 1.10 and in current releases alike.
//! No check of ours can run before the library parses the file, so recon
//! reads such files in a child process (`recon read-input`, hidden) with a
//! time limit: the child checks everything, then hands the scan to the
//! parent as bytes ([`recon_io::scan::Scan::to_bytes`]). A crash, a hang or
//! an abort of the child becomes an error naming the file; the parent
//! never loads the untrusted file into its own HDF5 library.
//!
//! `recon inspect FILE` reads a file this way and prints what it holds.

use anyhow::{Context, Result};
use recon_io::scan::Scan;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The trajectory units of an ISMRMRD file (scan files are cycles/FOV).
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnitsArg {
    Normalized,
    CyclesPerFov,
}

#[derive(clap::Args, Debug, Clone)]
pub struct InspectArgs {
    /// A scan file or an ISMRMRD file.
    pub file: PathBuf,
    /// ISMRMRD only: the trajectory's units.
    #[arg(long, value_enum, default_value = "normalized")]
    pub trajectory_units: UnitsArg,
    /// Accept samples beyond Nyquist.
    #[arg(long)]
    pub allow_beyond_nyquist: bool,
}

#[derive(clap::Args, Debug, Clone)]
pub struct ReadInputArgs {
    pub file: PathBuf,
    #[arg(long, value_enum)]
    pub trajectory_units: UnitsArg,
    #[arg(long)]
    pub allow_beyond_nyquist: bool,
}

/// What kind of file was read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Scan,
    Ismrmrd,
}

/// The child's side: reads and checks the file in this process, and writes
/// the outcome to stdout: `K` (kind byte) and the scan's bytes, or `E` and
/// the error's text.
pub fn read_input(args: &ReadInputArgs) -> Result<()> {
    let outcome = read_here(&args.file, args.trajectory_units, args.allow_beyond_nyquist);
    let mut out = std::io::stdout().lock();
    match outcome {
        Ok((kind, scan)) => {
            out.write_all(match kind {
                Kind::Scan => b"S",
                Kind::Ismrmrd => b"I",
            })?;
            out.write_all(&scan.to_bytes())?;
        }
        Err(e) => {
            out.write_all(b"E")?;
            out.write_all(crate::error_chain(&e).as_bytes())?;
        }
    }
    out.flush()?;
    Ok(())
}

/// Reads and checks the file in this process (only ever in the child).
fn read_here(path: &Path, units: UnitsArg, allow_beyond_nyquist: bool) -> Result<(Kind, Scan)> {
    if recon_io::ismrmrd::is_ismrmrd(path) {
        let units = match units {
            UnitsArg::Normalized => recon_io::ismrmrd::Units::Normalized,
            UnitsArg::CyclesPerFov => recon_io::ismrmrd::Units::CyclesPerFov,
        };
        let s = recon_io::ismrmrd::read_ismrmrd(path, units, allow_beyond_nyquist)?;
        Ok((Kind::Ismrmrd, s))
    } else {
        Ok((
            Kind::Scan,
            recon_io::scan::read_scan(path, allow_beyond_nyquist)?,
        ))
    }
}

/// How long a reader may take: `RECON_READ_TIMEOUT_S` if set, else a
/// minute plus a second per 10 MB of file (far more than a healthy read
/// needs; a looping library never ends).
fn time_limit(path: &Path) -> Duration {
    if let Some(s) = std::env::var_os("RECON_READ_TIMEOUT_S") {
        if let Ok(s) = s.to_string_lossy().parse::<f64>() {
            if s.is_finite() && s > 0.0 {
                return Duration::from_secs_f64(s);
            }
        }
    }
    let bytes = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
    Duration::from_secs(60 + bytes / 10_000_000)
}

/// The parent's side: reads `path` in a child process with a time limit.
pub fn read_isolated(
    path: &Path,
    units: UnitsArg,
    allow_beyond_nyquist: bool,
) -> Result<(Kind, Scan)> {
    // Errors a user can act on without starting a process.
    let meta =
        std::fs::metadata(path).with_context(|| format!("cannot read {}", path.display()))?;
    if meta.is_dir() {
        anyhow::bail!("{} is a folder, not a scan file", path.display());
    }
    let exe = std::env::current_exe().context("finding recon's own executable")?;
    let mut cmd = Command::new(exe);
    cmd.arg("read-input")
        .arg(path)
        .arg("--trajectory-units")
        .arg(match units {
            UnitsArg::Normalized => "normalized",
            UnitsArg::CyclesPerFov => "cycles-per-fov",
        });
    if allow_beyond_nyquist {
        cmd.arg("--allow-beyond-nyquist");
    }
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("starting the reader process")?;
    // Drain both pipes on threads, so a large scan never blocks the child.
    let mut stdout = child.stdout.take().expect("piped");
    let mut stderr = child.stderr.take().expect("piped");
    let out = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = stdout.read_to_end(&mut v);
        v
    });
    let err = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = stderr.read_to_end(&mut v);
        v
    });
    let limit = time_limit(path);
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().context("waiting for the reader process")? {
            break s;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            anyhow::bail!(
                "reading {} did not finish within {:.0} s: the file is probably corrupt \
                 (the HDF5 library loops on some damaged files); RECON_READ_TIMEOUT_S sets the limit",
                path.display(),
                limit.as_secs_f64()
            );
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let out = out.join().unwrap_or_default();
    let err = err.join().unwrap_or_default();
    if !status.success() {
        use std::os::unix::process::ExitStatusExt;
        let why = match status.signal() {
            Some(sig) => format!(
                "the reader crashed with signal {sig} ({}) inside the HDF5 library",
                signal_name(sig)
            ),
            None => format!("the reader failed (exit status {:?})", status.code()),
        };
        let detail = String::from_utf8_lossy(&err);
        let detail = detail.trim();
        anyhow::bail!(
            "cannot read {}: {why}: the file is corrupt or not a scan file{}",
            path.display(),
            if detail.is_empty() {
                String::new()
            } else {
                format!(" ({})", detail.lines().last().unwrap_or_default())
            }
        );
    }
    match out.split_first() {
        Some((b'E', msg)) => Err(anyhow::anyhow!("{}", String::from_utf8_lossy(msg))),
        Some((k @ (b'S' | b'I'), bytes)) => {
            let scan =
                Scan::from_bytes(bytes).context("the reader process returned a malformed scan")?;
            Ok((
                if *k == b'S' {
                    Kind::Scan
                } else {
                    Kind::Ismrmrd
                },
                scan,
            ))
        }
        _ => anyhow::bail!("the reader process returned nothing for {}", path.display()),
    }
}

fn signal_name(sig: i32) -> &'static str {
    match sig {
        libc_sig::SIGSEGV => "SIGSEGV",
        libc_sig::SIGABRT => "SIGABRT",
        libc_sig::SIGBUS => "SIGBUS",
        libc_sig::SIGFPE => "SIGFPE",
        libc_sig::SIGILL => "SIGILL",
        libc_sig::SIGKILL => "SIGKILL",
        _ => "signal",
    }
}

/// Linux signal numbers.
mod libc_sig {
    pub const SIGILL: i32 = 4;
    pub const SIGABRT: i32 = 6;
    pub const SIGBUS: i32 = 7;
    pub const SIGFPE: i32 = 8;
    pub const SIGKILL: i32 = 9;
    pub const SIGSEGV: i32 = 11;
}

/// `recon inspect`: reads a file as a run would and prints what it holds.
pub fn run(args: &InspectArgs) -> Result<()> {
    let (kind, s) = read_isolated(&args.file, args.trajectory_units, args.allow_beyond_nyquist)?;
    let kmax = s
        .traj
        .iter()
        .flat_map(|k| k.iter().map(|v| v.abs()))
        .fold(0.0, f64::max);
    println!(
        "{}: {} file, {} samples, matrix {:?}, FOV {:?} mm, largest |k| {kmax:.3} cycles/FOV",
        args.file.display(),
        match kind {
            Kind::Scan => "scan",
            Kind::Ismrmrd => "ISMRMRD",
        },
        s.traj.len(),
        s.grid.n,
        s.grid.fov_mm
    );
    println!(
        "  truth: {}; anatomy: {}",
        if s.truth.is_some() { "yes" } else { "no" },
        s.anatomy.as_ref().map_or("no".to_string(), |a| format!(
            "{:?} over {:?} mm",
            a.grid.n, a.grid.fov_mm
        ))
    );
    println!(
        "  coils: {}; noise: {}; maps: {}",
        s.coils,
        match &s.noise {
            None => "none".to_string(),
            Some(recon_io::scan::CoilNoise::Samples(v)) => {
                format!("{} samples per coil", v.len() / s.coils.max(1))
            }
            Some(recon_io::scan::CoilNoise::Covariance(_)) => "covariance".to_string(),
        },
        if s.maps.is_some() { "yes" } else { "no" }
    );
    if let Some(w) = units_warning(kind, args.trajectory_units, &s) {
        eprintln!("warning: {w}");
    }
    Ok(())
}

/// A warning when an ISMRMRD trajectory read as cycles/FOV looks normalised.
pub fn units_warning(kind: Kind, units: UnitsArg, s: &Scan) -> Option<String> {
    let kmax = s
        .traj
        .iter()
        .flat_map(|k| k.iter().map(|v| v.abs()))
        .fold(0.0, f64::max);
    (kind == Kind::Ismrmrd && units == UnitsArg::CyclesPerFov && kmax <= 0.5).then(|| {
        format!(
            "every |k| is at most {kmax:.3} cycles/FOV: the trajectory looks normalised \
             (cycles per pixel); with trajectory_units = \"cycles_per_fov\" the image will be \
             a blur of the k-space centre. Use \"normalized\" if so"
        )
    })
}
