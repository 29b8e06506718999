//! Signals and limits (hardening, third pass): the reader process never
//! outlives recon, its time limit is checked, named and enforced by the
//! reader itself, thread counts are held to the cores, and memory checks
//! see `ulimit -v` and count the reader's two copies of a scan. Each test
//! failed before its fix.

use crate::common;

use common::{config_with, fails_with, readers_of, recon, recon_bin, repo, stderr};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// An ISMRMRD file on which HDF5 loops for ever (a zeroed B-tree node of
/// the fixture), at `dir/hang.h5`.
fn looping_file(dir: &Path) -> PathBuf {
    let mut b = std::fs::read(repo().join("tests/fixtures/test-small.ismrmrd.h5")).unwrap();
    b[111593..112105].fill(0);
    let p = dir.join("hang.h5");
    std::fs::write(&p, b).unwrap();
    p
}

/// Starts `recon inspect FILE` (a long reader time limit) and waits until
/// its reader process is running.
fn inspecting(file: &Path) -> Child {
    let child = Command::new(recon_bin())
        .arg("inspect")
        .arg(file)
        .env("HDF5_USE_FILE_LOCKING", "FALSE")
        .env("RECON_READ_TIMEOUT_S", "600")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while readers_of(file).is_empty() {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "no reader started"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // Let it enter the loop.
    std::thread::sleep(Duration::from_millis(300));
    child
}

/// Fails unless no reader of `file` is left within a second.
fn no_reader_left(file: &Path, what: &str) {
    let start = Instant::now();
    while !readers_of(file).is_empty() {
        assert!(
            start.elapsed() < Duration::from_secs(1),
            "{what}: the reader outlived recon: {:?}",
            readers_of(file)
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn signal(pid: u32, sig: &str) {
    let ok = Command::new("kill")
        .args([&format!("-{sig}"), &pid.to_string()])
        .status()
        .unwrap();
    assert!(ok.success());
}

// 1. A signal to recon alone orphaned its reader, which spun for ever.
#[test]
fn a_signal_to_recon_ends_its_reader() {
    let tmp = tempfile::tempdir().unwrap();
    let file = looping_file(tmp.path());
    for sig in ["TERM", "INT", "HUP"] {
        let mut child = inspecting(&file);
        signal(child.id(), sig);
        let status = child.wait().unwrap();
        assert_eq!(status.code(), Some(130), "{sig}: {status:?}");
        no_reader_left(&file, sig);
    }
    // Killed outright, recon runs no handler: the reader dies with it.
    let mut child = inspecting(&file);
    signal(child.id(), "KILL");
    child.wait().unwrap();
    no_reader_left(&file, "KILL");
}

#[test]
fn the_reader_installs_no_handler_and_keeps_its_own_time_limit() {
    let tmp = tempfile::tempdir().unwrap();
    let file = looping_file(tmp.path());
    let reader = |limit: &str| {
        Command::new(recon_bin())
            .arg("read-input")
            .arg(&file)
            .args(["--trajectory-units", "normalized", "--fixed-limit"])
            .args(["--time-limit-s", limit])
            .env("HDF5_USE_FILE_LOCKING", "FALSE")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap()
    };
    // SIGTERM ends it at once, by the signal (not recon's handler, which
    // would exit 130 after waiting for HDF5's exit handlers).
    let mut r = reader("600");
    std::thread::sleep(Duration::from_millis(500));
    signal(r.id(), "TERM");
    let t = Instant::now();
    let status = r.wait().unwrap();
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(status.signal(), Some(15), "{status:?}");
    assert!(t.elapsed() < Duration::from_secs(1));
    // Alone, it ends itself at its limit (exit status 124). (Without
    // --fixed-limit the limit grows with the file's size, to a minute here.)
    let t = Instant::now();
    let status = reader("1").wait().unwrap();
    assert_eq!(status.code(), Some(124), "{status:?}");
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
}

// 2. RECON_READ_TIMEOUT_S = 1e20 panicked; 0, -1, nan and abc were ignored.
#[test]
fn the_reader_time_limit_variable_is_checked_and_named() {
    let tmp = tempfile::tempdir().unwrap();
    let file = repo().join("tests/fixtures/test-small.ismrmrd.h5");
    for bad in ["1e20", "0", "-1", "nan", "abc", "inf", "86401"] {
        let o = Command::new(recon_bin())
            .arg("inspect")
            .arg(&file)
            .env("RECON_READ_TIMEOUT_S", bad)
            .output()
            .unwrap();
        fails_with(
            &o,
            &["RECON_READ_TIMEOUT_S", bad, "positive number of seconds"],
        );
    }
    let o = Command::new(recon_bin())
        .arg("inspect")
        .arg(&file)
        .env("RECON_READ_TIMEOUT_S", "30.5")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    // A looping file: the message names the limit and the likely cause.
    let hang = looping_file(tmp.path());
    let o = Command::new(recon_bin())
        .arg("inspect")
        .arg(&hang)
        .env("HDF5_USE_FILE_LOCKING", "FALSE")
        .env("RECON_READ_TIMEOUT_S", "2")
        .output()
        .unwrap();
    fails_with(
        &o,
        &[
            "did not finish within 2 s",
            "RECON_READ_TIMEOUT_S",
            "probably damaged",
        ],
    );
    no_reader_left(&hang, "time limit");
}

// 3. engine.threads = 4096 turned a 0.1 s run into minutes on 2 cores.
#[test]
fn thread_counts_are_held_to_the_cores() {
    let tmp = tempfile::tempdir().unwrap();
    let cores = std::thread::available_parallelism().unwrap().get();
    for threads in [4096, 4 * cores + 1] {
        let cfg = config_with(tmp.path(), |t| {
            t.replace("[engine]", &format!("[engine]\nthreads = {threads}"))
        });
        let t = Instant::now();
        let o = recon(&["check", "--config", cfg.to_str().unwrap()], tmp.path());
        fails_with(
            &o,
            &["engine.threads", &format!("{threads} threads"), "per core"],
        );
        assert!(t.elapsed() < Duration::from_secs(5));
    }
    // RAYON_NUM_THREADS, the default's source, is held to the same rule.
    let cfg = config_with(tmp.path(), |t| t);
    let o = Command::new(recon_bin())
        .args(["check", "--config", cfg.to_str().unwrap()])
        .env("RAYON_NUM_THREADS", "4096")
        .output()
        .unwrap();
    fails_with(&o, &["RAYON_NUM_THREADS", "4096"]);
    // Above the cores but within the cap: a warning, and the run completes.
    let cfg = config_with(tmp.path(), |t| {
        t.replace("[engine]", &format!("[engine]\nthreads = {}", cores + 1))
    });
    let o = recon(
        &["--config", cfg.to_str().unwrap()],
        &tmp.path().join("cache"),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("warning: config key `engine.threads`"),
        "{}",
        stderr(&o)
    );
}

/// Runs `recon ARGS` under `ulimit -v KIB`.
fn under_ulimit(kib: u64, args: &[&str], cache: &Path) -> std::process::Output {
    let mut script = format!("ulimit -v {kib} && exec \"$0\"");
    for i in 0..args.len() {
        script.push_str(&format!(" \"${}\"", i + 1));
    }
    Command::new("sh")
        .arg("-c")
        .arg(script)
        .arg(recon_bin())
        .args(args)
        .env("HDF5_USE_FILE_LOCKING", "FALSE")
        .env("RECON_CACHE_DIR", cache)
        // A thread that cannot start under the limit panics inside std
        // (ctrlc's handler thread, say); with RUST_BACKTRACE set, printing
        // that panic's backtrace allocates, fails, and the allocation error
        // hook waits on the lock the panic holds: the process hangs (seen
        // once in `tight_address_space_limits_are_never_called_a_corrupt_file`).
        .env_remove("RUST_BACKTRACE")
        .output()
        .unwrap()
}

/// The smallest `ulimit -v` (KiB, to 2%) in `lo..hi` under which `ok`
/// holds of `recon ARGS`, or `None` when none does.
fn smallest_ulimit(
    lo: u64,
    hi: u64,
    args: &[&str],
    cache: &Path,
    ok: impl Fn(&std::process::Output) -> bool,
) -> Option<u64> {
    if !ok(&under_ulimit(hi, args, cache)) {
        return None;
    }
    let (mut lo, mut hi) = (lo, hi);
    while hi - lo > hi / 50 {
        let mid = (lo + hi) / 2;
        if ok(&under_ulimit(mid, args, cache)) {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    Some(hi)
}

/// The `ulimit -v` values (KiB) around `least`, from 80% to 125% in steps
/// of 2.5%: where the estimate is decided.
fn around(least: u64) -> impl Iterator<Item = u64> {
    (0..=18).map(move |i| least * (80 + 5 * i / 2) / 100)
}

// 6. The memory checks ignored ulimit -v: `recon check` accepted a run that
// then aborted with "memory allocation failed".
#[test]
fn what_recon_check_accepts_under_ulimit_v_runs_to_the_end() {
    let tmp = tempfile::tempdir().unwrap();
    let cfg = config_with(tmp.path(), |t| {
        t.replace("matrix = 16", "matrix = 48")
            .replace(
                "precision = \"f64\"",
                "precision = \"f32\"\ndevice = \"cpu\"",
            )
            .replace("iterations = 30", "iterations = 3")
    });
    let cfg = cfg.to_str().unwrap();
    let cache = tmp.path().join("cache");
    let check = ["check", "--config", cfg];
    // About the least address space `recon check` accepts ...
    let least = smallest_ulimit(100_000, 8_000_000, &check, &cache, |o| o.status.success())
        .expect("check accepts the run under 8 GB");
    // ... and around it: whatever it accepts runs to the end, and what it
    // refuses, it refuses naming the limit.
    let mut accepted = 0;
    for kib in around(least) {
        let o = under_ulimit(kib, &check, &cache);
        if !o.status.success() {
            fails_with(&o, &["not enough memory", "ulimit -v (RLIMIT_AS)"]);
            continue;
        }
        accepted += 1;
        let o = under_ulimit(kib, &["--config", cfg], &cache);
        assert!(
            o.status.success(),
            "check accepted ulimit -v {kib} KiB, but the run failed:\n{}",
            stderr(&o)
        );
    }
    assert!(accepted > 0 && accepted < 19, "{accepted} of 19 accepted");
}

#[test]
fn recon_check_counts_the_sparse_priors_memory() {
    // At 128^3 in float32 on the CPU, TV's solver holds 27 image vectors
    // more than CG's (recon_core::memory::sparse_vectors), 432 MiB: the
    // least address space `recon check` accepts grows. (With the exact
    // engine; with the NUFFT its fine grid for Q is the peak.)
    let tmp = tempfile::tempdir().unwrap();
    let cache = tmp.path().join("cache");
    let least = |name: &str, prior: &str| {
        let cfg = config_with(tmp.path(), |t| {
            t.replace("matrix = 16", "matrix = 128")
                .replace(
                    "precision = \"f64\"",
                    "precision = \"f32\"\ndevice = \"cpu\"\nkind = \"exact\"",
                )
                .replace("lambda = 0.01", "")
                + prior
        });
        let named = tmp.path().join(format!("{name}.toml"));
        std::fs::rename(&cfg, &named).unwrap();
        let check = ["check", "--config", named.to_str().unwrap()];
        smallest_ulimit(100_000, 64_000_000, &check, &cache, |o| o.status.success())
            .expect("check accepts the run under 64 GB")
    };
    let quadratic = least("quadratic", "\n[prior]\nlambda = 0.01\n");
    let tv = least("tv", "\n[prior]\nkind = \"tv\"\nlambda = 0.001\n");
    let grew = tv.saturating_sub(quadratic);
    // smallest_ulimit resolves 2% of the limit. The solve becomes the peak
    // (recon_core::memory's tests check the exact amounts).
    let slack = quadratic / 50 + tv / 50;
    assert!(
        grew > slack,
        "TV's check needs {tv} KiB, the quadratic prior's {quadratic} KiB: not more"
    );
}

/// A version 2 scan file declaring `k` noise samples for each of 4 coils,
/// chunked and never written (the reader reads zeros): a few KB on disk.
fn declared_noise_scan(path: &Path, k: usize) {
    use recon_io::hdf5;
    let grid = recon_core::Grid::new([8, 8, 8], [200.0; 3]).unwrap();
    let mut rng = common::Rng::new(3);
    let scan = recon_io::scan::Scan {
        grid,
        traj: common::random_traj(&grid, 100, &mut rng),
        coils: 4,
        data: rng.complex(400),
        noise: None,
        maps: None,
        truth: None,
        anatomy: None,
        geometry: None,
        parts: Vec::new(),
    };
    recon_io::scan::write_scan(path, &scan).unwrap();
    let f = hdf5::File::open_rw(path).unwrap();
    f.new_dataset::<f32>()
        .chunk([1, 1 << 16, 2])
        .shape([4, k, 2])
        .create("kspace/noise")
        .unwrap();
    f.close().unwrap();
}

// 6. The reader's estimate for a declared 4 x 2^25 noise scan was 3.0 GiB,
// its real peaks 3.9 GiB (reader) and 6.0 GiB (recon). Each process's
// peak is now counted: whatever address space the check accepts, both
// processes read the file to the end in it.
#[test]
fn what_the_reader_accepts_under_ulimit_v_it_reads() {
    common::no_hdf5_locking();
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("noise.h5");
    declared_noise_scan(&file, 1 << 22); // 128 MiB as float32, 256 MiB decoded
    let args = ["inspect", file.to_str().unwrap()];
    let least = smallest_ulimit(100_000, 8_000_000, &args, tmp.path(), |o| {
        o.status.success()
    })
    .expect("readable under 8 GB");
    let mut accepted = 0;
    for kib in around(least) {
        let o = under_ulimit(kib, &args, tmp.path());
        if o.status.success() {
            accepted += 1;
            continue;
        }
        // Refused by the estimate, naming it and the limit: never a crash
        // or an allocation failure of either process.
        let err = stderr(&o);
        fails_with(&o, &["would need", "GiB of memory to read", "ulimit -v"]);
        assert!(
            !err.contains("crashed") && !err.contains("corrupt"),
            "{err}"
        );
    }
    assert!(accepted > 0 && accepted < 19, "{accepted} of 19 accepted");
}

// Poor results: a read that ran out of memory was reported as a corrupt
// file. Under address-space limits far below what recon needs, whichever
// process fails first (recon itself, or its reader before any estimate),
// the file is never called corrupt. (The reader's own causes, an
// allocation failure among them, are told apart in reader.rs's unit tests.)
#[test]
fn tight_address_space_limits_are_never_called_a_corrupt_file() {
    common::no_hdf5_locking();
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("noise.h5");
    declared_noise_scan(&file, 1 << 22);
    // Far below what the reader's own code needs: it fails wherever it
    // first allocates, before any estimate.
    let mut seen = Vec::new();
    for kib in [20_000, 40_000, 60_000, 80_000] {
        let o = under_ulimit(kib, &["inspect", file.to_str().unwrap()], tmp.path());
        let err = stderr(&o);
        assert!(!o.status.success());
        assert!(!err.contains("corrupt"), "ulimit -v {kib}: {err}");
        seen.push(err);
    }
    assert!(
        seen.iter().any(|e| e.contains("memory")),
        "no run named memory: {seen:?}"
    );
}
