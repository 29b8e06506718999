//! File I/O shared by the stages: atomic writes and small HDF5 helpers.
//!
//! Every file `recon` writes goes through [`write_atomic`] (one file) or
//! [`OutputDir`] (a run's whole output folder, swapped in with one rename),
//! so a crash, an error or an interrupt never leaves a half-written file or
//! a mix of two runs' outputs under the real names.

use hdf5::types::VarLenUnicode;
use hdf5::{Dataset, Group, H5Type};
pub use hdf5_metno as hdf5;
mod atomic;
pub mod geometry;
pub mod ismrmrd;
pub mod nifti;
pub mod scan;

mod outdir;
pub use atomic::{
    check_writable_file, remove_partial_files, remove_stale_partials, temp_path, write_atomic,
};
pub use outdir::{is_mount_point, Commit, OutputDir, Staging, MANIFEST};

use std::path::Path;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum IoError {
    #[error("{path}: {op}: {source}")]
    Io {
        path: String,
        op: &'static str,
        source: std::io::Error,
    },
    /// The output folder changed during the run: what is there was kept,
    /// and the new outputs were left in `kept`.
    #[error("{target}: {why}: it was kept, and the new outputs were left in {kept}")]
    Kept {
        target: String,
        why: String,
        kept: String,
    },
    #[error("no space left on device: writing {file} in {dir}")]
    NoSpace { dir: String, file: String },
    #[error("{path}: HDF5 {op}: {message}")]
    Hdf5 {
        path: String,
        op: String,
        message: String,
    },
    /// A file given as HDF5 that is not one.
    #[error(
        "{path} is not an HDF5 file: recon reads its own scan files and ISMRMRD files, both HDF5"
    )]
    NotHdf5 { path: String },
    /// Encoding another format (PNG, NIfTI) failed.
    #[error("{path}: writing {format}: {message}")]
    Encode {
        path: String,
        format: &'static str,
        message: String,
    },
    /// A dataset (or several, comma-separated), an attribute or a group
    /// that is not as expected.
    #[error("{path}: {} `{name}` {problem}", if name.contains(", ") { "datasets" } else { "dataset" })]
    Layout {
        path: String,
        name: String,
        problem: String,
    },
}

/// Writes `bytes` to `path` as they are (a staged or temporary file; for
/// a file in its final place see [`write_atomic`]).
pub fn write_bytes(path: &Path, bytes: &[u8]) -> Result<(), IoError> {
    std::fs::write(path, bytes).map_err(|source| IoError::Io {
        path: path.display().to_string(),
        op: "write",
        source,
    })
}

/// Opens the HDF5 file `path` for reading, after checking by its
/// signature that it is one: the HDF5 library's message for another file
/// names no format. Every reader of an input file opens it here.
pub fn open_hdf5(path: &Path) -> Result<hdf5::File, IoError> {
    check_hdf5(path)?;
    hdf5::File::open(path).at(path, "open")
}

/// Checks that `path` is an HDF5 file by its signature (at byte 0, or after
/// a user block of 512, 1024, 2048, ... bytes).
fn check_hdf5(path: &Path) -> Result<(), IoError> {
    use std::io::{Read, Seek, SeekFrom};
    const SIGNATURE: &[u8; 8] = b"\x89HDF\r\n\x1a\n";
    let io = |op, source| IoError::Io {
        path: path.display().to_string(),
        op,
        source,
    };
    let mut f = std::fs::File::open(path).map_err(|e| io("cannot read", e))?;
    let len = f.metadata().map_err(|e| io("cannot read", e))?.len();
    let mut at = 0u64;
    while at + 8 <= len {
        let mut head = [0u8; 8];
        f.seek(SeekFrom::Start(at))
            .map_err(|e| io("cannot read", e))?;
        f.read_exact(&mut head).map_err(|e| io("cannot read", e))?;
        if &head == SIGNATURE {
            return Ok(());
        }
        at = if at == 0 { 512 } else { 2 * at };
    }
    Err(IoError::NotHdf5 {
        path: path.display().to_string(),
    })
}

/// A dataset (or attribute) of a file that is not as expected.
pub(crate) fn layout(path: &Path, name: &str, problem: impl Into<String>) -> IoError {
    IoError::Layout {
        path: path.display().to_string(),
        name: name.to_string(),
        problem: problem.into(),
    }
}

/// The first axis along which `k` (cycles/FOV) lies beyond Nyquist for the
/// matrix `n`, `|k_d| > n_d / 2`, if any.
pub fn beyond_nyquist(k: [f64; 3], n: [usize; 3]) -> Option<usize> {
    (0..3).find(|&d| k[d].abs() > n[d] as f64 / 2.0 + 1e-6)
}

/// Refuses a trajectory whose samples all lie at one point of k-space: it
/// measures one Fourier coefficient, which no reconstruction turns into an
/// image (the solver would only break down on it).
pub fn check_spread(path: &Path, name: &str, traj: &[[f64; 3]]) -> Result<(), IoError> {
    let Some(first) = traj.first() else {
        return Ok(());
    };
    if traj.iter().all(|k| k == first) {
        return Err(layout(
            path,
            name,
            format!(
                "places all {} samples at k = {first:?} cycles/FOV: one point of k-space \
                 cannot be reconstructed into an image (check the trajectory's units and values)",
                traj.len()
            ),
        ));
    }
    Ok(())
}

/// Attaches a file path and an operation to an HDF5 error.
pub trait Context<T> {
    fn at(self, path: &Path, op: &str) -> Result<T, IoError>;
}

impl<T> Context<T> for hdf5::Result<T> {
    fn at(self, path: &Path, op: &str) -> Result<T, IoError> {
        self.map_err(|e| hdf5_error(path, op, &e.to_string()))
    }
}

/// An HDF5 error at `path`. A failed system call is reported as the OS
/// error it was, once, with the file's real name (not its temporary one):
/// HDF5's own message for it is a multi-line dump of the write's details.
fn hdf5_error(path: &Path, op: &str, message: &str) -> IoError {
    let real = real_path(path);
    let errno = message
        .split("errno = ")
        .nth(1)
        .and_then(|r| r.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|n| n.parse::<i32>().ok());
    match errno {
        Some(libc::ENOSPC) => no_space(path),
        Some(n) => IoError::Hdf5 {
            path: real.display().to_string(),
            op: op.to_string(),
            message: std::io::Error::from_raw_os_error(n).to_string(),
        },
        None => IoError::Hdf5 {
            path: path.display().to_string(),
            op: op.to_string(),
            message: message.to_string(),
        },
    }
}

/// An OS error of `op` on `path`, as every writer here names it: a full
/// disk as [`IoError::NoSpace`] (the file and its folder), anything else
/// with the file's real name. For encoders of other formats (NIfTI, PNG)
/// whose own errors carry the OS's.
pub fn os_error(path: &Path, op: &'static str, source: std::io::Error) -> IoError {
    atomic::io(path, op)(source)
}

/// "No space left on device" while writing `path` (its real name).
pub(crate) fn no_space(path: &Path) -> IoError {
    let real = real_path(path);
    IoError::NoSpace {
        dir: real
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or(Path::new("."))
            .display()
            .to_string(),
        file: real
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_default(),
    }
}

/// The final name of a file being written under [`temp_path`]'s name.
pub(crate) fn real_path(path: &Path) -> std::path::PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let real = name
        .strip_prefix(".partial-")
        .and_then(|r| r.split_once('-'))
        .map(|(_, rest)| rest.to_string());
    match (real, path.parent()) {
        // Inside a staging folder: name the output folder.
        (None, Some(dir)) => match dir.file_name().map(|d| d.to_string_lossy().into_owned()) {
            Some(d) if d.starts_with(".partial-") => real_path(dir).join(name),
            _ => path.to_path_buf(),
        },
        (Some(r), _) => path.with_file_name(r),
        (None, None) => path.to_path_buf(),
    }
}

/// Writes `data` as a dataset of `shape`, optionally chunked with HDF5's
/// Fletcher-32 checksum so that a corrupted file fails to read.
pub fn write_dataset<T: H5Type>(
    path: &Path,
    parent: &Group,
    name: &str,
    shape: &[usize],
    data: &[T],
    checksum: bool,
) -> Result<Dataset, IoError> {
    let n: usize = shape.iter().product();
    if n != data.len() {
        return Err(IoError::Layout {
            path: path.display().to_string(),
            name: name.to_string(),
            problem: format!("has {} values for shape {:?}", data.len(), shape),
        });
    }
    let builder = parent.new_dataset::<T>().shape(shape);
    let builder = if checksum {
        // Chunks of at most ~1 MiB along the slowest axis.
        let row: usize = shape[1..].iter().product::<usize>().max(1);
        let rows = (1 << 20) / (row * std::mem::size_of::<T>()).max(1);
        let mut chunk = shape.to_vec();
        chunk[0] = rows.clamp(1, shape[0].max(1));
        builder.chunk(chunk).fletcher32()
    } else {
        builder
    };
    let ds = builder.create(name).at(path, &format!("create `{name}`"))?;
    ds.write_raw(data).at(path, &format!("write `{name}`"))?;
    Ok(ds)
}

/// Reads a dataset, checking its shape.
pub fn read_dataset<T: H5Type>(
    path: &Path,
    parent: &Group,
    name: &str,
    shape: &[usize],
) -> Result<Vec<T>, IoError> {
    let ds = parent.dataset(name).at(path, &format!("open `{name}`"))?;
    if ds.shape() != shape {
        return Err(IoError::Layout {
            path: path.display().to_string(),
            name: name.to_string(),
            problem: format!("has shape {:?}, expected {:?}", ds.shape(), shape),
        });
    }
    ds.read_raw::<T>().at(path, &format!("read `{name}`"))
}

/// Sets a string attribute.
pub fn set_str_attr(
    path: &Path,
    loc: &hdf5::Location,
    name: &str,
    value: &str,
) -> Result<(), IoError> {
    let v: VarLenUnicode = value.parse().map_err(|e| IoError::Hdf5 {
        path: path.display().to_string(),
        op: format!("encode attribute `{name}`"),
        message: format!("{e}"),
    })?;
    loc.new_attr::<VarLenUnicode>()
        .create(name)
        .and_then(|a| a.write_scalar(&v))
        .at(path, &format!("write attribute `{name}`"))
}

/// Reads a string attribute.
pub fn str_attr(path: &Path, loc: &hdf5::Location, name: &str) -> Result<String, IoError> {
    let v: VarLenUnicode = loc
        .attr(name)
        .and_then(|a| a.read_scalar())
        .at(path, &format!("read attribute `{name}`"))?;
    Ok(v.as_str().to_string())
}

/// Sets a numeric array attribute.
pub fn set_attr<T: H5Type>(
    path: &Path,
    loc: &hdf5::Location,
    name: &str,
    value: &[T],
) -> Result<(), IoError> {
    loc.new_attr::<T>()
        .shape([value.len()])
        .create(name)
        .and_then(|a| a.write_raw(value))
        .at(path, &format!("write attribute `{name}`"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::atomic::io;

    #[test]
    fn failed_atomic_write_leaves_nothing() {
        let dir = std::env::temp_dir().join(format!("recon-io-test-{}", std::process::id()));
        let path = dir.join("x.bin");
        let r: Result<(), IoError> = write_atomic(&path, |tmp| {
            std::fs::write(tmp, b"half").unwrap();
            Err(IoError::Layout {
                path: "x".into(),
                name: "y".into(),
                problem: "fails".into(),
            })
        });
        assert!(r.is_err());
        assert!(!path.exists());
        assert!(!temp_path(&path).exists());
        write_atomic::<IoError>(&path, |tmp| {
            std::fs::write(tmp, b"whole").map_err(io(tmp, "write"))
        })
        .unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"whole");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
