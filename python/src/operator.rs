//! recon's linear operators for Python: forward, adjoint and normal maps
//! on NumPy vectors, whatever the backend. The encoding operator F (its
//! normal map the Toeplitz product with Q, as a solve uses it) is the
//! first; each is a `recon_ops::LinearOp` made once and kept with its
//! backend, so repeated calls reuse its plans and device memory.

use crate::convert::{array, to_f64, trajectory};
use crate::py_err;
use numpy::{Complex64, PyArray1, PyReadonlyArray1, PyReadonlyArray2, PyUntypedArrayMethods};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use recon_core::{Backend, Complex, CpuBackend, Grid};
use recon_cuda::CudaBackend;
use recon_encoding::{Encoding, NufftBackend, Plan};
use recon_ops::LinearOp;
use recon_pipeline::config::{EngineCfg, Precision};
use recon_pipeline::from_f64;
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
        let cfg = engine_cfg(engine)?;
        let grid = Grid::new(matrix, fov_mm)
            .map_err(py_err)?
            .with_basis(cfg.basis());
        let make = MakeEncoding {
            engine: cfg.engine(),
            grid,
            traj,
            toeplitz,
            maps: None,
        };
        Operator::made(py, &cfg, &make)
    }

    /// SENSE's operator `E = [F S_1; ...; F S_C]` with the coil `maps`
    /// (`[C, voxels]`, x fastest): images to each coil's samples in turn;
    /// its normal map is the solver's (the Toeplitz product with each map
    /// folded in). Arguments as [`Operator::encoding`].
    #[staticmethod]
    #[pyo3(signature = (traj, matrix, fov_mm, maps, engine=""))]
    fn sense(
        py: Python<'_>,
        traj: PyReadonlyArray2<'_, f64>,
        matrix: [usize; 3],
        fov_mm: [f64; 3],
        maps: PyReadonlyArray2<'_, Complex64>,
        engine: &str,
    ) -> PyResult<Operator> {
        let traj = trajectory(&traj)?;
        let cfg = engine_cfg(engine)?;
        let grid = Grid::new(matrix, fov_mm)
            .map_err(py_err)?
            .with_basis(cfg.basis());
        let (_, n, v) = crate::convert::rows(&maps);
        if n != grid.len() {
            return Err(PyValueError::new_err(format!(
                "the maps have {n} values each, expected {} (one per voxel)",
                grid.len()
            )));
        }
        let maps = v.chunks_exact(n).map(<[_]>::to_vec).collect();
        let make = MakeEncoding {
            engine: cfg.engine(),
            grid,
            traj,
            toeplitz: true,
            maps: Some(maps),
        };
        Operator::made(py, &cfg, &make)
    }

    /// A prior's operator on images of `matrix` (x, y, z): `kind`
    /// "gradient" (total variation's forward differences along x, y and
    /// z: three fields in turn), "directional" (directional TV's: the
    /// gradient weighted by `P = I - xi xi^T` of the real `reference`
    /// image on the grid, eta `eta` of its largest gradient), "wavelet"
    /// (the orthonormal Daubechies-2 transform, unshifted) or "quadratic"
    /// (the quadratic prior's W: uniform differences, or with a
    /// `reference` the anatomical W built from it on the grid of
    /// `fov_mm` with the `[regulariser]` keys given as TOML in
    /// `regulariser`). `engine` as for [`Operator::encoding`] (its device
    /// and precision).
    #[staticmethod]
    #[pyo3(signature = (kind, matrix, engine="", reference=None, eta=0.2, fov_mm=None, regulariser=""))]
    #[allow(clippy::too_many_arguments)]
    fn prior(
        py: Python<'_>,
        kind: &str,
        matrix: [usize; 3],
        engine: &str,
        reference: Option<PyReadonlyArray1<'_, f64>>,
        eta: f64,
        fov_mm: Option<[f64; 3]>,
        regulariser: &str,
    ) -> PyResult<Operator> {
        let cfg = engine_cfg(engine)?;
        let reference = reference.map(|r| r.as_array().to_vec());
        let kind = match (kind, reference) {
            ("gradient", _) => Prior::Gradient,
            ("wavelet", _) => Prior::Wavelet,
            ("quadratic", r) => Prior::Quadratic(quadratic_w(matrix, fov_mm, r, regulariser)?),
            ("directional", Some(r)) => Prior::Directional(r, eta),
            ("directional", None) => {
                return Err(PyValueError::new_err(
                    "the directional operator needs a reference image",
                ))
            }
            (other, _) => {
                return Err(PyValueError::new_err(format!(
                    "prior operator {other:?}: expected \"gradient\", \"directional\", \"wavelet\" \
                     or \"quadratic\""
                )))
            }
        };
        Operator::made(py, &cfg, &MakePrior { kind, n: matrix })
    }

    /// `map` of `x`: "forward" (`A x`), "adjoint" (`A^H x`) or "normal"
    /// (`A^H A x`).
    fn apply<'py>(
        &self,
        py: Python<'py>,
        map: &str,
        x: PyReadonlyArray1<'py, Complex64>,
    ) -> PyResult<Bound<'py, PyArray1<Complex64>>> {
        let which = match map {
            "forward" => Map::Forward,
            "adjoint" => Map::Adjoint,
            "normal" => Map::Normal,
            other => {
                return Err(PyValueError::new_err(format!(
                    "map {other:?}: expected \"forward\", \"adjoint\" or \"normal\""
                )))
            }
        };
        self.map(py, which, x)
    }

    /// Whether it computes in float64.
    #[getter]
    fn double(&self) -> bool {
        matches!(*self.lock(), Inner::Cpu64(..))
    }
}

impl Operator {
    /// The operator `make` makes, on the backend `cfg` chooses.
    fn made(py: Python<'_>, cfg: &EngineCfg, make: &(impl Make + Sync)) -> PyResult<Operator> {
        let notes = std::sync::Mutex::new(Vec::new());
        let note = |m: &str| {
            notes
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(m.to_string())
        };
        let cache = recon_pipeline::config::default_cache_dir();
        let chosen = recon_pipeline::choose_backend(cfg, &cache, &note).map_err(py_err)?;
        let notes = notes.into_inner().unwrap_or_else(|e| e.into_inner());
        let q_cache = recon_q::Cache::new(cache);
        let inner = py.detach(|| -> recon_pipeline::Result<Inner> {
            Ok(match chosen {
                Chosen::Cuda(b) => {
                    let op = make.make(&b, &q_cache)?;
                    Inner::Cuda(b, op)
                }
                Chosen::Cpu(Precision::F32) => {
                    let b = CpuBackend::<f32>::new();
                    let op = make.make(&b, &q_cache)?;
                    Inner::Cpu32(b, op)
                }
                Chosen::Cpu(Precision::F64) => {
                    let b = CpuBackend::<f64>::new();
                    let op = make.make(&b, &q_cache)?;
                    Inner::Cpu64(b, op)
                }
            })
        });
        let inner = inner.map_err(py_err)?;
        let (device, [rows, cols]) = match &inner {
            Inner::Cpu32(b, op) => (b.describe(), op.shape()),
            Inner::Cpu64(b, op) => (b.describe(), op.shape()),
            Inner::Cuda(b, op) => (b.describe(), op.shape()),
        };
        Ok(Operator {
            inner: std::sync::Mutex::new(inner),
            shape: (rows, cols),
            device,
            notes,
        })
    }

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

/// The `[engine]` keys given as TOML.
fn engine_cfg(text: &str) -> PyResult<EngineCfg> {
    toml::from_str(text).map_err(|e| PyValueError::new_err(format!("engine settings: {e}")))
}

/// Makes an operator on any backend.
trait Make {
    fn make<B>(
        &self,
        backend: &B,
        cache: &recon_q::Cache,
    ) -> recon_pipeline::Result<Box<dyn LinearOp<B>>>
    where
        B: NufftBackend + 'static,
        B::Real: Stored;
}

/// F of `traj` on `grid`, its normal map the Toeplitz product with Q
/// (from the cache, or computed and cached) where `toeplitz`; with
/// `maps`, SENSE's stack over coils of F after each map.
struct MakeEncoding {
    engine: recon_encoding::Engine,
    grid: Grid,
    traj: Vec<[f64; 3]>,
    toeplitz: bool,
    maps: Option<Vec<Vec<Complex<f64>>>>,
}

impl Make for MakeEncoding {
    fn make<B>(
        &self,
        backend: &B,
        cache: &recon_q::Cache,
    ) -> recon_pipeline::Result<Box<dyn LinearOp<B>>>
    where
        B: NufftBackend + 'static,
        B::Real: Stored,
    {
        let plan = Plan::new(backend, self.engine, &self.grid, &self.traj)?;
        let q = match self.toeplitz {
            true => Some(
                recon_q::load_or_compute(&plan, Some(cache), &mut |_, _| {})
                    .context("computing Q")?
                    .0,
            ),
            false => None,
        };
        Ok(match (&self.maps, q) {
            (Some(maps), Some(q)) => {
                let maps: Vec<Vec<Complex<B::Real>>> = maps.iter().map(|m| from_f64(m)).collect();
                let t = recon_cg::Toeplitz::new(backend, &self.grid, &q)?;
                Box::new(recon_encoding::SenseTerm::new(
                    backend, &plan, t, &maps, None,
                )?)
            }
            (_, q) => Box::new(Encoding::new(backend, &plan, q.as_deref())?),
        })
    }
}

enum Prior {
    Gradient,
    /// W as the solver's stencil.
    Quadratic(recon_core::Stencil),
    /// The reference (x fastest) and eta relative to its largest gradient.
    Directional(Vec<f64>, f64),
    Wavelet,
}

/// A sparse prior's operator on the grid `n`.
struct MakePrior {
    kind: Prior,
    n: [usize; 3],
}

impl Make for MakePrior {
    fn make<B>(
        &self,
        backend: &B,
        _: &recon_q::Cache,
    ) -> recon_pipeline::Result<Box<dyn LinearOp<B>>>
    where
        B: NufftBackend + 'static,
        B::Real: Stored,
    {
        Ok(match &self.kind {
            Prior::Gradient => Box::new(recon_ops::Gradient::new(backend, self.n)?),
            Prior::Directional(r, eta) => {
                let p = recon_ops::Directional::from_reference(backend, self.n, r, *eta)?;
                let g = recon_ops::Gradient::new(backend, self.n)?;
                Box::new(recon_ops::Compose::new(backend, p, g)?)
            }
            Prior::Wavelet => Box::new(recon_ops::Wavelet::new(backend, self.n)?),
            Prior::Quadratic(w) => Box::new(recon_ops::Quadratic::new(backend, w)?),
        })
    }
}

/// The quadratic prior's W on `matrix`: uniform without a reference, else
/// the anatomical W of the reference on the grid (`fov_mm`, 1 mm voxels
/// when `None`) with the `[regulariser]` keys of `keys` (TOML), as a run's
/// first solve uses it (a second pass's relaxed edges depend on its image).
fn quadratic_w(
    matrix: [usize; 3],
    fov_mm: Option<[f64; 3]>,
    reference: Option<Vec<f64>>,
    keys: &str,
) -> PyResult<recon_core::Stencil> {
    let cfg: recon_pipeline::config::RegulariserCfg =
        toml::from_str(keys).map_err(|e| PyValueError::new_err(format!("regulariser: {e}")))?;
    use recon_pipeline::config::RegulariserKind;
    let Some(reference) = reference else {
        if cfg.kind == RegulariserKind::Anatomical {
            return Err(PyValueError::new_err(
                "the anatomical W needs a reference image",
            ));
        }
        return Ok(recon_core::Stencil::uniform(matrix));
    };
    let fov = fov_mm.unwrap_or(matrix.map(|n| n as f64));
    let grid = Grid::new(matrix, fov).map_err(py_err)?;
    let prior = recon_prior::Prior::new(&grid, &reference, &cfg.params()).map_err(py_err)?;
    Ok(prior.stencil)
}

fn apply<B: Backend>(
    b: &B,
    op: &mut dyn LinearOp<B>,
    which: Map,
    x: &[Complex<f64>],
) -> recon_core::Result<Vec<Complex<f64>>> {
    let [rows, cols] = op.shape();
    let x = b.upload(&from_f64::<B::Real>(x))?;
    let mut out = b.zeros(match which {
        Map::Forward => rows,
        Map::Adjoint | Map::Normal => cols,
    })?;
    match which {
        Map::Forward => op.forward(b, &mut out, &x)?,
        Map::Adjoint => op.adjoint(b, &mut out, &x)?,
        Map::Normal => op.normal(b, &mut out, &x)?,
    }
    let y = to_f64(&b.to_host(&out)?);
    // The vectors' memory back to the driver, for the other libraries of
    // the process (a GPU's pool would keep it).
    drop((x, out));
    b.release_unused_memory()?;
    Ok(y)
}
