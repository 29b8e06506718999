//! All-or-nothing writes: single files, and whole output folders.
//!
//! A single file (a scan file, a Q cache entry) is written under a hidden
//! temporary name beside its real one, synced, and renamed into place.
//!
//! An output folder is built whole in a hidden sibling folder and swapped
//! in with one `renameat2(RENAME_EXCHANGE)`, so a reader sees either the
//! old set of outputs or the new one, never a mix, and no file of an older
//! run survives beside the new ones. A manifest (`.recon-outputs`) lists
//! what recon wrote there; a folder holding anything else is refused before
//! any computation, so the swap never throws away a user's file.
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
    move |source| IoError::Io {
        path: path.display().to_string(),
        op,
        source,
    }
}

const PARTIAL_PREFIX: &str = ".partial-";

/// The name of the manifest of an output folder.
pub const MANIFEST: &str = ".recon-outputs";

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
static COMMITTED: AtomicBool = AtomicBool::new(false);

fn partial() -> std::sync::MutexGuard<'static, Vec<PathBuf>> {
    PARTIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn register(tmp: &Path) {
    partial().push(tmp.to_path_buf());
}

fn unregister(tmp: &Path) {
    partial().retain(|p| p != tmp);
}

fn remove_any(p: &Path) {
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

fn sync_file(path: &Path) -> Result<(), IoError> {
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
fn probe(dir: &Path) -> Result<(), IoError> {
    let p = temp_path(&dir.join("write-probe"));
    register(&p);
    let r = std::fs::write(&p, b"recon")
        .and_then(|_| std::fs::File::open(&p)?.sync_all())
        .map_err(io(dir, "cannot write in the folder"));
    let _ = std::fs::remove_file(&p);
    unregister(&p);
    r
}

/// An output folder being built: files are written into a hidden sibling
/// folder, and [`OutputDir::commit`] swaps it in whole.
pub struct OutputDir {
    target: PathBuf,
    staging: PathBuf,
    files: Vec<String>,
    done: bool,
}

impl OutputDir {
    /// Checks that `target` can take a new set of outputs, before any
    /// computation: it is absent, empty, or a folder of earlier recon
    /// outputs (with nothing else in it); its parent is writable. Removes
    /// stale temporary folders of dead processes beside it.
    pub fn prepare(target: &Path) -> Result<Self, IoError> {
        let name = target
            .file_name()
            .filter(|n| !n.is_empty() && *n != "." && *n != "..")
            .ok_or_else(|| {
                io(target, "use as output folder")(std::io::Error::other(
                    "name a folder (not `.`, `..` or a root)",
                ))
            })?;
        let parent = match target.parent().filter(|d| !d.as_os_str().is_empty()) {
            Some(d) => d.to_path_buf(),
            None => PathBuf::from("."),
        };
        std::fs::create_dir_all(&parent).map_err(io(&parent, "create folder"))?;
        remove_stale_partials(&parent);
        if let Ok(m) = std::fs::symlink_metadata(target) {
            if !m.is_dir() {
                return Err(io(target, "use as output folder")(std::io::Error::other(
                    "exists and is not a folder",
                )));
            }
            check_only_ours(target)?;
        }
        let staging = parent.join(format!(
            "{PARTIAL_PREFIX}{}-{}",
            std::process::id(),
            name.to_string_lossy()
        ));
        register(&staging);
        let out = OutputDir {
            target: target.to_path_buf(),
            staging,
            files: Vec::new(),
            done: false,
        };
        remove_any(&out.staging);
        std::fs::create_dir(&out.staging).map_err(io(&parent, "cannot write in the folder"))?;
        probe(&out.staging)?;
        Ok(out)
    }

    /// The folder the outputs will have.
    pub fn target(&self) -> &Path {
        &self.target
    }

    /// Writes output `name`: `write` fills the file at the path it is
    /// given; the file is synced.
    pub fn stage<E>(
        &mut self,
        name: &str,
        write: impl FnOnce(&Path) -> Result<(), E>,
    ) -> Result<(), E>
    where
        E: From<IoError>,
    {
        let path = self.staging.join(name);
        write(&path)?;
        sync_file(&path)?;
        self.files.push(name.to_string());
        Ok(())
    }

    /// Writes the manifest and swaps the staged folder into place in one
    /// step; the earlier outputs, if any, are then removed. Returns the
    /// names of the files written.
    pub fn commit(mut self) -> Result<Vec<String>, IoError> {
        let manifest = self.staging.join(MANIFEST);
        let list: String = self.files.iter().map(|f| format!("{f}\n")).collect();
        std::fs::write(&manifest, list).map_err(io(&manifest, "write"))?;
        sync_file(&manifest)?;
        sync_file(&self.staging)?;
        // Again: a file put into the folder during the run must not be
        // swapped out and deleted with the earlier outputs.
        if self.target.is_dir() {
            check_only_ours(&self.target)?;
        }
        {
            let mut registry = partial();
            swap(&mut registry, &self.staging, &self.target)?;
            COMMITTED.store(true, Ordering::SeqCst);
            // The staging name now holds the earlier outputs (or nothing);
            // it stays registered until removed.
        }
        self.done = true;
        remove_any(&self.staging);
        unregister(&self.staging);
        if let Some(parent) = self.target.parent().filter(|d| !d.as_os_str().is_empty()) {
            let _ = sync_file(parent);
        }
        Ok(std::mem::take(&mut self.files))
    }
}

impl Drop for OutputDir {
    fn drop(&mut self) {
        if !self.done {
            remove_any(&self.staging);
            unregister(&self.staging);
        }
    }
}

/// Refuses a folder that holds anything recon's manifest does not list
/// (after removing temporary files of dead processes, which older versions
/// of recon left inside the folder).
fn check_only_ours(dir: &Path) -> Result<(), IoError> {
    remove_stale_partials(dir);
    let listed: Vec<String> = std::fs::read_to_string(dir.join(MANIFEST))
        .map(|s| s.lines().map(str::to_string).collect())
        .unwrap_or_default();
    let mut foreign = Vec::new();
    for e in std::fs::read_dir(dir).map_err(io(dir, "read folder"))? {
        let e = e.map_err(io(dir, "read folder"))?;
        let name = e.file_name().to_string_lossy().to_string();
        if name != MANIFEST && !listed.contains(&name) {
            foreign.push(name);
        }
    }
    if foreign.is_empty() {
        return Ok(());
    }
    foreign.sort();
    let shown: Vec<&str> = foreign.iter().take(5).map(String::as_str).collect();
    Err(io(dir, "use as output folder")(std::io::Error::other(
        format!(
            "holds {} file(s) recon did not write ({}{}); a run replaces its output folder whole, \
         so choose an empty or new folder, or an earlier run's",
            foreign.len(),
            shown.join(", "),
            if foreign.len() > shown.len() {
                ", ..."
            } else {
                ""
            }
        ),
    )))
}

/// Puts folder `from` at `to` in one step: a rename when `to` is absent or
/// empty, else an exchange (`to`'s old contents end up at `from`).
fn swap(registry: &mut Vec<PathBuf>, from: &Path, to: &Path) -> Result<(), IoError> {
    match std::fs::rename(from, to) {
        Ok(()) => return Ok(()),
        Err(e) if to.exists() => {
            let _ = e;
        }
        Err(e) => return Err(io(to, "move the outputs into place")(e)),
    }
    use std::os::unix::ffi::OsStrExt;
    let c = |p: &Path| std::ffi::CString::new(p.as_os_str().as_bytes()).ok();
    let (Some(a), Some(b)) = (c(from), c(to)) else {
        return Err(io(to, "move the outputs into place")(
            std::io::Error::other("path holds a NUL byte"),
        ));
    };
    // SAFETY: two valid NUL-terminated paths, relative to the working folder.
    let r = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            a.as_ptr(),
            libc::AT_FDCWD,
            b.as_ptr(),
            libc::RENAME_EXCHANGE,
        )
    };
    if r == 0 {
        return Ok(());
    }
    let err = std::io::Error::last_os_error();
    match err.raw_os_error() {
        // The file system cannot exchange: move the old folder aside,
        // then the new one in, and put the old one back if that fails.
        Some(libc::EINVAL) | Some(libc::ENOSYS) | Some(libc::EOPNOTSUPP) => {
            let aside = from.with_extension("old");
            registry.push(aside.clone());
            std::fs::rename(to, &aside).map_err(io(to, "move the earlier outputs aside"))?;
            if let Err(e) = std::fs::rename(from, to) {
                let _ = std::fs::rename(&aside, to);
                registry.retain(|p| p != &aside);
                return Err(io(to, "move the outputs into place")(e));
            }
            std::fs::rename(&aside, from).map_err(io(from, "rename"))?;
            registry.retain(|p| p != &aside);
            Ok(())
        }
        _ => Err(io(to, "move the outputs into place")(err)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn output_folders_are_replaced_whole_and_foreign_files_kept() {
        let tmp = std::env::temp_dir().join(format!("recon-outdir-{}", std::process::id()));
        let target = tmp.join("out");
        let write = |d: &mut OutputDir, name: &str| {
            d.stage::<IoError>(name, |p| std::fs::write(p, name).map_err(io(p, "write")))
                .unwrap()
        };
        // First set: a and b.
        let mut d = OutputDir::prepare(&target).unwrap();
        write(&mut d, "a");
        write(&mut d, "b");
        assert_eq!(d.commit().unwrap(), ["a", "b"]);
        assert_eq!(names(&target), [MANIFEST, "a", "b"]);
        // Second set replaces it whole: b and c, no a.
        let mut d = OutputDir::prepare(&target).unwrap();
        write(&mut d, "b");
        write(&mut d, "c");
        d.commit().unwrap();
        assert_eq!(names(&target), [MANIFEST, "b", "c"]);
        // A file a user puts there during a run stops the commit, and stays.
        let mut d = OutputDir::prepare(&target).unwrap();
        write(&mut d, "d");
        std::fs::write(target.join("notes.txt"), "mine").unwrap();
        let err = d.commit().unwrap_err().to_string();
        assert!(err.contains("notes.txt"), "{err}");
        assert_eq!(names(&target), [MANIFEST, "b", "c", "notes.txt"]);
        // And from then on the folder is refused before any work.
        assert!(OutputDir::prepare(&target).is_err());
        // An abandoned build leaves nothing beside the folder.
        std::fs::remove_file(target.join("notes.txt")).unwrap();
        let mut d = OutputDir::prepare(&target).unwrap();
        write(&mut d, "e");
        drop(d);
        assert_eq!(names(&tmp), ["out"]);
        assert_eq!(names(&target), [MANIFEST, "b", "c"]);
        std::fs::remove_dir_all(&tmp).unwrap();
    }
}
