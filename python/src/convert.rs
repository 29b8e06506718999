//! NumPy arrays to and from the crates' vectors: the one layout this
//! module takes (the Python package arranges its arguments into it).

use numpy::{Complex64, PyArray1, PyReadonlyArray2, PyUntypedArrayMethods};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use recon_core::Complex;

/// `[rows, columns]` complex values, row after row.
pub(crate) fn rows(a: &PyReadonlyArray2<'_, Complex64>) -> (usize, usize, Vec<Complex<f64>>) {
    let s = a.shape();
    (s[0], s[1], a.as_array().iter().copied().collect())
}

/// A trajectory `[M, 3]` of (kx, ky, kz).
pub(crate) fn trajectory(a: &PyReadonlyArray2<'_, f64>) -> PyResult<Vec<[f64; 3]>> {
    let s = a.shape();
    if s[1] != 3 {
        return Err(PyValueError::new_err(format!(
            "the trajectory has shape {s:?}, expected [M, 3]"
        )));
    }
    let v = a.as_array();
    Ok(v.rows().into_iter().map(|r| [r[0], r[1], r[2]]).collect())
}

pub(crate) fn array<'py>(py: Python<'py>, v: Vec<Complex<f64>>) -> Bound<'py, PyArray1<Complex64>> {
    PyArray1::from_vec(py, v)
}

pub(crate) fn to_f64<T: recon_core::Real>(v: &[Complex<T>]) -> Vec<Complex<f64>> {
    v.iter()
        .map(|c| Complex::new(c.re.f64(), c.im.f64()))
        .collect()
}
