//! Where a run's outputs go: the target's path as meant (a trailing `/.`
//! dropped, a link to a folder followed), and whether it is a mount point,
//! which no rename can replace.

use crate::atomic::io;
use crate::IoError;
use std::path::{Component, Path, PathBuf};

pub(super) fn refuse(path: &Path, why: impl Into<String>) -> IoError {
    io(path, "use as output folder")(std::io::Error::other(why.into()))
}

/// `target` as meant: `.` components dropped (`out/.` is `out`), and a
/// symbolic link to a folder followed.
pub(super) fn resolve(target: &Path) -> Result<PathBuf, IoError> {
    let mut t: PathBuf = target
        .components()
        .filter(|c| *c != Component::CurDir)
        .collect();
    if !matches!(t.components().next_back(), Some(Component::Normal(_))) {
        return Err(refuse(target, "name a folder (not `.`, `..` or a root)"));
    }
    if std::fs::symlink_metadata(&t).is_ok_and(|m| m.file_type().is_symlink()) {
        let to = std::fs::read_link(&t).unwrap_or_default();
        match std::fs::canonicalize(&t) {
            Ok(real) if real.is_dir() => t = real,
            Ok(real) => {
                return Err(refuse(
                    target,
                    format!(
                        "is a symbolic link to {}, which is not a folder",
                        real.display()
                    ),
                ))
            }
            Err(_) => {
                return Err(refuse(
                    target,
                    format!(
                        "is a symbolic link to {}, which does not exist: make that folder, or remove the link",
                        to.display()
                    ),
                ))
            }
        }
    }
    Ok(t)
}

pub(super) fn parent_of(target: &Path) -> PathBuf {
    match target.parent().filter(|d| !d.as_os_str().is_empty()) {
        Some(d) => d.to_path_buf(),
        None => PathBuf::from("."),
    }
}

/// Whether `dir` is a mount point: on another device than its parent, or
/// listed as one in /proc/self/mountinfo (a bind mount of the same file
/// system).
pub fn is_mount_point(dir: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let Ok(real) = std::fs::canonicalize(dir) else {
        return false;
    };
    let Some(parent) = real.parent() else {
        return true; // the root
    };
    match (std::fs::metadata(&real), std::fs::metadata(parent)) {
        (Ok(a), Ok(b)) if a.dev() != b.dev() => return true,
        _ => {}
    }
    let Ok(info) = std::fs::read_to_string("/proc/self/mountinfo") else {
        return false;
    };
    info.lines()
        .filter_map(|l| l.split(' ').nth(4))
        .any(|m| Path::new(&unescape_mount(m)) == real)
}

/// A mountinfo path with its octal escapes (`\040` for a space) undone.
fn unescape_mount(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let octal = b
            .get(i + 1..i + 4)
            .filter(|d| b[i] == b'\\' && d.iter().all(|c| (b'0'..=b'7').contains(c)));
        match octal {
            Some(d) => {
                out.push((d[0] - b'0') * 64 + (d[1] - b'0') * 8 + (d[2] - b'0'));
                i += 4;
            }
            None => {
                out.push(b[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_escapes_are_undone() {
        assert_eq!(unescape_mount(r"/data/my\040out"), "/data/my out");
        assert_eq!(unescape_mount(r"/a\134b"), r"/a\b");
        assert_eq!(unescape_mount(r"/a\9"), r"/a\9");
        assert!(is_mount_point(Path::new("/")));
        assert!(!is_mount_point(
            &std::env::temp_dir().join("recon-no-such-folder")
        ));
    }
}
