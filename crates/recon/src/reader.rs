//! Reading untrusted input files in a child process.
//!
//! Scan files and ISMRMRD files are HDF5, and the HDF5 library can crash
//! (a corrupted global heap: SIGSEGV) or loop forever (a corrupted B-tree)
//! on a damaged file: the 1.10 that recon links does both, and 2.2 still
//! loops (bench/hdf5-2.2-vs-1.10-2026-11-24.md).
//! No check of ours can run before the library parses the file, so recon
//! reads such files in a child process (`recon read-input`, hidden): the
//! child checks everything, then streams the scan to the parent
//! ([`recon_io::scan::Scan::write_to`]). A crash, a hang or an abort of the
//! child becomes an error naming the file and the cause; the parent never
//! loads the untrusted file into its own HDF5 library.
//!
//! The child never outlives the parent: it is killed when the parent dies
//! (`PR_SET_PDEATHSIG`, checked against a parent that died before it was
//! set), the parent's interrupt handler kills it ([`stop_reader`]), it
//! installs no handler of its own (a signal ends it at once), it runs in its
//! own process group (Ctrl-C reaches the parent, which ends it), and it
//! enforces its own time limit with a watchdog thread.
//!
//! The child tells the parent, on its stdout, records of one tag byte:
//! `L`, a float64 and a u64 (the time limit in seconds, grown once the
//! file's declared size is known, and that size in bytes: reading its data
//! begins), then `S` or `I` (a scan or ISMRMRD file) and the scan's
//! encoding, or `E` and an error's text.

use anyhow::{Context, Result};
use recon_io::scan::{ReadOptions, Scan};
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub use recon_pipeline::scan::{Kind, Units as UnitsArg};

#[derive(clap::Args, Debug, Clone)]
pub struct ReadInputArgs {
    pub file: PathBuf,
    #[arg(long, value_enum)]
    pub trajectory_units: UnitsArg,
    #[arg(long)]
    pub allow_beyond_nyquist: bool,
    /// Seconds the read may take (before the declared size is known).
    #[arg(long)]
    pub time_limit_s: f64,
    /// Keep the limit fixed (RECON_READ_TIMEOUT_S), not grown with the size.
    #[arg(long)]
    pub fixed_limit: bool,
}

/// The longest time limit `RECON_READ_TIMEOUT_S` may set: a day.
pub const MAX_READ_TIMEOUT_S: f64 = 86_400.0;

/// The default limit: a minute, plus a second per [`BYTES_PER_SECOND`]
/// the file holds or declares (far more than a healthy read needs; a
/// looping library never ends).
const BASE_LIMIT_S: f64 = 60.0;
const BYTES_PER_SECOND: f64 = 20e6;

/// The child's exit status when its own time limit ends it.
const EXIT_TIME_LIMIT: i32 = 124;

/// A grace the parent adds to the child's limit before it kills the child
/// itself (the child's watchdog ends it first).
const GRACE: Duration = Duration::from_secs(5);

/// The time limit a read starts with.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Limit {
    seconds: f64,
    /// Set by `RECON_READ_TIMEOUT_S`: not grown with the file's size.
    fixed: bool,
}

/// `RECON_READ_TIMEOUT_S`, checked: a positive, finite number of seconds up
/// to [`MAX_READ_TIMEOUT_S`]; `None` when unset.
fn limit_from_env() -> Result<Option<f64>> {
    let Some(raw) = std::env::var_os("RECON_READ_TIMEOUT_S") else {
        return Ok(None);
    };
    let text = raw.to_string_lossy();
    match text.trim().parse::<f64>() {
        Ok(s) if s.is_finite() && s > 0.0 && s <= MAX_READ_TIMEOUT_S => Ok(Some(s)),
        _ => anyhow::bail!(
            "RECON_READ_TIMEOUT_S = {text:?}: the reader's time limit must be a positive number \
             of seconds, at most {MAX_READ_TIMEOUT_S} (a day); unset it for the default (a minute \
             plus a second per 20 MB of the file)"
        ),
    }
}

/// The limit a read of `path` starts with.
fn start_limit(path: &Path) -> Result<Limit> {
    Ok(match limit_from_env()? {
        Some(seconds) => Limit {
            seconds,
            fixed: true,
        },
        None => {
            let bytes = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
            Limit {
                seconds: scaled_limit(bytes),
                fixed: false,
            }
        }
    })
}

fn scaled_limit(bytes: u64) -> f64 {
    BASE_LIMIT_S + bytes as f64 / BYTES_PER_SECOND
}

/// The reader child running now (0: none), for [`stop_reader`].
static CHILD: AtomicI32 = AtomicI32::new(0);

/// Kills the reader child, if one is running: for the interrupt handler,
/// before the process exits.
pub fn stop_reader() {
    let pid = CHILD.swap(0, Ordering::SeqCst);
    if pid > 0 {
        // SAFETY: kill sends a signal; pid is our own child's.
        unsafe {
            libc::kill(pid, libc::SIGKILL);
        }
    }
}

/// The child's side: reads and checks the file in this process, with its
/// own time limit, and writes the records to stdout.
pub fn read_input(args: &ReadInputArgs) -> Result<()> {
    let start = Instant::now();
    let limit_ms = Arc::new(AtomicU64::new((args.time_limit_s * 1000.0) as u64));
    {
        let limit_ms = Arc::clone(&limit_ms);
        std::thread::spawn(move || loop {
            let limit = Duration::from_millis(limit_ms.load(Ordering::SeqCst));
            let elapsed = start.elapsed();
            if elapsed >= limit {
                eprintln!(
                    "the reader's time limit of {:.0} s ran out",
                    limit.as_secs_f64()
                );
                // SAFETY: ends the process at once; no destructor or atexit
                // handler runs (HDF5's would wait for the looping thread).
                unsafe { libc::_exit(EXIT_TIME_LIMIT) };
            }
            std::thread::sleep((limit - elapsed).min(Duration::from_millis(100)));
        });
    }
    let on_declared = |bytes: u64| {
        let seconds = if args.fixed_limit {
            args.time_limit_s
        } else {
            args.time_limit_s.max(scaled_limit(bytes))
        };
        limit_ms.store((seconds * 1000.0) as u64, Ordering::SeqCst);
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(b"L");
        let _ = out.write_all(&seconds.to_le_bytes());
        let _ = out.write_all(&bytes.to_le_bytes());
        let _ = out.flush();
    };
    let opts = ReadOptions {
        allow_beyond_nyquist: args.allow_beyond_nyquist,
        // SAFETY: getppid cannot fail.
        handed_to: Some(unsafe { libc::getppid() } as u32),
        on_declared: Some(&on_declared),
    };
    let outcome = recon_pipeline::read_scan(&args.file, args.trajectory_units, &opts);
    let mut out = BufWriter::with_capacity(1 << 20, std::io::stdout().lock());
    match outcome {
        Ok((kind, scan)) => {
            out.write_all(match kind {
                Kind::Scan => b"S",
                Kind::Ismrmrd => b"I",
            })?;
            scan.write_to(&mut out)?;
        }
        Err(e) => {
            out.write_all(b"E")?;
            out.write_all(crate::error_chain(&e.into()).as_bytes())?;
        }
    }
    out.flush()?;
    Ok(())
}

/// What the child sent on stdout.
enum Outcome {
    Scan(Kind, std::io::Result<Scan>),
    Error(String),
    Nothing,
}

/// Reads the child's records: limits as they come (into `limit_ms`, and
/// the declared size into `declared`, `u64::MAX` until known), then its
/// outcome, decoded as it streams in.
fn receive(out: impl Read, limit_ms: &AtomicU64, declared: &AtomicU64) -> Outcome {
    let mut r = BufReader::with_capacity(1 << 20, out);
    loop {
        let mut tag = [0u8; 1];
        if r.read_exact(&mut tag).is_err() {
            return Outcome::Nothing;
        }
        match tag[0] {
            b'L' => {
                let mut b = [0u8; 16];
                if r.read_exact(&mut b).is_err() {
                    return Outcome::Nothing;
                }
                let (seconds, bytes) = b.split_at(8);
                let seconds = f64::from_le_bytes(seconds.try_into().expect("8 bytes"));
                limit_ms.store((seconds * 1000.0) as u64, Ordering::SeqCst);
                declared.store(
                    u64::from_le_bytes(bytes.try_into().expect("8 bytes")),
                    Ordering::SeqCst,
                );
            }
            k @ (b'S' | b'I') => {
                let kind = if k == b'S' { Kind::Scan } else { Kind::Ismrmrd };
                return Outcome::Scan(kind, Scan::read_from(&mut r));
            }
            b'E' => {
                let mut msg = String::new();
                let _ = r.read_to_string(&mut msg);
                return Outcome::Error(msg);
            }
            _ => return Outcome::Nothing,
        }
    }
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
    let limit = start_limit(path)?;
    let exe = std::env::current_exe().context("finding recon's own executable")?;
    let mut cmd = Command::new(exe);
    cmd.arg("read-input")
        .arg(path)
        .arg("--trajectory-units")
        .arg(match units {
            UnitsArg::Normalized => "normalized",
            UnitsArg::CyclesPerFov => "cycles-per-fov",
        })
        .arg("--time-limit-s")
        .arg(limit.seconds.to_string());
    if allow_beyond_nyquist {
        cmd.arg("--allow-beyond-nyquist");
    }
    if limit.fixed {
        cmd.arg("--fixed-limit");
    }
    let parent = std::process::id() as libc::pid_t;
    // SAFETY: runs in the forked child before exec, and calls only
    // async-signal-safe functions (prctl, getppid, setpgid, _exit). The
    // death signal is sent when the thread that forked ends: recon reads
    // its inputs on the main thread, which ends only with the process.
    unsafe {
        use std::os::unix::process::CommandExt;
        cmd.pre_exec(move || {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            if libc::getppid() != parent {
                libc::_exit(1); // the parent died before the signal was set
            }
            libc::setpgid(0, 0);
            Ok(())
        });
    }
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("starting the reader process")?;
    CHILD.store(child.id() as i32, Ordering::SeqCst);
    // Both pipes drained on threads, so a large scan never blocks the child.
    let limit_ms = Arc::new(AtomicU64::new((limit.seconds * 1000.0) as u64));
    let declared = Arc::new(AtomicU64::new(u64::MAX));
    let stdout = child.stdout.take().expect("piped");
    let mut stderr = child.stderr.take().expect("piped");
    // Under a tight memory limit a thread may not start: an error (and the
    // reader process stopped), where std::thread::spawn would panic.
    let threads = (|| -> std::io::Result<_> {
        let (limit_ms, declared) = (Arc::clone(&limit_ms), Arc::clone(&declared));
        let out =
            std::thread::Builder::new().spawn(move || receive(stdout, &limit_ms, &declared))?;
        let err = std::thread::Builder::new().spawn(move || {
            let mut v = Vec::new();
            let _ = stderr.read_to_end(&mut v);
            v
        })?;
        Ok((out, err))
    })();
    let (out, err) = match threads {
        Ok(t) => t,
        Err(e) => {
            let _ = child.kill();
            let _ = child.wait();
            CHILD.store(0, Ordering::SeqCst);
            return Err(anyhow::Error::new(e)
                .context("starting the threads that read the reader process's output"));
        }
    };
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().context("waiting for the reader process")? {
            break Some(s);
        }
        let allowed = Duration::from_millis(limit_ms.load(Ordering::SeqCst)) + GRACE;
        if start.elapsed() > allowed {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    CHILD.store(0, Ordering::SeqCst);
    let out = out.join().unwrap_or(Outcome::Nothing);
    let err = err.join().unwrap_or_default();
    let seconds = limit_ms.load(Ordering::SeqCst) as f64 / 1000.0;
    let declared = match declared.load(Ordering::SeqCst) {
        u64::MAX => None,
        b => Some(b),
    };
    let timed_out = || time_limit_error(path, limit, seconds, declared);
    let Some(status) = status else {
        return Err(timed_out());
    };
    if status.code() == Some(EXIT_TIME_LIMIT) {
        return Err(timed_out());
    }
    if !status.success() {
        return Err(failure(path, status, &String::from_utf8_lossy(&err)));
    }
    match out {
        Outcome::Error(msg) => Err(anyhow::anyhow!("{msg}")),
        Outcome::Scan(kind, scan) => Ok((
            kind,
            scan.context("the reader process returned a malformed scan")?,
        )),
        Outcome::Nothing => {
            anyhow::bail!("the reader process returned nothing for {}", path.display())
        }
    }
}

/// The error for a read that ran past its limit, naming the limit and the
/// likely cause: the reader was still parsing the file's structure (where
/// HDF5 loops on damaged files), or reading data so small that a healthy
/// disk would have read them long before (damaged too), or a large file on
/// a slow disk.
fn time_limit_error(
    path: &Path,
    limit: Limit,
    seconds: f64,
    declared: Option<u64>,
) -> anyhow::Error {
    let which = if limit.fixed {
        "the limit RECON_READ_TIMEOUT_S sets".to_string()
    } else {
        format!(
            "the default limit: a minute plus a second per {} MB the file holds or declares; \
             RECON_READ_TIMEOUT_S sets another",
            BYTES_PER_SECOND / 1e6
        )
    };
    let damaged = "the file is probably damaged (the HDF5 library loops on some damaged files)";
    let cause = match declared {
        None => format!("while reading its structure: {damaged}"),
        // A slow disk still reads a megabyte a second.
        Some(b) if (b as f64) < 1e6 * seconds => {
            format!(
                "while reading its {:.1} MB of data: {damaged}",
                b as f64 / 1e6
            )
        }
        Some(b) => format!(
            "while reading its {:.0} MB of data: the disk is slow (raise RECON_READ_TIMEOUT_S), \
             or the file is damaged",
            b as f64 / 1e6
        ),
    };
    anyhow::anyhow!(
        "reading {} did not finish within {seconds:.0} s ({which}), {cause}",
        path.display()
    )
}

/// The error for a reader that ended without its outcome, by the cause its
/// exit status and last words (`detail`, its stderr) show: out of memory,
/// killed, interrupted, or crashed inside HDF5 (a damaged file).
fn failure(path: &Path, status: std::process::ExitStatus, detail: &str) -> anyhow::Error {
    use std::os::unix::process::ExitStatusExt;
    let detail = detail.trim();
    let why = match status.signal() {
        Some(libc::SIGABRT) if detail.contains("memory allocation of") => {
            return out_of_memory(path, detail);
        }
        Some(libc::SIGKILL) => {
            return anyhow::anyhow!(
                "cannot read {}: the reader was killed (SIGKILL): out of memory (the kernel's OOM \
                 killer, or a cgroup limit), or ended by another process",
                path.display()
            )
        }
        Some(s @ (libc::SIGTERM | libc::SIGINT | libc::SIGHUP)) => {
            return anyhow::anyhow!(
                "cannot read {}: the reader was ended by signal {s} ({})",
                path.display(),
                signal_name(s)
            )
        }
        Some(sig) => format!(
            "the reader crashed with signal {sig} ({}) inside the HDF5 library",
            signal_name(sig)
        ),
        None => format!("the reader failed (exit status {:?})", status.code()),
    };
    anyhow::anyhow!(
        "cannot read {}: {why}: the file is corrupt or not a scan file{}",
        path.display(),
        if detail.is_empty() {
            String::new()
        } else {
            format!(" ({})", detail.lines().last().unwrap_or_default())
        }
    )
}

/// The error for a reader that ran out of memory (Rust's allocator aborts
/// with "memory allocation of N bytes failed").
fn out_of_memory(path: &Path, detail: &str) -> anyhow::Error {
    let line = detail
        .lines()
        .find(|l| l.contains("memory allocation of"))
        .unwrap_or(detail);
    let limit = recon_core::memory::host_limit()
        .map(|l| {
            format!(
                "; {:.2} GiB is available under {}",
                recon_core::memory::gib(l.bytes),
                l.what
            )
        })
        .unwrap_or_default();
    anyhow::anyhow!(
        "cannot read {}: the reader ran out of memory ({line}){limit}: the file holds more than \
         the memory limits let recon read",
        path.display()
    )
}

fn signal_name(sig: i32) -> &'static str {
    match sig {
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGILL => "SIGILL",
        libc::SIGKILL => "SIGKILL",
        libc::SIGTERM => "SIGTERM",
        libc::SIGINT => "SIGINT",
        libc::SIGHUP => "SIGHUP",
        _ => "signal",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::ExitStatusExt;

    #[test]
    fn a_reader_that_ends_badly_is_named_by_its_cause() {
        let p = Path::new("scan.h5");
        let said = |raw: i32, detail: &str| {
            failure(p, std::process::ExitStatus::from_raw(raw), detail).to_string()
        };
        // Signals: the raw status is the signal number.
        let oom = said(6, "memory allocation of 1048576 bytes failed\n");
        assert!(
            oom.contains("ran out of memory") && oom.contains("1048576"),
            "{oom}"
        );
        assert!(!oom.contains("corrupt"), "{oom}");
        let abort = said(6, "H5 assertion failed");
        assert!(
            abort.contains("SIGABRT") && abort.contains("corrupt"),
            "{abort}"
        );
        let segv = said(11, "");
        assert!(
            segv.contains("SIGSEGV") && segv.contains("corrupt"),
            "{segv}"
        );
        let killed = said(9, "");
        assert!(
            killed.contains("OOM") && !killed.contains("corrupt"),
            "{killed}"
        );
        let term = said(15, "");
        assert!(
            term.contains("SIGTERM") && !term.contains("corrupt"),
            "{term}"
        );
        // An exit status (code 3, as the raw status 3 << 8).
        let code = said(3 << 8, "");
        assert!(code.contains("exit status Some(3)"), "{code}");
    }

    #[test]
    fn a_time_limit_names_itself_and_the_likely_cause() {
        let p = Path::new("scan.h5");
        let fixed = Limit {
            seconds: 3.0,
            fixed: true,
        };
        let default = Limit {
            seconds: 60.0,
            fixed: false,
        };
        // Still in the file's structure: damaged.
        let e = time_limit_error(p, fixed, 3.0, None).to_string();
        assert!(
            e.contains("within 3 s") && e.contains("RECON_READ_TIMEOUT_S sets"),
            "{e}"
        );
        assert!(e.contains("structure") && e.contains("damaged"), "{e}");
        // Little data for the time: damaged; much: a slow disk.
        let e = time_limit_error(p, default, 60.0, Some(1_000_000)).to_string();
        assert!(e.contains("default limit") && e.contains("damaged"), "{e}");
        let e = time_limit_error(p, default, 110.0, Some(1_000_000_000)).to_string();
        assert!(e.contains("1000 MB") && e.contains("disk is slow"), "{e}");
        // The default grows by a second per 20 MB.
        assert_eq!(scaled_limit(0), 60.0);
        assert_eq!(scaled_limit(1_000_000_000), 110.0);
    }
}
