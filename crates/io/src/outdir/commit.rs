//! The pieces of an output folder's commit: the manifest of what recon
//! wrote, the check that a folder holds nothing else, the file-by-file move
//! into a mount point and the one-step swap of two folders.

use super::place::refuse;
use super::MANIFEST;
use crate::atomic::{io, remove_any, remove_stale_partials, sync_file, PARTIAL_PREFIX};
use crate::IoError;
use std::path::{Path, PathBuf};

/// Refuses a folder that holds anything recon's manifest does not list
/// (after removing temporary files of dead processes, which older versions
/// of recon left inside the folder). This process's own staging folder
/// (inside a mount point) is not a foreign file.
pub(super) fn check_only_ours(dir: &Path) -> Result<(), IoError> {
    remove_stale_partials(dir);
    let listed = manifest_of(dir);
    let own = format!("{PARTIAL_PREFIX}{}-", std::process::id());
    let mut foreign = Vec::new();
    for e in std::fs::read_dir(dir).map_err(io(dir, "read folder"))? {
        let e = e.map_err(io(dir, "read folder"))?;
        let name = e.file_name().to_string_lossy().to_string();
        if name != MANIFEST && !listed.contains(&name) && !name.starts_with(&own) {
            foreign.push(name);
        }
    }
    if foreign.is_empty() {
        return Ok(());
    }
    foreign.sort();
    let shown: Vec<&str> = foreign.iter().take(5).map(String::as_str).collect();
    Err(refuse(
        dir,
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
    ))
}

/// The names a folder's manifest lists (none without one).
fn manifest_of(dir: &Path) -> Vec<String> {
    std::fs::read_to_string(dir.join(MANIFEST))
        .map(|s| s.lines().map(str::to_string).collect())
        .unwrap_or_default()
}

/// Writes `dir`'s manifest atomically (a temporary file renamed over it).
fn write_manifest(dir: &Path, names: &[String]) -> Result<(), IoError> {
    let path = dir.join(MANIFEST);
    let tmp = crate::temp_path(&path);
    let list: String = names.iter().map(|f| format!("{f}\n")).collect();
    std::fs::write(&tmp, list).map_err(io(&path, "write"))?;
    sync_file(&tmp)?;
    std::fs::rename(&tmp, &path).map_err(io(&path, "rename into place"))
}

/// The commit into a mount point: the manifest first lists the old files
/// and the new; each new file replaces its namesake by one rename; the old
/// files the new set lacks are removed; the manifest then lists the new set.
pub(super) fn move_in(staging: &Path, target: &Path, files: &[String]) -> Result<(), IoError> {
    let old = manifest_of(target);
    let mut both = old.clone();
    both.extend(files.iter().filter(|f| !old.contains(f)).cloned());
    write_manifest(target, &both)?;
    for f in files {
        let to = target.join(f);
        std::fs::rename(staging.join(f), &to).map_err(io(&to, "move into place"))?;
    }
    for f in old.iter().filter(|f| !files.contains(f)) {
        remove_any(&target.join(f));
    }
    write_manifest(target, files)
}

/// Puts folder `from` at `to` in one step: a rename when `to` is absent or
/// empty, else an exchange (`to`'s old contents end up at `from`).
pub(super) fn swap(registry: &mut Vec<PathBuf>, from: &Path, to: &Path) -> Result<(), IoError> {
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
