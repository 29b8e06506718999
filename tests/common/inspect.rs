//! `recon inspect` as the HDF5 fuzzers run it (fuzz_hdf5.rs,
//! fuzz_ismrmrd.rs): each mutant read in recon's reader process, the
//! outcome classified, and every misbehaviour a test failure.

use super::recon_bin;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Mutants per HDF5 format (each is one or two processes).
pub const HDF5_CASES: usize = 240;

/// What `recon inspect` did with a file.
#[derive(Debug, PartialEq)]
pub enum Outcome {
    Accepted,
    Refused,
    /// Refused because the HDF5 library crashed or hung in the reader process.
    Contained,
}

/// Runs `recon inspect` on `file`; panics (failing the test) on a panic,
/// a signal, an unexpected exit status or a run past the limit.
pub fn inspect(file: &Path, what: &str) -> Outcome {
    // RECON_FUZZ_KEEP=DIR keeps a copy of every case there, to reproduce one.
    if let Some(keep) = std::env::var_os("RECON_FUZZ_KEEP") {
        let name = what.replace(|c: char| !c.is_ascii_alphanumeric(), "_");
        let _ = std::fs::copy(file, Path::new(&keep).join(format!("{name}.h5")));
    }
    let mut child = Command::new(recon_bin())
        .arg("inspect")
        .arg(file)
        .env("HDF5_USE_FILE_LOCKING", "FALSE")
        .env("RECON_READ_TIMEOUT_S", "3")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut err, &mut s);
        s
    });
    // The reader's own limit is 3 s (a healthy read of these files takes
    // milliseconds; HDF5 loops forever on some); recon must end within 30.
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if start.elapsed() > Duration::from_secs(30) {
            let _ = child.kill();
            panic!("{what}: recon inspect ran past 30 s");
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    let err = reader.join().unwrap();
    assert!(!err.contains("panicked"), "{what}: recon panicked:\n{err}");
    // No reader process outlives its recon (it dies with its parent).
    let start = Instant::now();
    while !super::readers_of(file).is_empty() {
        assert!(
            start.elapsed() < Duration::from_secs(1),
            "{what}: a reader process outlived recon: {:?}",
            super::readers_of(file)
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    match status.code() {
        Some(0) => Outcome::Accepted,
        Some(1) if err.contains("the reader crashed") || err.contains("did not finish within") => {
            Outcome::Contained
        }
        Some(1) => {
            assert!(err.starts_with("error: "), "{what}: {err}");
            // The reader's own panics would show as a failed reader.
            assert!(
                !err.contains("exit status Some(101)"),
                "{what}: the reader panicked:\n{err}"
            );
            Outcome::Refused
        }
        _ => panic!("{what}: recon inspect ended with {status:?}:\n{err}"),
    }
}

/// Runs `cases` (file, description) through `recon inspect` on two threads.
pub fn run_hdf5_cases(name: &str, cases: Vec<(PathBuf, String)>) {
    let cases = std::sync::Mutex::new(cases.into_iter());
    let counts = std::sync::Mutex::new([0usize; 3]);
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| loop {
                let next = cases.lock().unwrap().next();
                let Some((file, what)) = next else { break };
                let o = inspect(&file, &format!("{name}: {what}"));
                counts.lock().unwrap()[o as usize] += 1;
                let _ = std::fs::remove_file(&file);
            });
        }
    });
    let [a, r, c] = *counts.lock().unwrap();
    println!("{name}: {a} accepted, {r} refused with an error, {c} refused after HDF5 crashed or hung in the reader");
    assert!(
        r > 0,
        "{name}: no mutant was refused: the mutations do nothing"
    );
}
