//! Scan files: k-space samples with their trajectory, and optionally the
//! true image and an anatomical reference. HDF5, readable and writable with
//! h5py. Version 1 has one coil; version 2 (attribute `version` = 2 of
//! `/kspace`) has C coils, and optionally their noise and maps:
//!
//! - `/kspace/trajectory`: float32 [M, 3], cycles/FOV (kx, ky, kz);
//! - `/kspace/data`: float32 [M, 2] (version 1), or [C, M, 2] (version 2),
//!   real and imaginary parts;
//! - optional `/kspace/noise`: float32 [C, K, 2], K noise samples per coil
//!   (a noise scan), or `/kspace/noise_covariance`: float32 [C, C, 2], the
//!   coils' noise covariance; not both;
//! - optional `/coils/maps`: float32 [C, Nz, Ny, Nx, 2], coil sensitivities;
//! - attributes of `/kspace`: `fov_mm` (3 floats, x y z), `matrix` (3 ints, x y z);
//! - optional `/reference/truth`: float32 [Nz, Ny, Nx];
//! - optional `/reference/anatomy`: float32 [Az, Ay, Ax], a proton-density
//!   reference for the anatomical prior, on its own matrix (each size even)
//!   with attribute `fov_mm` (3 floats, x y z; the k-space FOV when absent),
//!   centred on the same isocentre.
//!
//! Reading checks everything and names the dataset and what was expected.

use crate::hdf5;
use crate::{beyond_nyquist, layout as bad, Context, IoError};
use hdf5::types::TypeDescriptor;
use recon_core::{Complex, Grid, Volume};
use std::path::Path;

mod bytes;

/// The coils' noise as a scan file gives it.
#[derive(Debug, Clone, PartialEq)]
pub enum CoilNoise {
    /// `[C, K]`: K samples per coil, coil after coil.
    Samples(Vec<Complex<f64>>),
    /// `[C, C]`, row-major.
    Covariance(Vec<Complex<f64>>),
}

/// The contents of a scan file.
#[derive(Debug, Clone, PartialEq)]
pub struct Scan {
    pub grid: Grid,
    /// Cycles/FOV.
    pub traj: Vec<[f64; 3]>,
    /// Receive coils C (1 for version 1 files).
    pub coils: usize,
    /// `[C, M]`: each coil's samples in turn.
    pub data: Vec<Complex<f64>>,
    pub noise: Option<CoilNoise>,
    /// Coil sensitivities, one per coil, x fastest.
    pub maps: Option<Vec<Vec<Complex<f64>>>>,
    /// The true image, x fastest, when known.
    pub truth: Option<Vec<f64>>,
    /// A proton-density reference image, on its own grid.
    pub anatomy: Option<Volume>,
}

/// A float32 dataset, opened and checked for type and declared shape, not
/// yet read: sizes are checked against each other and the memory before
/// anything is read.
fn open_f32(
    file: &hdf5::File,
    path: &Path,
    name: &str,
    shape: &[Option<usize>],
) -> Result<(hdf5::Dataset, Vec<usize>), IoError> {
    let ds = file
        .dataset(name)
        .map_err(|_| bad(path, name, "is missing"))?;
    let dtype = ds
        .dtype()
        .and_then(|t| t.to_descriptor())
        .at(path, &format!("read the type of `{name}`"))?;
    if dtype != TypeDescriptor::Float(hdf5::types::FloatSize::U4) {
        return Err(bad(
            path,
            name,
            format!("has type {dtype}, expected float32"),
        ));
    }
    let got = ds.shape();
    let fits = got.len() == shape.len()
        && got
            .iter()
            .zip(shape)
            .all(|(g, s)| s.is_none_or(|s| *g == s));
    if !fits {
        let want: Vec<String> = shape
            .iter()
            .map(|s| s.map_or("M".to_string(), |v| v.to_string()))
            .collect();
        return Err(bad(
            path,
            name,
            format!("has shape {got:?}, expected [{}]", want.join(", ")),
        ));
    }
    Ok((ds, got))
}

/// Reads a dataset checked by [`open_f32`], and checks its values are finite.
fn read_checked(
    ds: &hdf5::Dataset,
    path: &Path,
    name: &str,
    shape: &[usize],
) -> Result<Vec<f32>, IoError> {
    let v: Vec<f32> = ds.read_raw().at(path, &format!("read `{name}`"))?;
    if let Some(i) = v.iter().position(|x| !x.is_finite()) {
        let row: usize = shape[1..].iter().product();
        return Err(bad(
            path,
            name,
            format!(
                "holds {} at index {} (row {}): values must be finite",
                v[i],
                i,
                i / row.max(1)
            ),
        ));
    }
    Ok(v)
}

/// Refuses to read `bytes` more when the host cannot hold them.
pub(crate) fn check_fits(path: &Path, what: &str, bytes: u64) -> Result<(), IoError> {
    match recon_core::memory::available_host_bytes() {
        Some(free) if bytes > free => Err(bad(
            path,
            what,
            format!(
                "would need {:.2} GiB of memory to read, but {:.2} GiB is available",
                recon_core::memory::gib(bytes),
                recon_core::memory::gib(free)
            ),
        )),
        _ => Ok(()),
    }
}

/// A reconstruction matrix from a file, held to the config's limits: each
/// size even, from 4 to [`recon_core::MAX_N`].
pub(crate) fn check_matrix(path: &Path, what: &str, n: [i64; 3]) -> Result<[usize; 3], IoError> {
    let max = recon_core::MAX_N as i64;
    if n.iter().any(|&v| v < 4 || v % 2 != 0 || v > max) {
        return Err(bad(
            path,
            what,
            format!("is {n:?}: each size must be even, from 4 to {max}"),
        ));
    }
    Ok(n.map(|v| v as usize))
}

/// Attribute `name` of `owner` (a group or dataset path, for messages): 3 numbers.
fn attr3<T: hdf5::H5Type + Copy>(
    loc: &hdf5::Location,
    path: &Path,
    owner: &str,
    name: &str,
) -> Result<[T; 3], IoError> {
    let what = format!("{owner} attribute {name}");
    let a = loc.attr(name).map_err(|_| bad(path, &what, "is missing"))?;
    let v: Vec<T> = a
        .read_raw()
        .map_err(|e| bad(path, &what, format!("cannot be read as 3 numbers: {e}")))?;
    match v[..] {
        [a, b, c] => Ok([a, b, c]),
        _ => Err(bad(
            path,
            &what,
            format!("has {} values, expected 3 (x, y, z)", v.len()),
        )),
    }
}

/// Reads and checks a scan file. Samples beyond Nyquist (`|k_d| > N_d/2`)
/// are an error unless `allow_beyond_nyquist`.
pub fn read_scan(path: &Path, allow_beyond_nyquist: bool) -> Result<Scan, IoError> {
    let file = hdf5::File::open(path).at(path, "open")?;
    let ks = file
        .group("kspace")
        .map_err(|_| bad(path, "/kspace", "is missing (not a recon scan file?)"))?;
    let fov = attr3::<f64>(&ks, path, "/kspace", "fov_mm")?;
    let matrix = attr3::<i64>(&ks, path, "/kspace", "matrix")?;
    let n = check_matrix(path, "/kspace attribute matrix", matrix)?;
    let grid = Grid::new(n, fov)
        .map_err(|e| bad(path, "/kspace attributes matrix and fov_mm", e.to_string()))?;
    // Shapes first, checked against each other and the limits; then read.
    let (tds, tshape) = open_f32(&file, path, "kspace/trajectory", &[None, Some(3)])?;
    // [M, 2] (version 1) or [C, M, 2] (version 2).
    let rank = file.dataset("kspace/data").map_or(2, |d| d.ndim());
    let (dds, dshape) = if rank == 3 {
        open_f32(&file, path, "kspace/data", &[None, None, Some(2)])?
    } else {
        open_f32(&file, path, "kspace/data", &[None, Some(2)])?
    };
    let (coils, dm) = match dshape[..] {
        [c, m, _] => (c, m),
        _ => (1, dshape[0]),
    };
    if !(1..=MAX_COILS).contains(&coils) {
        return Err(bad(
            path,
            "kspace/data",
            format!("has {coils} coils: there must be 1 to {MAX_COILS}"),
        ));
    }
    if tshape[0] != dm {
        return Err(bad(
            path,
            "kspace/data",
            format!(
                "has {dm} samples per coil but kspace/trajectory has {}",
                tshape[0]
            ),
        ));
    }
    let m = tshape[0];
    if m == 0 {
        return Err(bad(path, "kspace/trajectory", "holds no samples"));
    }
    if m > recon_core::MAX_SAMPLES {
        return Err(bad(
            path,
            "kspace/trajectory",
            format!(
                "declares {m} samples; at most {} are allowed",
                recon_core::MAX_SAMPLES
            ),
        ));
    }
    // float32 as read, then float64: 3 + 2 C numbers per sample each.
    check_fits(
        path,
        "kspace/trajectory and kspace/data",
        12 * (3 + 2 * coils as u64) * m as u64,
    )?;
    let t = read_checked(&tds, path, "kspace/trajectory", &tshape)?;
    let d = read_checked(&dds, path, "kspace/data", &dshape)?;
    let traj: Vec<[f64; 3]> = t
        .chunks_exact(3)
        .map(|k| [k[0], k[1], k[2]].map(f64::from))
        .collect();
    if !allow_beyond_nyquist {
        for (m, k) in traj.iter().enumerate() {
            if let Some(d) = beyond_nyquist(*k, n) {
                return Err(bad(
                    path,
                    "kspace/trajectory",
                    format!(
                        "sample {m} has k{} = {} beyond Nyquist ({} for matrix {}): check the units (cycles/FOV), or opt in with scan.allow_beyond_nyquist",
                        ["x", "y", "z"][d], k[d], n[d] as f64 / 2.0, n[d]
                    ),
                ));
            }
        }
    }
    let data = complex(d);
    let image = |name: &str| -> Result<Option<Vec<f64>>, IoError> {
        if !file.link_exists(name) {
            return Ok(None);
        }
        let shape = [n[2], n[1], n[0]];
        let (ds, _) = open_f32(&file, path, name, &shape.map(Some)).map_err(|e| match e {
            IoError::Layout { problem, .. } if problem.contains("shape") => bad(
                path,
                name,
                format!("{problem}: it must match /kspace matrix {matrix:?} as [Nz, Ny, Nx]"),
            ),
            e => e,
        })?;
        check_fits(path, name, 12 * grid.len() as u64)?;
        let v = read_checked(&ds, path, name, &shape)?;
        Ok(Some(v.into_iter().map(f64::from).collect()))
    };
    Ok(Scan {
        grid,
        traj,
        coils,
        truth: image("reference/truth")?,
        anatomy: anatomy(&file, path, &grid)?,
        noise: coil_noise(&file, path, coils)?,
        maps: maps(&file, path, &grid, coils)?,
        data,
    })
}

/// The most coils a scan file may have.
pub const MAX_COILS: usize = 1024;

/// Float32 pairs `[..., 2]` as complex numbers.
fn complex(v: Vec<f32>) -> Vec<Complex<f64>> {
    v.chunks_exact(2)
        .map(|c| Complex::new(c[0] as f64, c[1] as f64))
        .collect()
}

/// Fails unless the dataset's first axis counts the data's `coils`.
fn same_coils(path: &Path, name: &str, got: usize, coils: usize) -> Result<(), IoError> {
    if got == coils {
        return Ok(());
    }
    Err(bad(
        path,
        name,
        format!("has {got} channels but kspace/data has {coils}"),
    ))
}

/// `/kspace/noise` or `/kspace/noise_covariance`, when present.
fn coil_noise(file: &hdf5::File, path: &Path, coils: usize) -> Result<Option<CoilNoise>, IoError> {
    let (samples, covariance) = ("kspace/noise", "kspace/noise_covariance");
    match (file.link_exists(samples), file.link_exists(covariance)) {
        (false, false) => Ok(None),
        (true, true) => Err(bad(
            path,
            covariance,
            "and kspace/noise are both present: give the noise samples or their covariance, not both",
        )),
        (true, false) => {
            let (ds, shape) = open_f32(file, path, samples, &[None, None, Some(2)])?;
            same_coils(path, samples, shape[0], coils)?;
            if shape[1] == 0 || shape[1] > recon_core::MAX_SAMPLES {
                return Err(bad(
                    path,
                    samples,
                    format!("holds {} samples per coil: there must be 1 to {}", shape[1], recon_core::MAX_SAMPLES),
                ));
            }
            check_fits(path, samples, 24 * (coils * shape[1]) as u64)?;
            Ok(Some(CoilNoise::Samples(complex(read_checked(&ds, path, samples, &shape)?))))
        }
        (false, true) => {
            let (ds, shape) = open_f32(file, path, covariance, &[None, None, Some(2)])?;
            same_coils(path, covariance, shape[0], coils)?;
            same_coils(path, covariance, shape[1], coils)?;
            let v = complex(read_checked(&ds, path, covariance, &shape)?);
            Ok(Some(CoilNoise::Covariance(v)))
        }
    }
}

/// `/coils/maps` on the k-space grid, when present.
fn maps(
    file: &hdf5::File,
    path: &Path,
    grid: &Grid,
    coils: usize,
) -> Result<Option<Vec<Vec<Complex<f64>>>>, IoError> {
    let name = "coils/maps";
    if !file.link_exists(name) {
        return Ok(None);
    }
    let (ds, shape) = open_f32(file, path, name, &[None, None, None, None, Some(2)])?;
    same_coils(path, name, shape[0], coils)?;
    let n = grid.n;
    if shape[1..4] != [n[2], n[1], n[0]] {
        return Err(bad(
            path,
            name,
            format!(
                "has maps of {:?} voxels: they must match /kspace matrix {:?} as [Nz, Ny, Nx]",
                &shape[1..4],
                n
            ),
        ));
    }
    check_fits(path, name, 24 * (coils * grid.len()) as u64)?;
    let v = complex(read_checked(&ds, path, name, &shape)?);
    Ok(Some(
        v.chunks_exact(grid.len()).map(|c| c.to_vec()).collect(),
    ))
}

/// `/reference/anatomy` on its own grid, when present.
fn anatomy(file: &hdf5::File, path: &Path, grid: &Grid) -> Result<Option<Volume>, IoError> {
    let name = "reference/anatomy";
    if !file.link_exists(name) {
        return Ok(None);
    }
    let (ds, shape) = open_f32(file, path, name, &[None, None, None])?;
    let fov = if ds.attr("fov_mm").is_ok() {
        attr3::<f64>(&ds, path, "/reference/anatomy", "fov_mm")?
    } else {
        grid.fov_mm
    };
    // Grid::new holds each size to 2..=MAX_N before anything is read.
    let g = Grid::new([shape[2], shape[1], shape[0]], fov).map_err(|e| {
        bad(
            path,
            name,
            format!("shape {shape:?} and fov_mm {fov:?}: {e}"),
        )
    })?;
    check_fits(path, name, 12 * g.len() as u64)?;
    let v = read_checked(&ds, path, name, &shape)?;
    let vol = Volume::new(g, v.into_iter().map(f64::from).collect())
        .map_err(|e| bad(path, name, e.to_string()))?;
    Ok(Some(vol))
}

/// Writes a scan file atomically.
pub fn write_scan(path: &Path, scan: &Scan) -> Result<(), IoError> {
    crate::write_atomic(path, |tmp| {
        let file = hdf5::File::create(tmp).at(tmp, "create")?;
        let ks = file.create_group("kspace").at(tmp, "create /kspace")?;
        let m = scan.traj.len();
        let t: Vec<f32> = scan.traj.iter().flat_map(|k| k.map(|v| v as f32)).collect();
        let d: Vec<f32> = scan
            .data
            .iter()
            .flat_map(|c| [c.re as f32, c.im as f32])
            .collect();
        let pairs = |v: &[Complex<f64>]| -> Vec<f32> {
            v.iter().flat_map(|c| [c.re as f32, c.im as f32]).collect()
        };
        let c = scan.coils;
        let v2 = c > 1 || scan.noise.is_some() || scan.maps.is_some();
        crate::write_dataset(tmp, &ks, "trajectory", &[m, 3], &t, false)?;
        if v2 {
            crate::write_dataset(tmp, &ks, "data", &[c, m, 2], &d, false)?;
            crate::set_attr(tmp, &ks, "version", &[2i64])?;
        } else {
            crate::write_dataset(tmp, &ks, "data", &[m, 2], &d, false)?;
        }
        crate::set_attr(tmp, &ks, "fov_mm", &scan.grid.fov_mm)?;
        crate::set_attr(tmp, &ks, "matrix", &scan.grid.n.map(|v| v as i64))?;
        match &scan.noise {
            Some(CoilNoise::Samples(v)) => {
                let k = v.len() / c.max(1);
                crate::write_dataset(tmp, &ks, "noise", &[c, k, 2], &pairs(v), false)?;
            }
            Some(CoilNoise::Covariance(v)) => {
                crate::write_dataset(tmp, &ks, "noise_covariance", &[c, c, 2], &pairs(v), false)?;
            }
            None => {}
        }
        let n = scan.grid.n;
        let shape = [n[2], n[1], n[0]];
        if let Some(maps) = &scan.maps {
            let g = file.create_group("coils").at(tmp, "create /coils")?;
            let flat: Vec<Complex<f64>> = maps.concat();
            crate::write_dataset(
                tmp,
                &g,
                "maps",
                &[c, n[2], n[1], n[0], 2],
                &pairs(&flat),
                false,
            )?;
        }
        let f32s = |v: &[f64]| -> Vec<f32> { v.iter().map(|x| *x as f32).collect() };
        if scan.truth.is_some() || scan.anatomy.is_some() {
            let r = file
                .create_group("reference")
                .at(tmp, "create /reference")?;
            if let Some(t) = &scan.truth {
                crate::write_dataset(tmp, &r, "truth", &shape, &f32s(t), false)?;
            }
            if let Some(a) = &scan.anatomy {
                let m = a.grid.n;
                let ds = crate::write_dataset(
                    tmp,
                    &r,
                    "anatomy",
                    &[m[2], m[1], m[0]],
                    &f32s(&a.values),
                    false,
                )?;
                crate::set_attr(tmp, &ds, "fov_mm", &a.grid.fov_mm)?;
            }
        }
        file.close().at(tmp, "close")
    })
}
