//! Faults: an unwritable or full Q cache or output folder, an output folder
//! holding foreign files or an earlier run's outputs, SIGTERM and SIGHUP
//! during the commit, and stale partial files of dead processes. Each
//! checks that recon either finishes or leaves the earlier outputs whole,
//! with nothing partial behind.

use crate::common;

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

/// [`small_tmpfs`], or `None` after printing why the test is skipped.
fn tmpfs_or_skip(dir: &Path, kib: usize) -> Option<Tmpfs> {
    small_tmpfs(dir, kib)
        .map_err(|why| println!("skipped: cannot mount a tmpfs ({why})"))
        .ok()
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
    let Some(_mount) = tmpfs_or_skip(&small, 64) else {
        return;
    };
    let cfg = config_with(tmp.path(), |t| t);
    // A full cache folder: the run goes on and says so once. (Q at 16^3 in
    // f64 is 512 KiB, far more than 64 KiB.)
    let o = recon(&["--config", cfg.to_str().unwrap()], &small.join("cache"));
    let err = stderr(&o);
    assert!(o.status.success(), "{err}");
    assert_eq!(err.matches("not cached").count(), 1, "{err}");
    assert!(files_under(&small).is_empty(), "{:?}", files_under(&small));
    // A full output folder: an error naming the file and the folder, once,
    // without HDF5's dump of the failed write; nothing left.
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
    fails_with(&o, &["no space left on device", &out.display().to_string()]);
    let err = stderr(&o);
    // The file that did not fit: one written while the run computes (the
    // truth's or the baseline's) or at its end.
    assert!(
        ["recon.h5", "truth.nii", "gridding.nii"]
            .iter()
            .any(|f| err.contains(&format!("writing {f} in"))),
        "{err}"
    );
    assert_eq!(err.matches("space left").count(), 1, "{err}");
    assert!(
        !err.contains("errno") && !err.contains(".partial-"),
        "{err}"
    );
    // `recon simulate` into the full folder likewise.
    let o = recon(
        &[
            "simulate",
            "--config",
            cfg.to_str().unwrap(),
            "--out",
            small.join("scan.h5").to_str().unwrap(),
        ],
        tmp.path(),
    );
    fails_with(&o, &["no space left on device", "scan.h5"]);
    assert!(!stderr(&o).contains("errno"), "{}", stderr(&o));
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

// Hardening, third pass.

// 4. An output folder that the final rename cannot replace (a mount point,
// as a container volume) passed every check and failed after the whole
// computation. It is now filled in place, under the same manifest rule.
#[test]
fn a_mount_point_as_output_folder_is_filled_in_place() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let Some(_mount) = tmpfs_or_skip(&out, 8192) else {
        return;
    };
    assert!(recon_io::is_mount_point(&out));
    let cache = tmp.path().join("cache");
    let cfg = config_with(tmp.path(), |t| t);
    let o = recon(&["--config", cfg.to_str().unwrap()], &cache);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(out.join("truth.nii").exists());
    // A second run, of a file without truth: replaced whole, in place.
    let fixture = repo().join("tests/fixtures/test-small.ismrmrd.h5");
    let scan = scan_run_config(tmp.path(), &fixture, "");
    let o = recon(&["--config", scan.to_str().unwrap()], &cache);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(!out.join("truth.nii").exists());
    assert!(out.join("recon.h5").exists());
    // Nothing temporary left inside or beside it.
    assert_no_partials(&out);
    assert_no_partials(tmp.path());
    // `out/.` is the same folder.
    let dot = format!("{}/.", out.display());
    let o = recon(&["--config", cfg.to_str().unwrap(), "--out", &dot], &cache);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(out.join("truth.nii").exists());
    // Foreign files are refused before any computation, as elsewhere.
    std::fs::write(out.join("notes.txt"), "mine").unwrap();
    let o = recon(&["--config", cfg.to_str().unwrap()], &cache);
    fails_with(&o, &["notes.txt", "recon did not write"]);
    assert_eq!(
        std::fs::read_to_string(out.join("notes.txt")).unwrap(),
        "mine"
    );
}

// 5. A file a user made at the output path during a run was deleted, and
// recon exited 0.
#[test]
fn a_file_made_at_the_output_path_during_a_run_is_kept() {
    let tmp = tempfile::tempdir().unwrap();
    let cfg = config_with(tmp.path(), |t| t);
    let out = tmp.path().join("out");
    let (status, pid, err) = common::act_when(
        &["--config", cfg.to_str().unwrap()],
        &tmp.path().join("cache"),
        &[("RECON_PAUSE_BEFORE_COMMIT_MS", "1500")],
        "outputs staged",
        |_| std::fs::write(&out, "the user's file").unwrap(),
    );
    assert_eq!(status.code(), Some(1), "{err}");
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "the user's file");
    let kept = tmp.path().join(format!("out-new-outputs-{pid}"));
    assert!(
        err.contains("it was kept") && err.contains(&kept.display().to_string()),
        "{err}"
    );
    assert!(kept.join("recon.h5").exists() && kept.join("report.json").exists());
    assert_no_partials(tmp.path());
}

// A Q cache inside (or equal to) the output folder passed every check,
// threw the run away at the commit and locked the folder for later runs.
#[test]
fn a_q_cache_inside_the_output_folder_is_refused_at_the_start() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    for (cache, key) in [
        (out.clone(), "`q.dir`"),
        (out.join("q"), "`q.dir`"),
        (out.join("../out/./q"), "`q.dir`"),
    ] {
        let cfg = config_with(tmp.path(), |t| {
            t + &format!("\n[q]\ndir = \"{}\"\n", cache.display())
        });
        let o = recon(&["--config", cfg.to_str().unwrap()], tmp.path());
        fails_with(&o, &["q.dir", "output.dir", key, "replaces whole"]);
        assert!(!out.exists(), "{:?}", files_under(tmp.path()));
    }
    // From RECON_CACHE_DIR too, and `recon check` says so.
    let cfg = config_with(tmp.path(), |t| t);
    let o = recon(
        &["check", "--config", cfg.to_str().unwrap()],
        &out.join("cache"),
    );
    fails_with(&o, &["RECON_CACHE_DIR", "inside"]);
    // With the cache off, no conflict.
    let cfg = config_with(tmp.path(), |t| {
        t + &format!("\n[q]\ncache = false\ndir = \"{}\"\n", out.display())
    });
    let o = recon(&["--config", cfg.to_str().unwrap()], tmp.path());
    assert!(o.status.success(), "{}", stderr(&o));
}

// A symbolic link as output folder was refused as "exists and is not a
// folder".
#[test]
fn a_link_to_a_folder_is_followed_as_output_folder() {
    let tmp = tempfile::tempdir().unwrap();
    let real = tmp.path().join("real");
    std::fs::create_dir(&real).unwrap();
    std::os::unix::fs::symlink(&real, tmp.path().join("out")).unwrap();
    let cfg = config_with(tmp.path(), |t| t);
    let o = recon(
        &["--config", cfg.to_str().unwrap()],
        &tmp.path().join("cache"),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(real.join("recon.h5").exists());
    assert!(std::fs::symlink_metadata(tmp.path().join("out"))
        .unwrap()
        .file_type()
        .is_symlink());
    // A dangling one is named as a link.
    std::fs::remove_dir_all(&real).unwrap();
    let o = recon(
        &["--config", cfg.to_str().unwrap()],
        &tmp.path().join("cache"),
    );
    fails_with(&o, &["symbolic link", "does not exist"]);
}
