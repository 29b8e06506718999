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
//! Files are HDF5, written atomically, with a Fletcher-32 checksum on the
//! data and the full key stored inside; a file that fails to open, to read,
//! its checksum or its key is reported and recomputed, never used.

use recon_core::{Complex, Grid, Progress, Real};
use recon_encoding::NufftBackend;
use recon_encoding::{Engine, Plan};
use recon_io::hdf5::{self, H5Type};
use recon_io::{Context, IoError};
use sha2::{Digest, Sha256};
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
    h.update(b"recon Q v2; basis=");
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
        let file = hdf5::File::open(&path).at(&path, "open")?;
        let stored = recon_io::str_attr(&path, &file, "key")?;
        if stored != key {
            return Err(IoError::Layout {
                path: path.display().to_string(),
                name: "q".into(),
                problem: format!("belongs to key {stored}, not {key}"),
            });
        }
        let shape = shape_of(grid);
        recon_io::read_dataset::<Complex<T>>(&path, &file, "q", &shape).map(Some)
    }

    /// Stores Q for `key` atomically.
    pub fn store<T: Stored>(
        &self,
        key: &str,
        grid: &Grid,
        q: &[Complex<T>],
    ) -> Result<PathBuf, IoError> {
        let path = self.path(key);
        recon_io::write_atomic(&path, |tmp| {
            let file = hdf5::File::create(tmp).at(tmp, "create")?;
            recon_io::write_dataset(tmp, &file, "q", &shape_of(grid), q, true)?;
            recon_io::set_str_attr(tmp, &file, "key", key)?;
            recon_io::set_str_attr(tmp, &file, "precision", T::NAME)?;
            recon_io::set_attr(tmp, &file, "fov_mm", &grid.fov_mm)?;
            let n = grid.n.map(|n| n as u64);
            recon_io::set_attr(tmp, &file, "matrix", &n)?;
            file.close().at(tmp, "close")
        })?;
        Ok(path)
    }
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
