//! Faults: an unwritable or full Q cache or output folder, an output folder
//! holding foreign files or an earlier run's outputs, SIGTERM and SIGHUP
//! during the commit, and stale partial files of dead processes. Each
//! checks that recon either finishes or leaves the earlier outputs whole,
//! with nothing partial behind.

mod common;

use common::{
    assert_no_partials, config_with, fails_with, files_under, interrupt, recon, repo,
    scan_run_config, stderr,
};
use std::path::{Path, PathBuf};
use std::process::Command;

// 4. An unwritable Q cache kills the run.
#[test]
fn an_unwritable_q_cache_is_a_warning() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = tmp.path().join("cache");
    let cfg = config_with(tmp.path(), |t| t);
    let first = recon(&["q", "--config", cfg.to_str().unwrap()], &cache);
    assert!(first.status.success(), "{}", stderr(&first));
    // A folder where the cache file should be: unreadable and unwritable,
    // even by root.
    let file = files_under(&cache).pop().expect("one cache file");
    std::fs::remove_file(&file).unwrap();
    std::fs::create_dir(&file).unwrap();
    let o = recon(&["--config", cfg.to_str().unwrap()], &cache);
    let err = stderr(&o);
    assert!(o.status.success(), "{err}");
    assert_eq!(err.matches("not cached").count(), 1, "{err}");
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(tmp.path().join("out/report.json")).unwrap())
            .unwrap();
    assert_eq!(r["q_cache"], "not-stored");
}

/// Mounts a tmpfs of `kib` KiB at `dir`, or says why not (not root, no
/// permission in this container).
fn small_tmpfs(dir: &Path, kib: usize) -> Result<Tmpfs, String> {
    std::fs::create_dir_all(dir).unwrap();
    let o = Command::new("mount")
        .args(["-t", "tmpfs", "-o", &format!("size={kib}k"), "tmpfs"])
        .arg(dir)
        .output()
        .map_err(|e| e.to_string())?;
    if !o.status.success() {
        return Err(String::from_utf8_lossy(&o.stderr).trim().to_string());
    }
    Ok(Tmpfs(dir.to_path_buf()))
}

struct Tmpfs(PathBuf);

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

#[test]
fn full_cache_and_output_folders() {
    let tmp = tempfile::tempdir().unwrap();
    let small = tmp.path().join("small");
    let _mount = match small_tmpfs(&small, 64) {
        Ok(m) => m,
        Err(why) => {
            println!("skipped: cannot mount a small tmpfs ({why})");
            return;
        }
    };
    let cfg = config_with(tmp.path(), |t| t);
    // A full cache folder: the run goes on and says so once. (Q at 16^3 in
    // f64 is 512 KiB, far more than 64 KiB.)
    let o = recon(&["--config", cfg.to_str().unwrap()], &small.join("cache"));
    let err = stderr(&o);
    assert!(o.status.success(), "{err}");
    assert_eq!(err.matches("not cached").count(), 1, "{err}");
    assert!(files_under(&small).is_empty(), "{:?}", files_under(&small));
    // A full output folder: an error naming the file, nothing left.
    let out = small.join("out");
    let o = recon(
        &[
            "--config",
            cfg.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ],
        &tmp.path().join("cache"),
    );
    fails_with(&o, &["recon.h5"]);
    assert!(files_under(&small).is_empty(), "{:?}", files_under(&small));
    assert!(!out.exists());
}

// 5. The output commit is all or nothing.
#[test]
fn an_output_folder_with_foreign_files_is_refused_before_computing() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    std::fs::create_dir_all(out.join("report.json")).unwrap();
    let cfg = config_with(tmp.path(), |t| t);
    let o = recon(
        &["--config", cfg.to_str().unwrap()],
        &tmp.path().join("cache"),
    );
    fails_with(&o, &["report.json", "recon did not write"]);
    // Before Q: no cache file, and the folder is as it was.
    assert!(files_under(&tmp.path().join("cache")).is_empty());
    assert!(out.join("report.json").is_dir());
    assert_eq!(std::fs::read_dir(&out).unwrap().count(), 1);
    // A file where the folder should be, and an unwritable parent.
    std::fs::remove_dir_all(&out).unwrap();
    std::fs::write(&out, b"x").unwrap();
    let o = recon(
        &["--config", cfg.to_str().unwrap()],
        &tmp.path().join("cache"),
    );
    fails_with(&o, &["exists and is not a folder"]);
    let o = recon(
        &[
            "--config",
            cfg.to_str().unwrap(),
            "--out",
            "/proc/recon-out",
        ],
        &tmp.path().join("cache"),
    );
    fails_with(&o, &["/proc"]);
    assert!(files_under(&tmp.path().join("cache")).is_empty());
}

#[test]
fn a_new_run_replaces_the_earlier_outputs_whole() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = tmp.path().join("cache");
    let cfg = config_with(tmp.path(), |t| t);
    let o = recon(&["--config", cfg.to_str().unwrap()], &cache);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = tmp.path().join("out");
    assert!(out.join("truth.nii").exists());
    // The ISMRMRD fixture has no truth: its run must not leave the
    // synthetic run's truth.nii beside its own outputs.
    let fixture = repo().join("tests/fixtures/test-small.ismrmrd.h5");
    let scan = scan_run_config(tmp.path(), &fixture, "");
    let o = recon(&["--config", scan.to_str().unwrap()], &cache);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(!out.join("truth.nii").exists());
    let stdout = String::from_utf8_lossy(&o.stdout);
    // The summary names every file written.
    for f in [
        "recon.h5",
        "report.json",
        "recon.nii",
        "montage.png",
        "residual.png",
    ] {
        assert!(stdout.contains(f), "{f}: {stdout}");
    }
    // Nothing temporary beside the folder.
    assert_no_partials(tmp.path());
}

// 5 and 6: SIGTERM and SIGHUP, during the computation and during the commit.
#[test]
fn sigterm_and_sighup_leave_the_earlier_outputs_or_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = tmp.path().join("cache");
    let cfg = config_with(tmp.path(), |t| t);
    let out = tmp.path().join("out");
    let args = ["--config", cfg.to_str().unwrap()];
    for signal in ["TERM", "HUP"] {
        // No earlier outputs: nothing at all is left.
        let status = interrupt(
            &args,
            &cache,
            &[("RECON_PAUSE_BEFORE_COMMIT_MS", "20000")],
            "outputs staged",
            signal,
        );
        assert_eq!(status.code(), Some(130), "{signal}: {status:?}");
        assert!(!out.exists(), "{signal}: {:?}", files_under(tmp.path()));
    }
    // Earlier outputs: they stay as they were, whole.
    let o = recon(&args, &cache);
    assert!(o.status.success(), "{}", stderr(&o));
    let before = std::fs::read(out.join("report.json")).unwrap();
    let status = interrupt(
        &args,
        &cache,
        &[("RECON_PAUSE_BEFORE_COMMIT_MS", "20000")],
        "outputs staged",
        "TERM",
    );
    assert_eq!(status.code(), Some(130));
    assert_eq!(std::fs::read(out.join("report.json")).unwrap(), before);
    assert_no_partials(tmp.path());
}

// 6. Stale partial files of dead processes.
#[test]
fn stale_partial_files_of_dead_processes_are_removed() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = tmp.path().join("cache");
    std::fs::create_dir_all(&cache).unwrap();
    // A process id that has just exited.
    let mut child = Command::new("true").spawn().unwrap();
    let dead = child.id();
    child.wait().unwrap();
    let stale = [
        tmp.path().join(format!(".partial-{dead}-out")),
        tmp.path().join(format!(".partial-{dead}-recon.h5")),
        cache.join(format!(".partial-{dead}-q-0123.h5")),
        // As older versions left them, inside the output folder.
        tmp.path().join(format!("out/.partial-{dead}-report.json")),
    ];
    std::fs::create_dir(&stale[0]).unwrap();
    std::fs::write(stale[0].join("recon.h5"), b"half").unwrap();
    std::fs::create_dir(tmp.path().join("out")).unwrap();
    for s in &stale[1..] {
        std::fs::write(s, b"half").unwrap();
    }
    // A live process's partial file stays: this test's own.
    let live = tmp
        .path()
        .join(format!(".partial-{}-x", std::process::id()));
    std::fs::write(&live, b"mine").unwrap();
    let cfg = config_with(tmp.path(), |t| t);
    let o = recon(&["--config", cfg.to_str().unwrap()], &cache);
    assert!(o.status.success(), "{}", stderr(&o));
    for s in &stale {
        assert!(!s.exists(), "{} survived", s.display());
    }
    assert!(live.exists());
}
