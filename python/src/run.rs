//! `reconstruct`: a scan held in arrays through the binary's pipeline, the
//! settings as the binary's `--set` pairs, so that both give one image.

use crate::convert::{array, rows, trajectory};
use crate::{interruptible, py_err, PyUi};
use numpy::{Complex64, PyReadonlyArray1, PyReadonlyArray2};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use recon_core::Backend;
use recon_encoding::NufftBackend;
use recon_io::scan::{CoilNoise, Scan};
use recon_pipeline::config::{self, DeviceChoice, Loaded, Precision, Settings};
use recon_pipeline::{on_backend, Chosen, Image};
use recon_q::Stored;
use std::sync::Mutex;

/// What the scan is called in messages.
const ARRAYS: &str = "(arrays)";

/// Reconstructs the scan of `kspace` (`[C, M]`) on `traj` (`[M, 3]`,
/// (kx, ky, kz) in cycles/FOV) for the image `matrix` (x, y, z) and
/// `fov_mm`, with optional coil `maps` (`[C, voxels]`, x fastest) and
/// `noise` samples (`[C, K]`), the `truth` (voxels), an `anatomy`
/// reference `(values, matrix, fov_mm)` on its own grid (the anatomical
/// prior's), and `settings` as the binary's `--set`
/// pairs (`solver.lambda=0.01`). Returns a dict: the image and the
/// gridding (x fastest), and the run's figures.
#[pyfunction]
#[pyo3(signature = (kspace, traj, matrix, fov_mm, maps=None, noise=None, truth=None, anatomy=None, settings=Vec::new()))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn reconstruct<'py>(
    py: Python<'py>,
    kspace: PyReadonlyArray2<'py, Complex64>,
    traj: PyReadonlyArray2<'py, f64>,
    matrix: [usize; 3],
    fov_mm: [f64; 3],
    maps: Option<PyReadonlyArray2<'py, Complex64>>,
    noise: Option<PyReadonlyArray2<'py, Complex64>>,
    truth: Option<PyReadonlyArray1<'py, f64>>,
    anatomy: Option<(PyReadonlyArray1<'py, f64>, [usize; 3], [f64; 3])>,
    settings: Vec<String>,
) -> PyResult<Bound<'py, PyDict>> {
    let mut scan = scan_of(&kspace, &traj, matrix, fov_mm, maps, noise, truth)?;
    if let Some((values, n, fov)) = anatomy {
        let grid = recon_core::Grid::new(n, fov).map_err(py_err)?;
        let values = values.as_array().to_vec();
        scan.anatomy = Some(recon_core::Volume::new(grid, values).map_err(py_err)?);
    }
    let (image, notes, messages, warnings) = interruptible(py, move |cancel| {
        let ui = PyUi::new(cancel);
        let notes = Mutex::new(Vec::new());
        let image = run(scan, settings, &ui, &|m: &str| {
            notes
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(m.to_string())
        })
        .map_err(py_err);
        let notes = notes.into_inner().unwrap_or_else(|e| e.into_inner());
        let (image, warnings) = image?;
        Ok((image, notes, ui.messages(), warnings))
    })?;
    let out = image.out;
    let d = PyDict::new(py);
    d.set_item("image", array(py, out.recon))?;
    d.set_item("gridding", array(py, out.gridding))?;
    d.set_item("fhd", array(py, out.fhd))?;
    d.set_item("iterations", out.info.iterations)?;
    d.set_item("relative_residual", out.info.relative_residual)?;
    d.set_item("residuals", out.info.residuals)?;
    d.set_item("lam", out.lambda.lambda)?;
    d.set_item("lam_abs", out.lambda_abs)?;
    d.set_item("lam_rule", out.lambda.rule)?;
    d.set_item("lam_tried", out.lambda.tried)?;
    d.set_item("device", out.device)?;
    d.set_item("coils", image.inputs.coils)?;
    d.set_item("noise_sigma", image.inputs.noise_sigma)?;
    d.set_item("seconds", out.seconds.into_iter().collect::<Vec<_>>())?;
    d.set_item("notes", notes)?;
    d.set_item("messages", messages)?;
    d.set_item("warnings", warnings)?;
    Ok(d)
}

/// The arrays as a scan, as a scan file would hold them.
fn scan_of(
    kspace: &PyReadonlyArray2<'_, Complex64>,
    traj: &PyReadonlyArray2<'_, f64>,
    matrix: [usize; 3],
    fov_mm: [f64; 3],
    maps: Option<PyReadonlyArray2<'_, Complex64>>,
    noise: Option<PyReadonlyArray2<'_, Complex64>>,
    truth: Option<PyReadonlyArray1<'_, f64>>,
) -> PyResult<Scan> {
    let grid = recon_core::Grid::new(matrix, fov_mm).map_err(py_err)?;
    let traj = trajectory(traj)?;
    let (coils, m, data) = rows(kspace);
    if m != traj.len() {
        return Err(PyValueError::new_err(format!(
            "kspace has {m} samples per coil but the trajectory has {}",
            traj.len()
        )));
    }
    let maps = match maps {
        Some(a) => {
            let (c, n, v) = rows(&a);
            if c != coils || n != grid.len() {
                return Err(PyValueError::new_err(format!(
                    "maps have shape [{c}, {n}], expected [{coils}, {}]: one per coil on the grid",
                    grid.len()
                )));
            }
            Some(v.chunks_exact(n).map(<[_]>::to_vec).collect())
        }
        None => None,
    };
    let noise = match noise {
        Some(a) => {
            let (c, _, v) = rows(&a);
            if c != coils {
                return Err(PyValueError::new_err(format!(
                    "noise has {c} coils, kspace {coils}"
                )));
            }
            Some(CoilNoise::Samples(v))
        }
        None => None,
    };
    let truth = truth.map(|t| t.as_array().to_vec());
    Ok(Scan {
        grid,
        traj,
        coils,
        data,
        noise,
        maps,
        truth,
        anatomy: None,
        geometry: None,
        parts: Vec::new(),
    })
}

/// The pipeline as the binary runs it: the settings over a config of the
/// scan, the backend, the memory check, the kernels, the series (of one
/// image). Returns the image and the config's warnings.
fn run(
    scan: Scan,
    settings: Vec<String>,
    ui: &PyUi<'_>,
    note: &(dyn Fn(&str) + Sync),
) -> recon_pipeline::Result<(Image, Vec<String>)> {
    let text = Settings {
        scan: None,
        set: settings,
    }
    .compose(&format!("[scan]\nfile = {ARRAYS:?}\n"))?;
    // the arrays checked as a file read checks them, with the settings'
    // allowance for samples beyond Nyquist
    let allow = config::Config::parse(&text)?
        .scan
        .is_some_and(|s| s.allow_beyond_nyquist);
    recon_io::scan::check_arrays(&scan, ARRAYS, allow)?;
    let mut l = config::in_memory(&text, scan)?;
    let warnings = l.warnings.clone();
    let mut kept = BACKEND.lock().unwrap_or_else(|e| e.into_inner());
    let key = |l: &config::Loaded| {
        let e = &l.cfg.engine;
        (e.device, e.precision, e.threads, config::cache_dir(&l.cfg))
    };
    let asked = key(&l);
    let chosen = match kept.take() {
        Some((k, chosen)) if k == asked => chosen,
        _ => recon_pipeline::backend_for(&mut l, None, note)?,
    };
    // Kept under the device it settled on: a CPU that `auto` took for a
    // small problem is not reused by a later `auto` call that wants a GPU
    // (a GPU kept under `auto` serves small problems too: it is open).
    let key = key(&l);
    // The backend stays open for the next call, but the memory its pool
    // kept goes back to the driver, for the other libraries of the
    // process, whether the call succeeded or not.
    let (image, released) =
        on_backend!(&chosen, b => (series(b, l, ui), b.release_unused_memory()));
    *kept = Some((key, chosen));
    let image = image?;
    released.map_err(recon_pipeline::Error::from)?;
    Ok((image, warnings))
}

/// The engine settings a backend was chosen for.
type Key = (DeviceChoice, Precision, usize, std::path::PathBuf);

/// The backend of the last call, kept for the next one with the same
/// engine settings: opening a GPU and loading its kernels costs some 0.2 s
/// a call (bench/python-2026-11-26). Calls in one process take turns.
static BACKEND: Mutex<Option<(Key, Chosen)>> = Mutex::new(None);

fn series<B>(backend: &B, l: Loaded, ui: &PyUi<'_>) -> recon_pipeline::Result<Image>
where
    B: NufftBackend,
    B::Real: Stored,
{
    let images = recon_pipeline::split(l);
    let first = &images[0].1;
    recon_pipeline::check_memory(backend, first, recon_pipeline::Work::Reconstruct)?;
    backend
        .prepare(&recon_pipeline::workload(first))
        .map_err(recon_pipeline::Error::from)?;
    let mut done = recon_pipeline::reconstruct_series(backend, &images, ui)?;
    Ok(done.remove(0))
}
