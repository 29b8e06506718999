//! All-or-nothing writes: single files, and whole output folders.
//!
//! A single file (a scan file, a Q cache entry) is written under a hidden
//! temporary name beside its real one, synced, and renamed into place.
//!
//! Output folders, built whole and swapped in, are in `outdir.rs`.
//!
//! Every temporary name is `.partial-PID-NAME`. An interrupt handler calls
//! [`remove_partial_files`]; a later run removes those whose process is
//! dead ([`remove_stale_partials`]).

use crate::IoError;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

pub(crate) fn io<'a>(
    path: &'a Path,
    op: &'static str,
) -> impl FnOnce(std::io::Error) -> IoError + 'a {
    move |source| match source.raw_os_error() {
        Some(libc::ENOSPC) => crate::no_space(path),
        _ => IoError::Io {
            path: crate::real_path(path).display().to_string(),
            op,
            source,
        },
    }
}

pub(crate) const PARTIAL_PREFIX: &str = ".partial-";

/// The temporary name used while `path` is being written: hidden, marked
/// partial with this process's id, and ending like the final name (writers
/// that choose a format by extension, as NIfTI's do, see the right one).
pub fn temp_path(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy())
        .unwrap_or_default();
    path.with_file_name(format!("{PARTIAL_PREFIX}{}-{name}", std::process::id()))
}

/// Temporary files and folders being written, so that an interrupt can
/// remove them. An output folder's swap holds this lock, so an interrupt
/// waits for a swap in progress instead of racing it.
static PARTIAL: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());
/// Set once an output folder has been swapped into place.
pub(crate) static COMMITTED: AtomicBool = AtomicBool::new(false);

pub(crate) fn partial() -> std::sync::MutexGuard<'static, Vec<PathBuf>> {
    PARTIAL.lock().unwrap_or_else(|e| e.into_inner())
}

pub(crate) fn register(tmp: &Path) {
    partial().push(tmp.to_path_buf());
}

pub(crate) fn unregister(tmp: &Path) {
    partial().retain(|p| p != tmp);
}

pub(crate) fn remove_any(p: &Path) {
    match std::fs::symlink_metadata(p) {
        Ok(m) if m.is_dir() => {
            let _ = std::fs::remove_dir_all(p);
        }
        Ok(_) => {
            let _ = std::fs::remove_file(p);
        }
        Err(_) => {}
    }
}

/// Removes every temporary file and folder still being written: for an
/// interrupt handler. Waits for an output folder's swap in progress to end.
/// Returns whether an output folder had already been swapped into place
/// (then the outputs are complete).
pub fn remove_partial_files() -> bool {
    let mut p = partial();
    for path in p.drain(..) {
        remove_any(&path);
    }
    // Keep the lock: the process is about to exit, and no swap may start.
    std::mem::forget(p);
    COMMITTED.load(Ordering::SeqCst)
}

/// Whether process `pid` is alive (or exists under another user).
fn alive(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    // SAFETY: kill with signal 0 only checks that the process exists.
    let r = unsafe { libc::kill(pid, 0) };
    r == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// Removes the temporary files and folders in `dir` left by processes that
/// are no longer running (killed before they could clean up). Returns how
/// many were removed. Errors reading the folder are ignored: this is
/// housekeeping.
pub fn remove_stale_partials(dir: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    let me = std::process::id();
    let mut removed = 0;
    for e in entries.flatten() {
        let name = e.file_name();
        let name = name.to_string_lossy();
        let Some(rest) = name.strip_prefix(PARTIAL_PREFIX) else {
            continue;
        };
        let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        if pid != me && !alive(pid) {
            remove_any(&e.path());
            removed += 1;
        }
    }
    removed
}

/// A file written completely under its temporary name, waiting for
/// [`commit`]. Dropped uncommitted (an error elsewhere), it is removed.
struct Staged {
    tmp: PathBuf,
    path: PathBuf,
}

impl Drop for Staged {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.tmp);
        unregister(&self.tmp);
    }
}

pub(crate) fn sync_file(path: &Path) -> Result<(), IoError> {
    let f = std::fs::File::open(path).map_err(io(path, "open"))?;
    f.sync_all().map_err(io(path, "sync"))
}

/// Writes `path` atomically: `write` fills a temporary file beside it,
/// which is synced and renamed into place. On failure `path` is untouched
/// and no temporary file remains.
pub fn write_atomic<E>(path: &Path, write: impl FnOnce(&Path) -> Result<(), E>) -> Result<(), E>
where
    E: From<IoError>,
{
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(io(dir, "create folder"))?;
        remove_stale_partials(dir);
    }
    let staged = Staged {
        tmp: temp_path(path),
        path: path.to_path_buf(),
    };
    register(&staged.tmp);
    write(&staged.tmp)?;
    sync_file(&staged.tmp)?;
    std::fs::rename(&staged.tmp, &staged.path).map_err(io(&staged.path, "rename into place"))?;
    unregister(&staged.tmp);
    std::mem::forget(staged);
    Ok(())
}

/// Checks, before any computation, that `path` can be written as a single
/// file: its folder exists or can be made, and a file can be created there.
pub fn check_writable_file(path: &Path) -> Result<(), IoError> {
    if path.is_dir() {
        return Err(io(path, "write")(std::io::Error::other(
            "is a folder; give a file name",
        )));
    }
    let dir = match path.parent().filter(|d| !d.as_os_str().is_empty()) {
        Some(d) => d,
        None => Path::new("."),
    };
    std::fs::create_dir_all(dir).map_err(io(dir, "create folder"))?;
    probe(dir)
}

/// Creates, syncs and removes a small file in `dir`.
pub(crate) fn probe(dir: &Path) -> Result<(), IoError> {
    let p = temp_path(&dir.join("write-probe"));
    register(&p);
    let r = std::fs::write(&p, b"recon")
        .and_then(|_| std::fs::File::open(&p)?.sync_all())
        .map_err(io(dir, "cannot write in the folder"));
    let _ = std::fs::remove_file(&p);
    unregister(&p);
    r
}
