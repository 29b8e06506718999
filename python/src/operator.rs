//! recon's linear operators for Python: forward, adjoint and normal maps
//! on NumPy vectors, whatever the backend. The encoding operator F (its
//! normal map the Toeplitz product with Q, as a solve uses it) is the
//! first; each is a `recon_ops::LinearOp` made once and kept with its
//! backend, so repeated calls reuse its plans and device memory.

use crate::convert::{array, of_f64, to_f64, trajectory};
use crate::py_err;
use numpy::{Complex64, PyArray1, PyReadonlyArray1, PyReadonlyArray2, PyUntypedArrayMethods};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use recon_core::{Backend, Complex, CpuBackend, Grid};
use recon_cuda::CudaBackend;
use recon_encoding::{Encoding, NufftBackend, Plan};
use recon_ops::LinearOp;
use recon_pipeline::config::{EngineCfg, Precision};
use recon_pipeline::{Chosen, Context};
use recon_q::Stored;

/// An operator with the backend it runs on.
enum Inner {
    Cpu32(CpuBackend<f32>, Box<dyn LinearOp<CpuBackend<f32>>>),
    Cpu64(CpuBackend<f64>, Box<dyn LinearOp<CpuBackend<f64>>>),
    Cuda(CudaBackend, Box<dyn LinearOp<CudaBackend>>),
}

#[derive(Clone, Copy)]
enum Map {
    Forward,
    Adjoint,
    Normal,
}

/// A linear operator of recon's on one device: `forward`, `adjoint` and
/// `normal` take and return complex128 vectors (computed in the
/// operator's precision).
#[pyclass(module = "recon._native")]
pub(crate) struct Operator {
    /// Locked while a map runs (calls from several Python threads take
    /// turns).
    inner: std::sync::Mutex<Inner>,
    /// `[rows, columns]`
    #[pyo3(get)]
    shape: (usize, usize),
    #[pyo3(get)]
    device: String,
    /// What `device = "auto"` said of its choice.
    #[pyo3(get)]
    notes: Vec<String>,
}

#[pymethods]
impl Operator {
    /// The encoding operator F of `traj` (`[M, 3]`, (kx, ky, kz) in
    /// cycles/FOV) on the image `matrix` (x, y, z) and `fov_mm`: images
    /// (x fastest) to samples. `engine`: the `[engine]` keys as TOML
    /// (`device`, `precision`, `tolerance`, `kind`, `basis`). With
    /// `toeplitz`, Q is computed (through the Q cache) and the normal map
    /// is the Toeplitz product.
    #[staticmethod]
    #[pyo3(signature = (traj, matrix, fov_mm, engine="", toeplitz=true))]
    fn encoding(
        py: Python<'_>,
        traj: PyReadonlyArray2<'_, f64>,
        matrix: [usize; 3],
        fov_mm: [f64; 3],
        engine: &str,
        toeplitz: bool,
    ) -> PyResult<Operator> {
        let traj = trajectory(&traj)?;
        let cfg: EngineCfg = toml::from_str(engine)
            .map_err(|e| PyValueError::new_err(format!("engine settings: {e}")))?;
        let grid = Grid::new(matrix, fov_mm)
            .map_err(py_err)?
            .with_basis(cfg.basis());
        let notes = std::sync::Mutex::new(Vec::new());
        let note = |m: &str| {
            notes
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(m.to_string())
        };
        let cache = recon_pipeline::config::default_cache_dir();
        let chosen = recon_pipeline::choose_backend(&cfg, &cache, &note).map_err(py_err)?;
        let notes = notes.into_inner().unwrap_or_else(|e| e.into_inner());
        let engine = cfg.engine();
        let q_cache = recon_q::Cache::new(cache);
        let inner = py.detach(|| -> recon_pipeline::Result<Inner> {
            Ok(match chosen {
                Chosen::Cuda(b) => {
                    let op = encoding(&b, engine, &grid, &traj, toeplitz, &q_cache)?;
                    Inner::Cuda(b, op)
                }
                Chosen::Cpu(Precision::F32) => {
                    let b = CpuBackend::<f32>::new();
                    let op = encoding(&b, engine, &grid, &traj, toeplitz, &q_cache)?;
                    Inner::Cpu32(b, op)
                }
                Chosen::Cpu(Precision::F64) => {
                    let b = CpuBackend::<f64>::new();
                    let op = encoding(&b, engine, &grid, &traj, toeplitz, &q_cache)?;
                    Inner::Cpu64(b, op)
                }
            })
        });
        let inner = inner.map_err(py_err)?;
        let device = match &inner {
            Inner::Cpu32(b, _) => b.describe(),
            Inner::Cpu64(b, _) => b.describe(),
            Inner::Cuda(b, _) => b.describe(),
        };
        Ok(Operator {
            inner: std::sync::Mutex::new(inner),
            shape: (traj.len(), grid.len()),
            device,
            notes,
        })
    }

    /// `A x`
    fn forward<'py>(
        &self,
        py: Python<'py>,
        x: PyReadonlyArray1<'py, Complex64>,
    ) -> PyResult<Bound<'py, PyArray1<Complex64>>> {
        self.map(py, Map::Forward, x)
    }

    /// `A^H y`
    fn adjoint<'py>(
        &self,
        py: Python<'py>,
        y: PyReadonlyArray1<'py, Complex64>,
    ) -> PyResult<Bound<'py, PyArray1<Complex64>>> {
        self.map(py, Map::Adjoint, y)
    }

    /// `A^H A x`
    fn normal<'py>(
        &self,
        py: Python<'py>,
        x: PyReadonlyArray1<'py, Complex64>,
    ) -> PyResult<Bound<'py, PyArray1<Complex64>>> {
        self.map(py, Map::Normal, x)
    }

    /// Whether it computes in float64.
    #[getter]
    fn double(&self) -> bool {
        matches!(*self.lock(), Inner::Cpu64(..))
    }
}

impl Operator {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn map<'py>(
        &self,
        py: Python<'py>,
        which: Map,
        x: PyReadonlyArray1<'py, Complex64>,
    ) -> PyResult<Bound<'py, PyArray1<Complex64>>> {
        let (rows, cols) = self.shape;
        let want = match which {
            Map::Forward | Map::Normal => cols,
            Map::Adjoint => rows,
        };
        if x.len() != want {
            return Err(PyValueError::new_err(format!(
                "the input has {} values, expected {want}",
                x.len()
            )));
        }
        let x: Vec<Complex<f64>> = x.as_array().iter().copied().collect();
        let out = py.detach(|| match &mut *self.lock() {
            Inner::Cpu32(b, op) => apply(b, op.as_mut(), which, &x),
            Inner::Cpu64(b, op) => apply(b, op.as_mut(), which, &x),
            Inner::Cuda(b, op) => apply(b, op.as_mut(), which, &x),
        });
        Ok(array(py, out.map_err(py_err)?))
    }
}

/// F of `traj` on `grid`, its normal map the Toeplitz product with Q
/// (from the cache, or computed and cached) where `toeplitz`.
fn encoding<B>(
    backend: &B,
    engine: recon_encoding::Engine,
    grid: &Grid,
    traj: &[[f64; 3]],
    toeplitz: bool,
    cache: &recon_q::Cache,
) -> recon_pipeline::Result<Box<dyn LinearOp<B>>>
where
    B: NufftBackend + 'static,
    B::Real: Stored,
{
    let plan = Plan::new(backend, engine, grid, traj)?;
    let q = match toeplitz {
        true => Some(
            recon_q::load_or_compute(&plan, Some(cache), &mut |_, _| {})
                .context("computing Q")?
                .0,
        ),
        false => None,
    };
    Ok(Box::new(Encoding::new(backend, &plan, q.as_deref())?))
}

fn apply<B: Backend>(
    b: &B,
    op: &mut dyn LinearOp<B>,
    which: Map,
    x: &[Complex<f64>],
) -> recon_core::Result<Vec<Complex<f64>>> {
    let [rows, cols] = op.shape();
    let x = b.upload(&of_f64::<B::Real>(x))?;
    let mut out = b.zeros(match which {
        Map::Forward => rows,
        Map::Adjoint | Map::Normal => cols,
    })?;
    match which {
        Map::Forward => op.forward(b, &mut out, &x)?,
        Map::Adjoint => op.adjoint(b, &mut out, &x)?,
        Map::Normal => op.normal(b, &mut out, &x)?,
    }
    Ok(to_f64(&b.to_host(&out)?))
}
