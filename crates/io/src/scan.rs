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
//! - optional attributes of `/kspace`, all four or none: `position_mm`,
//!   `read_dir`, `phase_dir`, `slice_dir` (3 floats each), where the image
//!   lies in the scanner, with ISMRMRD's meaning ([`crate::geometry`]);
//! - optional `/reference/truth`: float32 [Nz, Ny, Nx];
//! - optional `/reference/anatomy`: float32 [Az, Ay, Ax], a proton-density
//!   reference for the anatomical prior, on its own matrix (each size even)
//!   with attribute `fov_mm` (3 floats, x y z; the k-space FOV when absent),
//!   centred on the same isocentre.
//!
//! Attribute `version` of `/kspace` (1 or 2) is always written; a file
//! without it is read by its data's rank, and any other version is refused.
//!
//! Reading checks every shape first, naming each axis, then the memory the
//! read takes against every limit that applies, and only then reads; it
//! names the dataset and what was expected. A group that is present but
//! cannot be read is an error, never taken for an absent one.

use crate::geometry::{Geometry, Part};
use crate::hdf5;
use crate::{beyond_nyquist, layout as bad, IoError};
use datasets::{attr3, check_numbers, open_numbers, optional, read_checked, real_rank, Axis, Need};
use recon_core::{Complex, Grid, Volume};
use std::path::Path;

mod arrays;
mod bytes;
mod datasets;
mod series;
mod write;
pub use arrays::check_arrays;
pub(crate) use datasets::Need as ReadNeed;
pub(crate) use datasets::{check_fits, check_matrix};
pub use write::write_scan;

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
    /// Where the image lies in the scanner; `None`: centred on the
    /// isocentre along the scanner's axes (synthetic data).
    pub geometry: Option<Geometry>,
    /// A scan of several images (an ISMRMRD file's slices, contrasts, ...):
    /// the samples of each, in order, each with its own geometry (and
    /// `geometry` is `None`). Empty for a scan of one image.
    pub parts: Vec<Part>,
}

/// How a file is read.
#[derive(Clone, Copy, Default)]
pub struct ReadOptions<'a> {
    /// Accept samples beyond Nyquist (`|k_d| > N_d/2`).
    pub allow_beyond_nyquist: bool,
    /// The process (its id) the scan is handed to, which decodes its own
    /// copy while this one still holds its: recon's reader process. The
    /// memory check then counts both copies, and that process's limits.
    pub handed_to: Option<u32>,
    /// Told the bytes the file's datasets declare, once their shapes are
    /// checked and before they are read (a reader's time limit grows with them).
    pub on_declared: Option<&'a dyn Fn(u64)>,
}

impl ReadOptions<'_> {
    pub(crate) fn declared(&self, bytes: u64) {
        if let Some(f) = self.on_declared {
            f(bytes)
        }
    }
}

/// The most coils a scan file may have.
pub const MAX_COILS: usize = 1024;

/// The smallest largest root-sum-of-squares of coil maps that float32
/// carries with its full precision: maps scaled below it lose digits (a
/// scale of 1e-40 is below float32's normal range) and are refused.
pub const MIN_MAPS_SCALE: f64 = 1e-30;

/// Reads and checks a scan file. Samples beyond Nyquist (`|k_d| > N_d/2`)
/// are an error unless `allow_beyond_nyquist`.
pub fn read_scan(path: &Path, allow_beyond_nyquist: bool) -> Result<Scan, IoError> {
    read_scan_with(
        path,
        &ReadOptions {
            allow_beyond_nyquist,
            ..Default::default()
        },
    )
}

/// [`read_scan`] with all its options.
pub fn read_scan_with(path: &Path, opts: &ReadOptions) -> Result<Scan, IoError> {
    let file = crate::open_hdf5(path)?;
    let ks = file
        .group("kspace")
        .map_err(|_| bad(path, "/kspace", "is missing (not a recon scan file?)"))?;
    let version = datasets::version(&ks, path)?;
    let fov = attr3::<f64>(&ks, path, "/kspace", "fov_mm")?;
    let matrix = attr3::<i64>(&ks, path, "/kspace", "matrix")?;
    let n = check_matrix(path, "/kspace attribute matrix", matrix)?;
    let grid = Grid::new(n, fov)
        .map_err(|e| bad(path, "/kspace attributes matrix and fov_mm", e.to_string()))?;
    let geometry = read_geometry(&ks, path)?;
    let voxels = [
        Axis::Named("Nz", n[2]),
        Axis::Named("Ny", n[1]),
        Axis::Named("Nx", n[0]),
    ];
    // A shape error of an image on the grid says where the grid comes from.
    let on_the_grid = |e: IoError| match e {
        IoError::Layout {
            path,
            name,
            problem,
        } if problem.contains("shape") => IoError::Layout {
            path,
            name,
            problem: format!("{problem}: it must match /kspace matrix {matrix:?} as [Nz, Ny, Nx]"),
        },
        e => e,
    };

    // Every shape first, checked against each other and the limits.
    // [M, 3]; or [M, 2] (k_x, k_y) on a 2-D grid (matrix z = 1).
    let tshape_stored = file.dataset("kspace/trajectory").map(|d| d.shape()).ok();
    let planar = tshape_stored
        .as_ref()
        .is_some_and(|s| s.len() == 2 && s[1] == 2);
    if planar && !grid.is_2d() {
        return Err(bad(
            path,
            "kspace/trajectory",
            format!(
                "has shape {:?}, expected [M, 3]: a 2-D trajectory [M, 2] needs a 2-D /kspace matrix (z = 1), and {matrix:?} is 3-D",
                tshape_stored.unwrap_or_default()
            ),
        ));
    }
    let width = if planar { 2 } else { 3 };
    let (tds, tshape) = open_numbers(
        &file,
        path,
        "kspace/trajectory",
        &[Axis::Any("M"), Axis::Is(width)],
    )?;
    // [M, 2] (version 1) or [C, M, 2] (version 2).
    let rank = file.dataset("kspace/data").map_or(2, |d| real_rank(&d));
    let rank = match version {
        Some(1) => 2,
        Some(_) => 3,
        None => rank,
    };
    let (dds, dshape) = if rank == 3 {
        open_numbers(
            &file,
            path,
            "kspace/data",
            &[Axis::Any("C"), Axis::Any("M"), Axis::Is(2)],
        )?
    } else {
        open_numbers(&file, path, "kspace/data", &[Axis::Any("M"), Axis::Is(2)])?
    };
    let (coils, dm) = match dshape[..] {
        [c, m, _] => (c, m),
        _ => (1, dshape[0]),
    };
    check_coils(path, coils)?;
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
    check_samples(path, m)?;
    let truth = match optional(&file, path, "reference", "truth")? {
        Some(ds) => {
            let name = "reference/truth";
            let shape = check_numbers(&ds, path, name, &voxels).map_err(on_the_grid)?;
            Some((ds, shape))
        }
        None => None,
    };
    let anatomy = anatomy_dataset(&file, path, &grid)?;
    let noise = noise_dataset(&file, path, coils)?;
    let maps = match optional(&file, path, "coils", "maps")? {
        Some(ds) => {
            let shape = [Axis::Any("C"), voxels[0], voxels[1], voxels[2], Axis::Is(2)];
            let got = check_numbers(&ds, path, "coils/maps", &shape).map_err(on_the_grid)?;
            same_coils(path, "coils/maps", got[0], coils)?;
            Some((ds, got))
        }
        None => None,
    };
    if version == Some(1) && (noise.is_some() || maps.is_some()) {
        return Err(bad(
            path,
            "/kspace attribute version",
            "is 1, but the file has coils' noise or maps, which version 2 holds: set version = 2 \
             and give kspace/data as [C, M, 2]",
        ));
    }

    // What reading takes: each dataset decoded (float64: 3 per sample, 2
    // per complex value, 1 per image voxel), and the largest read as
    // float64 before it is decoded.
    let count = |shape: &[usize]| shape.iter().product::<usize>() as u64;
    let stored = [
        Some(count(&tshape)),
        Some(count(&dshape)),
        noise.as_ref().map(|(_, s, _)| count(s)),
        maps.as_ref().map(|(_, s)| count(s)),
        truth.as_ref().map(|(_, s)| count(s)),
        anatomy.as_ref().map(|(_, s, _)| count(s)),
    ];
    let floats: u64 = stored.iter().flatten().sum();
    let largest = stored.iter().flatten().max().copied().unwrap_or(0);
    let decoded = 8 * floats;
    let names: Vec<&str> = [
        Some("kspace/trajectory"),
        Some("kspace/data"),
        noise.as_ref().map(|(_, _, n)| *n),
        maps.as_ref().map(|_| "coils/maps"),
        truth.as_ref().map(|_| "reference/truth"),
        anatomy.as_ref().map(|_| "reference/anatomy"),
    ]
    .into_iter()
    .flatten()
    .collect();
    check_fits(
        path,
        &names.join(", "),
        Need {
            own: decoded + 8 * largest,
            decoded,
        },
        opts.handed_to,
    )?;
    // The bytes as stored: float64 and complex128 hold 8 per number.
    let datasets = [Some(&tds), Some(&dds)]
        .into_iter()
        .chain([
            noise.as_ref().map(|(d, _, _)| d),
            maps.as_ref().map(|(d, _)| d),
            truth.as_ref().map(|(d, _)| d),
            anatomy.as_ref().map(|(d, _, _)| d),
        ])
        .flatten();
    opts.declared(datasets.map(datasets::stored_bytes).sum());

    // Then read.
    let t = read_checked(&tds, path, "kspace/trajectory", &tshape)?;
    let traj: Vec<[f64; 3]> = t
        .chunks_exact(width)
        .map(|k| [k[0], k[1], k.get(2).copied().unwrap_or(0.0)])
        .collect();
    drop(t);
    crate::check_spread(path, "kspace/trajectory", &traj)?;
    if !opts.allow_beyond_nyquist {
        check_nyquist(path, &traj, n)?;
    }
    let data = complex(read_checked(&dds, path, "kspace/data", &dshape)?);
    let truth = match truth {
        Some((ds, shape)) => Some(read_checked(&ds, path, "reference/truth", &shape)?),
        None => None,
    };
    let anatomy = match anatomy {
        Some((ds, shape, g)) => {
            let v = read_checked(&ds, path, "reference/anatomy", &shape)?;
            Some(Volume::new(g, v).map_err(|e| bad(path, "reference/anatomy", e.to_string()))?)
        }
        None => None,
    };
    let noise = match noise {
        Some((ds, shape, name)) => {
            let v = complex(read_checked(&ds, path, name, &shape)?);
            Some(if name == NOISE_SAMPLES {
                CoilNoise::Samples(v)
            } else {
                CoilNoise::Covariance(v)
            })
        }
        None => None,
    };
    let maps = match maps {
        Some((ds, shape)) => Some(read_maps(&ds, path, &shape, grid.len())?),
        None => None,
    };
    Ok(Scan {
        grid,
        traj,
        coils,
        data,
        noise,
        maps,
        truth,
        anatomy,
        geometry,
        parts: Vec::new(),
    })
}

/// 1 to [`MAX_COILS`] coils.
fn check_coils(path: &Path, coils: usize) -> Result<(), IoError> {
    if !(1..=MAX_COILS).contains(&coils) {
        return Err(bad(
            path,
            "kspace/data",
            format!("has {coils} coils: there must be 1 to {MAX_COILS}"),
        ));
    }
    Ok(())
}

/// 1 to [`recon_core::MAX_SAMPLES`] samples.
fn check_samples(path: &Path, m: usize) -> Result<(), IoError> {
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
    Ok(())
}

/// Every sample within Nyquist (`|k_d| <= N_d/2`).
fn check_nyquist(path: &Path, traj: &[[f64; 3]], n: [usize; 3]) -> Result<(), IoError> {
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
    Ok(())
}

/// The optional attributes of `/kspace` that place the image in the
/// scanner, as ISMRMRD's acquisition headers do (LPS): `position_mm` and
/// the direction cosines `read_dir`, `phase_dir`, `slice_dir`, all four
/// or none, orthonormal.
pub const GEOMETRY_ATTRIBUTES: [&str; 4] = ["position_mm", "read_dir", "phase_dir", "slice_dir"];

fn read_geometry(ks: &hdf5::Group, path: &Path) -> Result<Option<Geometry>, IoError> {
    let present: Vec<&str> = GEOMETRY_ATTRIBUTES
        .iter()
        .copied()
        .filter(|a| ks.attr(a).is_ok())
        .collect();
    if present.is_empty() {
        return Ok(None);
    }
    if present.len() < GEOMETRY_ATTRIBUTES.len() {
        let missing: Vec<&str> = GEOMETRY_ATTRIBUTES
            .iter()
            .copied()
            .filter(|a| !present.contains(a))
            .collect();
        return Err(bad(
            path,
            "/kspace attributes position_mm, read_dir, phase_dir, slice_dir",
            format!(
                "are incomplete: {} given without {} (give all four, or none for the isocentre)",
                present.join(", "),
                missing.join(", ")
            ),
        ));
    }
    let v = |name: &str| attr3::<f64>(ks, path, "/kspace", name);
    let g = Geometry {
        position_mm: v("position_mm")?,
        read_dir: v("read_dir")?,
        phase_dir: v("phase_dir")?,
        slice_dir: v("slice_dir")?,
    };
    g.check().map_err(|why| {
        bad(
            path,
            "/kspace attributes position_mm, read_dir, phase_dir, slice_dir",
            why,
        )
    })?;
    Ok(Some(g))
}

/// Pairs `[..., 2]` as complex numbers.
fn complex(v: Vec<f64>) -> Vec<Complex<f64>> {
    v.chunks_exact(2)
        .map(|c| Complex::new(c[0], c[1]))
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

const NOISE_SAMPLES: &str = "kspace/noise";
const NOISE_COVARIANCE: &str = "kspace/noise_covariance";

/// `/kspace/noise` or `/kspace/noise_covariance`, when present, checked
/// and not yet read, with its name.
#[allow(clippy::type_complexity)]
fn noise_dataset(
    file: &hdf5::File,
    path: &Path,
    coils: usize,
) -> Result<Option<(hdf5::Dataset, Vec<usize>, &'static str)>, IoError> {
    let samples = optional(file, path, "kspace", "noise")?;
    let covariance = optional(file, path, "kspace", "noise_covariance")?;
    match (samples, covariance) {
        (None, None) => Ok(None),
        (Some(_), Some(_)) => Err(bad(
            path,
            NOISE_COVARIANCE,
            "and kspace/noise are both present: give the noise samples or their covariance, not both",
        )),
        (Some(ds), None) => {
            let shape = check_numbers(&ds, path, NOISE_SAMPLES, &[Axis::Any("C"), Axis::Any("K"), Axis::Is(2)])?;
            same_coils(path, NOISE_SAMPLES, shape[0], coils)?;
            if shape[1] == 0 || shape[1] > recon_core::MAX_SAMPLES {
                return Err(bad(
                    path,
                    NOISE_SAMPLES,
                    format!("holds {} samples per coil: there must be 1 to {}", shape[1], recon_core::MAX_SAMPLES),
                ));
            }
            Ok(Some((ds, shape, NOISE_SAMPLES)))
        }
        (None, Some(ds)) => {
            let shape = check_numbers(&ds, path, NOISE_COVARIANCE, &[Axis::Any("C"), Axis::Any("C"), Axis::Is(2)])?;
            same_coils(path, NOISE_COVARIANCE, shape[0], coils)?;
            same_coils(path, NOISE_COVARIANCE, shape[1], coils)?;
            Ok(Some((ds, shape, NOISE_COVARIANCE)))
        }
    }
}

/// `/coils/maps`, read and checked: finite, and of a scale float32 carries
/// (not all zero, largest root sum of squares at least [`MIN_MAPS_SCALE`]).
fn read_maps(
    ds: &hdf5::Dataset,
    path: &Path,
    shape: &[usize],
    voxels: usize,
) -> Result<Vec<Vec<Complex<f64>>>, IoError> {
    let v = complex(read_checked(ds, path, "coils/maps", shape)?);
    let maps: Vec<Vec<Complex<f64>>> = v.chunks_exact(voxels).map(|c| c.to_vec()).collect();
    drop(v);
    check_maps_scale(path, &maps, voxels)?;
    Ok(maps)
}

/// Maps of a scale float32 carries: not all zero, largest root sum of
/// squares at least [`MIN_MAPS_SCALE`].
fn check_maps_scale(path: &Path, maps: &[Vec<Complex<f64>>], voxels: usize) -> Result<(), IoError> {
    let name = "coils/maps";
    let largest = (0..voxels)
        .map(|i| maps.iter().map(|m| m[i].norm_sqr()).sum::<f64>())
        .fold(0.0, f64::max)
        .sqrt();
    if largest == 0.0 {
        return Err(bad(
            path,
            name,
            "is zero everywhere: the coils see nothing (omit the maps to estimate them, or set sense.maps = \"estimate\")",
        ));
    }
    if largest < MIN_MAPS_SCALE {
        return Err(bad(
            path,
            name,
            format!(
                "has a largest root sum of squares of {largest:.3e}, below {MIN_MAPS_SCALE:e}: \
                 float32 loses their digits at that scale. Maps are normalised by their root \
                 sum of squares, so any scale near 1 gives the same result: rescale them"
            ),
        ));
    }
    Ok(())
}

/// `/reference/anatomy` on its own grid, when present, checked and not yet
/// read.
#[allow(clippy::type_complexity)]
fn anatomy_dataset(
    file: &hdf5::File,
    path: &Path,
    grid: &Grid,
) -> Result<Option<(hdf5::Dataset, Vec<usize>, Grid)>, IoError> {
    let name = "reference/anatomy";
    let Some(ds) = optional(file, path, "reference", "anatomy")? else {
        return Ok(None);
    };
    let shape = check_numbers(
        &ds,
        path,
        name,
        &[Axis::Any("Az"), Axis::Any("Ay"), Axis::Any("Ax")],
    )?;
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
    Ok(Some((ds, shape, g)))
}
