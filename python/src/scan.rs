//! Scan files (recon's, and ISMRMRD's) read into arrays, and arrays
//! written as a scan file, by the binary's reader and writer.

use crate::convert::{array, rows, trajectory};
use crate::py_err;
use numpy::{Complex64, PyArray1, PyReadonlyArray1, PyReadonlyArray2};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use recon_io::scan::{CoilNoise, Scan};
use recon_pipeline::{Kind, Units};
use std::path::PathBuf;

/// Reads a scan file or an ISMRMRD file (told apart by their content),
/// checked as the binary checks it. `units`: an ISMRMRD trajectory's,
/// "normalized" or "cycles_per_fov". Returns a dict of the file's arrays
/// (samples `[C, M]` as one vector, trajectory `[M, 3]` as (kx, ky, kz)
/// in cycles/FOV, images x fastest) and its grid.
#[pyfunction]
#[pyo3(signature = (path, units="normalized", allow_beyond_nyquist=false))]
pub(crate) fn read_scan<'py>(
    py: Python<'py>,
    path: PathBuf,
    units: &str,
    allow_beyond_nyquist: bool,
) -> PyResult<Bound<'py, PyDict>> {
    let units = match units {
        "normalized" => Units::Normalized,
        "cycles_per_fov" => Units::CyclesPerFov,
        other => {
            return Err(pyo3::exceptions::PyValueError::new_err(format!(
                "units {other:?}: expected \"normalized\" or \"cycles_per_fov\""
            )))
        }
    };
    let (kind, s) = py
        .detach(|| recon_pipeline::read_in_process(&path, units, allow_beyond_nyquist))
        .map_err(py_err)?;
    let d = PyDict::new(py);
    d.set_item(
        "kind",
        match kind {
            Kind::Scan => "scan",
            Kind::Ismrmrd => "ismrmrd",
        },
    )?;
    d.set_item("matrix", s.grid.n)?;
    d.set_item("fov_mm", s.grid.fov_mm)?;
    d.set_item("coils", s.coils)?;
    let flat: Vec<f64> = s.traj.iter().flatten().copied().collect();
    d.set_item("traj", PyArray1::from_vec(py, flat))?;
    d.set_item("data", array(py, s.data))?;
    match s.noise {
        Some(CoilNoise::Samples(v)) => d.set_item("noise", array(py, v))?,
        Some(CoilNoise::Covariance(v)) => d.set_item("noise_covariance", array(py, v))?,
        None => {}
    }
    if let Some(maps) = s.maps {
        d.set_item("maps", array(py, maps.concat()))?;
    }
    if let Some(t) = s.truth {
        d.set_item("truth", PyArray1::from_vec(py, t))?;
    }
    if let Some(a) = s.anatomy {
        let (n, fov) = (a.grid.n, a.grid.fov_mm);
        d.set_item("anatomy", (PyArray1::from_vec(py, a.values), n, fov))?;
    }
    if let Some(g) = s.geometry {
        d.set_item("position_mm", g.position_mm)?;
        d.set_item("read_dir", g.read_dir)?;
        d.set_item("phase_dir", g.phase_dir)?;
        d.set_item("slice_dir", g.slice_dir)?;
    }
    let parts: Vec<(String, usize, usize)> = s
        .parts
        .iter()
        .map(|p| (p.index.describe(), p.samples.start, p.samples.end))
        .collect();
    d.set_item("parts", parts)?;
    Ok(d)
}

/// Writes a scan file (version 2) of `kspace` (`[C, M]`) on `traj`
/// (`[M, 3]`), for `matrix` and `fov_mm`, with optional `noise` samples
/// (`[C, K]`), `maps` (`[C, voxels]`) and `truth` (voxels): atomically,
/// after the checks a read makes.
#[pyfunction]
#[pyo3(signature = (path, kspace, traj, matrix, fov_mm, noise=None, maps=None, truth=None))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn write_scan(
    py: Python<'_>,
    path: PathBuf,
    kspace: PyReadonlyArray2<'_, Complex64>,
    traj: PyReadonlyArray2<'_, f64>,
    matrix: [usize; 3],
    fov_mm: [f64; 3],
    noise: Option<PyReadonlyArray2<'_, Complex64>>,
    maps: Option<PyReadonlyArray2<'_, Complex64>>,
    truth: Option<PyReadonlyArray1<'_, f64>>,
) -> PyResult<()> {
    let grid = recon_core::Grid::new(matrix, fov_mm).map_err(py_err)?;
    let (coils, _, data) = rows(&kspace);
    let scan = Scan {
        grid,
        traj: trajectory(&traj)?,
        coils,
        data,
        noise: noise.map(|n| CoilNoise::Samples(rows(&n).2)),
        maps: maps.map(|m| {
            let (_, n, v) = rows(&m);
            v.chunks_exact(n.max(1)).map(<[_]>::to_vec).collect()
        }),
        truth: truth.map(|t| t.as_array().to_vec()),
        anatomy: None,
        geometry: None,
        parts: Vec::new(),
    };
    let name = path.display().to_string();
    py.detach(|| {
        recon_io::scan::check_arrays(&scan, &name, false)?;
        recon_io::scan::write_scan(&path, &scan)
    })
    .map_err(py_err)
}
