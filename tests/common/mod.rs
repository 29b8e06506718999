//! Helpers shared by the test files. This file: the repository and the
//! binary, runs of `recon` as a process, configs, output folders, faults
//! and files; maths.rs: small problems with fixed seeds and the slow,
//! obvious references they are checked against.
#![allow(dead_code)]

mod inspect;
mod maths;
#[allow(unused_imports)] // only the fuzzers use it
pub use inspect::*;
pub use maths::*;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The repository root (`RECON_REPO` on the GPU machine, where the build's
/// paths do not exist).
pub fn repo() -> PathBuf {
    std::env::var_os("RECON_REPO")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../.."))
}

/// The `recon` binary (`RECON_BIN` on the GPU machine).
pub fn recon_bin() -> PathBuf {
    std::env::var_os("RECON_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_recon")))
}

/// Runs `recon` with its Q cache in `cache`.
///
/// HDF5 opens files without close-on-exec, so a `recon` started by one test
/// inherits the descriptors (and flock locks) of files another test has open
/// at that moment, and a third process then finds them "locked". Processes
/// started by tests therefore run without HDF5 file locking.
pub fn recon(args: &[&str], cache: &Path) -> Output {
    Command::new(recon_bin())
        .args(args)
        .env("HDF5_USE_FILE_LOCKING", "FALSE")
        .env("RECON_CACHE_DIR", cache)
        .output()
        .expect("run recon")
}

/// Turns HDF5's file locking off in this test process too (see [`recon`]):
/// a file it writes and then opens may be locked by a child process of
/// another test that inherited the descriptor in between. Call it before
/// the test's first HDF5 call.
pub fn no_hdf5_locking() {
    // HDF5 reads the variable at each file open; every test sets the same value.
    std::env::set_var("HDF5_USE_FILE_LOCKING", "FALSE");
}

/// Every file under `dir`, recursively (hidden ones too).
pub fn files_under(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd {
            let p = e.unwrap().path();
            if p.is_dir() {
                out.extend(files_under(&p));
            } else {
                out.push(p.display().to_string());
            }
        }
    }
    out
}

/// Starts recon, waits until stderr shows `when`, runs `act` with its
/// process id, and returns its exit status, its id and all it printed on
/// stderr.
pub fn act_when(
    args: &[&str],
    cache: &Path,
    env: &[(&str, &str)],
    when: &str,
    act: impl FnOnce(u32),
) -> (std::process::ExitStatus, u32, String) {
    use std::io::{BufRead, BufReader};
    let mut child = Command::new(recon_bin())
        .args(args)
        .env("HDF5_USE_FILE_LOCKING", "FALSE") // see common::recon
        .env("RECON_CACHE_DIR", cache)
        .envs(env.iter().copied())
        .stderr(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Read stderr to the end in a thread (a closed pipe would make recon's
    // next message fail), signalling when `when` appears.
    let stderr = BufReader::new(child.stderr.take().unwrap());
    let (tx, rx) = std::sync::mpsc::channel();
    let when = when.to_string();
    let reader = std::thread::spawn(move || {
        let mut all = String::new();
        for line in stderr.lines() {
            let line = line.unwrap();
            if line.contains(&when) {
                let _ = tx.send(());
            }
            all.push_str(&line);
            all.push('\n');
        }
        all
    });
    rx.recv_timeout(std::time::Duration::from_secs(60))
        .expect("recon never reached the point to act");
    act(child.id());
    let status = child.wait().unwrap();
    (status, child.id(), reader.join().unwrap())
}

/// Starts recon, waits until stderr shows `when`, sends `signal` (INT,
/// TERM, HUP), and returns the exit status.
pub fn interrupt(
    args: &[&str],
    cache: &Path,
    env: &[(&str, &str)],
    when: &str,
    signal: &str,
) -> std::process::ExitStatus {
    act_when(args, cache, env, when, |pid| {
        let kill = Command::new("kill")
            .args([&format!("-{signal}"), &pid.to_string()])
            .status()
            .unwrap();
        assert!(kill.success());
    })
    .0
}

/// The small test config (`configs/test-small.toml`) with `edit` applied,
/// written to `dir/config.toml`; its output folder is `dir/out`.
pub fn config_with(dir: &Path, edit: impl Fn(String) -> String) -> PathBuf {
    let text = std::fs::read_to_string(repo().join("configs/test-small.toml")).unwrap();
    let phantom = repo().join("phantoms/shepp-logan.toml");
    let text = text
        .replace(
            "../phantoms/shepp-logan.toml",
            &phantom.display().to_string().replace('\\', "/"),
        )
        .replace("../out/test-small", "out");
    let path = dir.join("config.toml");
    std::fs::write(&path, edit(text)).unwrap();
    path
}

/// Fails if `dir` holds a temporary `.partial-*` file or folder.
pub fn assert_no_partials(dir: &Path) {
    let names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        !names.iter().any(|n| n.starts_with(".partial-")),
        "{names:?}"
    );
}

/// A config reconstructing scan `file` (5 CG iterations), with output
/// folder `dir/out`.
pub fn scan_run_config(dir: &Path, file: &Path, extra: &str) -> PathBuf {
    let path = dir.join("scan.toml");
    std::fs::write(
        &path,
        format!(
            "[scan]\nfile = \"{}\"\n{extra}\n[solver]\niterations = 5\n[output]\ndir = \"out\"\n",
            file.display()
        ),
    )
    .unwrap();
    path
}

/// A process's stderr as text.
pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Fails with exit status 1 (an error, not a panic or a signal), saying
/// each of `expect`.
pub fn fails_with(o: &Output, expect: &[&str]) {
    let err = stderr(o);
    assert_eq!(o.status.code(), Some(1), "{:?}: {err}", o.status);
    assert!(!err.contains("panicked"), "{err}");
    for e in expect {
        assert!(err.contains(e), "error should mention {e:?}:\n{err}");
    }
}

/// A byte-level mutation of `base`: flips, truncation, a zeroed or random
/// range, or a duplicated range, chosen by `rng`.
pub fn mutate_bytes(
    base: &[u8],
    rng: &mut Rng,
    focus: Option<std::ops::Range<usize>>,
) -> (Vec<u8>, String) {
    let mut b = base.to_vec();
    let len = b.len();
    let pick = |rng: &mut Rng| match &focus {
        Some(r) if rng.next_f64() < 0.7 => r.start + rng.below(r.len()),
        _ => rng.below(len),
    };
    match rng.below(5) {
        0 => {
            let n = 1 + rng.below(8);
            let mut at = Vec::new();
            for _ in 0..n {
                let i = pick(rng);
                b[i] ^= 1 << rng.below(8);
                at.push(i);
            }
            (b, format!("bit flips at {at:?}"))
        }
        1 => {
            let cut = rng.below(len);
            b.truncate(cut);
            (b, format!("truncated to {cut} bytes"))
        }
        2 => {
            let i = pick(rng);
            let n = (1 + rng.below(512)).min(len - i);
            b[i..i + n].fill(0);
            (b, format!("bytes {i}..{} zeroed", i + n))
        }
        3 => {
            let i = pick(rng);
            let n = (1 + rng.below(64)).min(len - i);
            for v in &mut b[i..i + n] {
                *v = rng.below(256) as u8;
            }
            (b, format!("bytes {i}..{} random", i + n))
        }
        _ => {
            let i = pick(rng);
            let n = (1 + rng.below(256)).min(len - i);
            let chunk = b[i..i + n].to_vec();
            let j = pick(rng);
            let m = n.min(len - j);
            b[j..j + m].copy_from_slice(&chunk[..m]);
            (b, format!("bytes {i}..{} copied to {j}", i + n))
        }
    }
}

/// Processes still reading `file` in a `recon read-input` child (orphans,
/// once their recon has ended).
pub fn readers_of(file: &Path) -> Vec<u32> {
    let want = file.as_os_str().to_string_lossy().into_owned();
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    procs
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let Ok(cmd) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
                return false;
            };
            let args: Vec<String> = cmd
                .split(|b| *b == 0)
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect();
            args.iter().any(|a| a == "read-input") && args.iter().any(|a| *a == want)
        })
        .collect()
}

/// Writes a text attribute `name` = `text` on `g` (a wrong type where a
/// number belongs, for the readers' tests).
/// A new scan file's `/kspace` group with its attributes `fov_mm` (240 mm
/// per axis) and `matrix`.
pub fn kspace_group(path: &Path, matrix: [i64; 3]) -> recon_io::hdf5::Group {
    let f = recon_io::hdf5::File::create(path).unwrap();
    let ks = f.create_group("kspace").unwrap();
    ks.new_attr::<f64>()
        .shape([3])
        .create("fov_mm")
        .unwrap()
        .write_raw(&[240.0; 3])
        .unwrap();
    ks.new_attr::<i64>()
        .shape([3])
        .create("matrix")
        .unwrap()
        .write_raw(&matrix)
        .unwrap();
    ks
}

pub fn text_attr(g: &recon_io::hdf5::Group, name: &str, text: &str) {
    let v: recon_io::hdf5::types::VarLenUnicode = text.parse().unwrap();
    g.new_attr::<recon_io::hdf5::types::VarLenUnicode>()
        .create(name)
        .unwrap()
        .write_scalar(&v)
        .unwrap();
}

/// Runs the repository's Python check `script` (under tests/) with `args`,
/// asserts that it succeeded and said `passed`, and returns its output.
pub fn python_check(script: &str, args: &[&Path], passed: &str) -> String {
    let o = Command::new("python3")
        .arg(repo().join("tests").join(script))
        .args(args)
        .output()
        .expect("run python3");
    let stdout = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        o.status.success(),
        "{script}: {stdout}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    println!("{stdout}");
    assert!(stdout.contains(passed), "{script}: {stdout}");
    stdout
}

/// A dataset of `dir/out/recon.h5` as magnitudes: complex ones' moduli,
/// real ones as they are.
pub fn recon_h5_magnitudes(dir: &Path, name: &str) -> Vec<f64> {
    no_hdf5_locking();
    let f = recon_io::hdf5::File::open(dir.join("out/recon.h5")).unwrap();
    let ds = f.dataset(name).unwrap();
    match ds.read_raw::<recon_core::Complex<f32>>() {
        Ok(v) => v.iter().map(|c| c.norm() as f64).collect(),
        Err(_) => ds
            .read_raw::<f32>()
            .unwrap()
            .iter()
            .map(|v| *v as f64)
            .collect(),
    }
}

/// Runs the small config with `edit` applied, returning the report.
pub fn run_small(
    dir: &std::path::Path,
    name: &str,
    edit: impl Fn(String) -> String,
) -> serde_json::Value {
    let text = std::fs::read_to_string(repo().join("configs/test-small.toml")).unwrap();
    let phantom = repo().join("phantoms/shepp-logan.toml");
    let text = edit(text.replace(
        "../phantoms/shepp-logan.toml",
        &phantom.display().to_string(),
    ));
    let cfg = dir.join(format!("{name}.toml"));
    std::fs::write(&cfg, text).unwrap();
    let out = dir.join(name);
    let o = std::process::Command::new(recon_bin())
        .args([
            "--config",
            cfg.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ])
        .env("HDF5_USE_FILE_LOCKING", "FALSE") // see common::recon
        .env("RECON_CACHE_DIR", dir.join("cache"))
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "{name}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap()
}
