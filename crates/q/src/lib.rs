//! Q, the kernel that makes F^H F a Toeplitz product, through a cache.
//!
//! Q (defined and computed by recon-encoding's plan) depends only on the
//! trajectory, the voxel basis, the grid and the engine, never on the scan
//! data, so it is computed once per trajectory and cached.
//!
//! The cache is content-addressed: the key is a SHA-256 of everything Q
//! depends on (trajectory, basis, grid, FOV, precision, and the engine with
//! its version, tolerance and kernel: a Q computed by one engine is never
//! served for another).
//! Files are HDF5, written atomically, with the full key stored inside; a
//! file that fails to open, to read, its checksum or its key is reported
//! and recomputed, never used. Key design decision: a hit reads the file at
//! the disk's (or page cache's) speed. Q is one contiguous dataset, in the
//! layout the solver uploads, with a CRC-32 per block of [`BLOCK`] bytes
//! beside it; a hit finds the data's offset through HDF5 and reads and
//! checks the blocks side by side (1 GiB at 256^3).
//! (HDF5's own Fletcher-32 filter checks chunk by chunk on one thread,
//! through a chunk cache and a second copy: 1.1 s for that GiB.)

use rayon::prelude::*;
use recon_core::{Complex, Grid, Progress, Real};
use recon_encoding::NufftBackend;
use recon_encoding::{Engine, Plan};
use recon_io::hdf5::{self, H5Type};
use recon_io::{Context, IoError};
use sha2::{Digest, Sha256};
use std::mem::size_of;
use std::path::PathBuf;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum QError {
    #[error(transparent)]
    Backend(#[from] recon_core::Error),
    #[error("Q cache: {0}")]
    Io(#[from] IoError),
}

/// Computes Q by the plan's engine.
pub fn compute<B: NufftBackend>(
    plan: &Plan<'_, B>,
    progress: Progress<'_>,
) -> Result<Vec<Complex<B::Real>>, QError> {
    let mut q = vec![Complex::default(); plan.grid().doubled().iter().product()];
    plan.q(&mut q, progress)?;
    Ok(q)
}

/// The cache key: SHA-256 over everything Q depends on, as hex.
pub fn key(grid: &Grid, traj: &[[f64; 3]], precision: &str, engine: &Engine) -> String {
    let mut h = Sha256::new();
    h.update(b"recon Q v3; basis=");
    h.update(grid.basis.id().as_bytes());
    h.update(b"; engine=");
    h.update(engine.id().as_bytes());
    h.update(b"; precision=");
    h.update(precision.as_bytes());
    for n in grid.n {
        h.update((n as u64).to_le_bytes());
    }
    for f in grid.fov_mm {
        h.update(f.to_le_bytes());
    }
    h.update((traj.len() as u64).to_le_bytes());
    for k in traj {
        for v in k {
            h.update(v.to_le_bytes());
        }
    }
    hex::encode(h.finalize())
}

/// How Q was obtained.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CacheStatus {
    /// Loaded from a valid cache file.
    Hit,
    /// No file for this key: computed and stored.
    Miss,
    /// A file existed but was unusable (named by the reason): recomputed and replaced.
    Invalid(String),
    /// No cache in use.
    Disabled,
    /// Computed, but the cache file could not be written (named by the
    /// reason: a read-only or full folder, say). The cache is an
    /// optimisation: the run goes on.
    NotStored(String),
}

impl CacheStatus {
    /// The report's word: "hit", "miss", "invalid", "disabled" or "not-stored".
    pub fn word(&self) -> &'static str {
        match self {
            CacheStatus::Hit => "hit",
            CacheStatus::Miss => "miss",
            CacheStatus::Invalid(_) => "invalid",
            CacheStatus::Disabled => "disabled",
            CacheStatus::NotStored(_) => "not-stored",
        }
    }
}

/// A folder of cached Q files.
#[derive(Debug, Clone)]
pub struct Cache {
    pub dir: PathBuf,
}

/// Precisions Q can be cached in.
pub trait Stored: Real + H5Type {}
impl Stored for f32 {}
impl Stored for f64 {}

impl Cache {
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Cache { dir: dir.into() }
    }

    /// The file holding Q for `key`.
    pub fn path(&self, key: &str) -> PathBuf {
        self.dir.join(format!("q-{key}.h5"))
    }

    /// Loads Q for `key`. `Ok(None)`: no file. `Err(reason)`: a file exists
    /// but is unusable.
    pub fn load<T: Stored>(
        &self,
        key: &str,
        grid: &Grid,
    ) -> Result<Option<Vec<Complex<T>>>, IoError> {
        let path = self.path(key);
        if !path.exists() {
            return Ok(None);
        }
        let layout = |problem: String| IoError::Layout {
            path: path.display().to_string(),
            name: "q".into(),
            problem,
        };
        let (offset, len, crcs) = {
            let file = hdf5::File::open(&path).at(&path, "open")?;
            let stored = recon_io::str_attr(&path, &file, "key")?;
            if stored != key {
                return Err(layout(format!("belongs to key {stored}, not {key}")));
            }
            let ds = file.dataset("q").at(&path, "open `q`")?;
            let shape = shape_of(grid);
            if ds.shape() != shape {
                return Err(layout(format!(
                    "has shape {:?}, expected {shape:?}",
                    ds.shape()
                )));
            }
            let want = <Complex<T> as H5Type>::type_descriptor();
            let have = ds
                .dtype()
                .and_then(|t| t.to_descriptor())
                .at(&path, "read the type of `q`")?;
            if have != want {
                return Err(layout(format!("holds {have}, expected {want}")));
            }
            let offset = ds.offset().ok_or_else(|| {
                layout("is not stored contiguously (a cache file of an older recon)".into())
            })?;
            let len: usize = shape.iter().product();
            let blocks = (len * size_of::<Complex<T>>()).div_ceil(BLOCK);
            let crcs = recon_io::read_dataset::<u32>(&path, &file, "crc32", &[blocks])?;
            (offset, len, crcs)
        };
        let q = read_blocks::<T>(&path, offset, len, &crcs)?;
        Ok(Some(q))
    }

    /// Stores Q for `key` atomically.
    pub fn store<T: Stored>(
        &self,
        key: &str,
        grid: &Grid,
        q: &[Complex<T>],
    ) -> Result<PathBuf, IoError> {
        let path = self.path(key);
        let crcs: Vec<u32> = bytes(q).par_chunks(BLOCK).map(crc32fast::hash).collect();
        recon_io::write_atomic(&path, |tmp| {
            let file = hdf5::File::create(tmp).at(tmp, "create")?;
            recon_io::write_dataset(tmp, &file, "q", &shape_of(grid), q, false)?;
            recon_io::write_dataset(tmp, &file, "crc32", &[crcs.len()], &crcs, false)?;
            recon_io::set_str_attr(tmp, &file, "key", key)?;
            recon_io::set_str_attr(tmp, &file, "precision", T::NAME)?;
            recon_io::set_attr(tmp, &file, "fov_mm", &grid.fov_mm)?;
            let n = grid.n.map(|n| n as u64);
            recon_io::set_attr(tmp, &file, "matrix", &n)?;
            recon_io::set_attr(tmp, &file, "crc32_block_bytes", &[BLOCK as u64])?;
            file.close().at(tmp, "close")
        })?;
        Ok(path)
    }
}

/// Bytes per checked block of Q's data: small enough that the blocks of a
/// 64^3 grid's Q keep a few threads busy, large enough that reads stay
/// long.
pub const BLOCK: usize = 4 << 20;

/// `q`'s bytes (a complex value is two reals, `#[repr(C)]`).
fn bytes<T: Stored>(q: &[Complex<T>]) -> &[u8] {
    // SAFETY: Complex<T> is #[repr(C)] { re, im } of f32 or f64: plain
    // bytes, no padding.
    unsafe { std::slice::from_raw_parts(q.as_ptr().cast::<u8>(), std::mem::size_of_val(q)) }
}

/// `len` zeros, allocated zeroed (for a large vector the system hands out
/// pages that are zero until first written: the reads below fault them in
/// side by side instead of a memset on one thread first).
fn zeroed<T: Stored>(len: usize) -> Vec<Complex<T>> {
    if len == 0 {
        return Vec::new();
    }
    let layout = std::alloc::Layout::array::<Complex<T>>(len).expect("Q fits in memory");
    // SAFETY: a non-zero layout; all-zero bytes are a valid Complex<T>
    // (0.0 + 0.0i); the vector takes the allocation with that layout.
    unsafe {
        let p = std::alloc::alloc_zeroed(layout).cast::<Complex<T>>();
        if p.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        Vec::from_raw_parts(p, len, len)
    }
}

/// `len` complex values from `path` at byte `offset`, block by block side
/// by side, each block checked against its CRC-32 in `crcs`.
fn read_blocks<T: Stored>(
    path: &std::path::Path,
    offset: u64,
    len: usize,
    crcs: &[u32],
) -> Result<Vec<Complex<T>>, IoError> {
    use std::os::unix::fs::FileExt;
    let file = std::fs::File::open(path).map_err(|source| IoError::Io {
        path: path.display().to_string(),
        op: "open",
        source,
    })?;
    let mut q = zeroed::<T>(len);
    // SAFETY: as `bytes`, mutably: any bytes are valid reals.
    let raw = unsafe {
        std::slice::from_raw_parts_mut(q.as_mut_ptr().cast::<u8>(), std::mem::size_of_val(&q[..]))
    };
    raw.par_chunks_mut(BLOCK)
        .zip(crcs)
        .enumerate()
        .try_for_each(|(i, (block, &crc))| {
            file.read_exact_at(block, offset + (i * BLOCK) as u64)
                .map_err(|source| IoError::Io {
                    path: path.display().to_string(),
                    op: "read Q",
                    source,
                })?;
            if crc32fast::hash(block) != crc {
                return Err(IoError::Layout {
                    path: path.display().to_string(),
                    name: "q".into(),
                    problem: format!("block {i} fails its CRC-32 (the file is damaged)"),
                });
            }
            Ok(())
        })?;
    Ok(q)
}

/// Q's array shape, `[2Nz, 2Ny, 2Nx]`.
fn shape_of(grid: &Grid) -> [usize; 3] {
    let d = grid.doubled();
    [d[2], d[1], d[0]]
}

/// Loads Q from the cache or computes (and stores) it.
#[allow(clippy::type_complexity)]
pub fn load_or_compute<B>(
    plan: &Plan<'_, B>,
    cache: Option<&Cache>,
    progress: Progress<'_>,
) -> Result<(Vec<Complex<B::Real>>, CacheStatus), QError>
where
    B: NufftBackend,
    B::Real: Stored,
{
    let Some(cache) = cache else {
        return Ok((compute(plan, progress)?, CacheStatus::Disabled));
    };
    let grid = plan.grid();
    // Housekeeping: temporary files of runs that were killed while storing.
    recon_io::remove_stale_partials(&cache.dir);
    let key = key_of(plan);
    let status = match cache.load::<B::Real>(&key, grid) {
        Ok(Some(q)) => return Ok((q, CacheStatus::Hit)),
        Ok(None) => CacheStatus::Miss,
        Err(e) => CacheStatus::Invalid(e.to_string()),
    };
    let q = compute(plan, progress)?;
    let status = match cache.store(&key, grid, &q) {
        Ok(_) => status,
        Err(e) => CacheStatus::NotStored(e.to_string()),
    };
    Ok((q, status))
}

/// The cache key of the plan's Q.
pub fn key_of<B: NufftBackend>(plan: &Plan<'_, B>) -> String {
    key(plan.grid(), plan.traj(), B::Real::NAME, &plan.engine())
}

/// The path the cache file of the plan's Q has.
pub fn cache_file<B: NufftBackend>(cache: &Cache, plan: &Plan<'_, B>) -> PathBuf {
    cache.path(&key_of(plan))
}

#[cfg(test)]
mod key_tests {
    use super::*;

    #[test]
    fn the_key_depends_on_the_voxel_basis() {
        let grid = Grid::new([8, 8, 8], [200.0; 3]).unwrap();
        let traj = [[0.5, -1.0, 2.0], [0.0, 0.0, 0.0]];
        let e = Engine::Exact;
        let boxed = key(&grid, &traj, "f32", &e);
        let delta = key(&grid.with_basis(recon_core::Basis::Delta), &traj, "f32", &e);
        assert_ne!(boxed, delta);
        assert_eq!(boxed, key(&grid, &traj, "f32", &e));
    }
}
