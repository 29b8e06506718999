//! NumPy's files: one array in `.npy`, or a named array of an `.npz`
//! archive (`FILE.npz:NAME`, compressed or not), of float32, float64,
//! complex64 or complex128, read in NumPy's logical (C) order whatever
//! the file's memory order.

use crate::ImportError;
use ndarray::ArrayD;
use ndarray_npy::{NpzReader, ReadNpyError, ReadNpzError, ReadableElement};
use recon_core::Complex;
use std::path::Path;

/// An array as read: its shape, its values as complex numbers, and whether
/// the file held complex numbers (else the imaginary parts are 0).
pub struct Array {
    pub shape: Vec<usize>,
    pub values: Vec<Complex<f64>>,
    pub complex: bool,
}

/// The file and, for an archive, the array's name: `FILE.npz:NAME`.
pub fn split_name(name: &Path) -> (&Path, Option<&str>) {
    let s = name.to_str().unwrap_or("");
    match s.rsplit_once(".npz:") {
        Some((file, key)) if !key.is_empty() => (Path::new(&s[..file.len() + 4]), Some(key)),
        _ => (name, None),
    }
}

/// Whether `name` is a NumPy file (`.npy`, `.npz` or `FILE.npz:NAME`).
pub fn is_npy(name: &Path) -> bool {
    let (file, _) = split_name(name);
    matches!(
        file.extension().and_then(|e| e.to_str()),
        Some("npy" | "npz")
    )
}

/// Reads `name`: a `.npy` file, or `FILE.npz:NAME` (an `.npz` of one array
/// may omit its name). Files over `max_bytes` are refused unread.
pub fn read(name: &Path, max_bytes: u64) -> Result<Array, ImportError> {
    let (file, key) = split_name(name);
    let len = std::fs::metadata(file)
        .map_err(|e| ImportError::io(file, e))?
        .len();
    if len > max_bytes {
        return Err(ImportError::format(
            file,
            format!("is {len} bytes: more than the {max_bytes} an input may have"),
        ));
    }
    match file.extension().and_then(|e| e.to_str()) {
        Some("npz") => read_npz(file, key),
        _ => read_npy(file),
    }
}

/// The element types recon reads, in the order tried.
const TYPES: &str = "float32, float64, complex64 or complex128";

fn read_npy(file: &Path) -> Result<Array, ImportError> {
    fn one<T: ReadableElement>(file: &Path) -> Result<ArrayD<T>, ReadNpyError> {
        ndarray_npy::read_npy(file)
    }
    let wrong = |e: &ReadNpyError| matches!(e, ReadNpyError::WrongDescriptor(_));
    let fail =
        |e: ReadNpyError| ImportError::format(file, format!("cannot be read as NumPy's .npy: {e}"));
    macro_rules! attempt {
        ($t:ty, $complex:expr) => {
            match one::<$t>(file) {
                Ok(a) => return Ok(array(a, $complex)),
                Err(e) if wrong(&e) => {}
                Err(e) => return Err(fail(e)),
            }
        };
    }
    attempt!(f32, false);
    attempt!(f64, false);
    attempt!(Complex<f32>, true);
    attempt!(Complex<f64>, true);
    Err(ImportError::format(
        file,
        format!("holds an array of another type: recon reads {TYPES}"),
    ))
}

fn read_npz(file: &Path, key: Option<&str>) -> Result<Array, ImportError> {
    let open = || {
        let f = std::fs::File::open(file).map_err(|e| ImportError::io(file, e))?;
        NpzReader::new(f)
            .map_err(|e| ImportError::format(file, format!("cannot be read as NumPy's .npz: {e}")))
    };
    let mut npz = open()?;
    let names: Vec<String> = npz
        .names()
        .map_err(|e| ImportError::format(file, format!("cannot list its arrays: {e}")))?
        .into_iter()
        .map(|n| n.trim_end_matches(".npy").to_string())
        .collect();
    let key = match key {
        Some(k) if names.iter().any(|n| n == k) => k.to_string(),
        Some(k) => {
            return Err(ImportError::format(
                file,
                format!("has no array `{k}`: it holds {}", names.join(", ")),
            ))
        }
        None if names.len() == 1 => names[0].clone(),
        None => {
            return Err(ImportError::format(
                file,
                format!(
                    "holds {} arrays ({}): name one as FILE.npz:NAME",
                    names.len(),
                    names.join(", ")
                ),
            ))
        }
    };
    let wrong = |e: &ReadNpzError| matches!(e, ReadNpzError::Npy(ReadNpyError::WrongDescriptor(_)));
    let fail =
        |e: ReadNpzError| ImportError::format(file, format!("array `{key}` cannot be read: {e}"));
    macro_rules! attempt {
        ($t:ty, $complex:expr) => {
            match open()?.by_name::<ndarray::OwnedRepr<$t>, ndarray::IxDyn>(&key) {
                Ok(a) => return Ok(array(a, $complex)),
                Err(e) if wrong(&e) => {}
                Err(e) => return Err(fail(e)),
            }
        };
    }
    attempt!(f32, false);
    attempt!(f64, false);
    attempt!(Complex<f32>, true);
    attempt!(Complex<f64>, true);
    Err(ImportError::format(
        file,
        format!("array `{key}` is of another type: recon reads {TYPES}"),
    ))
}

/// Values in logical (C) order as complex float64.
fn array<T: Into64>(a: ArrayD<T>, complex: bool) -> Array {
    Array {
        shape: a.shape().to_vec(),
        values: a.iter().map(|v| v.to64()).collect(),
        complex,
    }
}

trait Into64: Copy {
    fn to64(self) -> Complex<f64>;
}
impl Into64 for f32 {
    fn to64(self) -> Complex<f64> {
        Complex::new(self as f64, 0.0)
    }
}
impl Into64 for f64 {
    fn to64(self) -> Complex<f64> {
        Complex::new(self, 0.0)
    }
}
impl Into64 for Complex<f32> {
    fn to64(self) -> Complex<f64> {
        Complex::new(self.re as f64, self.im as f64)
    }
}
impl Into64 for Complex<f64> {
    fn to64(self) -> Complex<f64> {
        self
    }
}
