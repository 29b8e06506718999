//! BART's files: `NAME.hdr`, a text header whose line after `# Dimensions`
//! gives up to 16 dimensions, and `NAME.cfl`, the complex float32 values
//! (little-endian, real then imaginary), first dimension fastest
//! (column-major, as MATLAB and Fortran store arrays). Reading checks the
//! pair; writing gives the two files' contents ([`header`], [`bytes`]) for
//! the caller's own atomic writes (a run's output folder).

use crate::ImportError;
use recon_core::Complex;
use std::path::{Path, PathBuf};

/// BART's number of dimensions.
pub const DIMS: usize = 16;

/// The header and data paths of a cfl pair, from either name or the
/// base name without an extension.
pub fn paths(name: &Path) -> (PathBuf, PathBuf) {
    let base = match name.extension().and_then(|e| e.to_str()) {
        Some("cfl" | "hdr") => name.with_extension(""),
        _ => name.to_path_buf(),
    };
    let with = |ext: &str| {
        let mut s = base.clone().into_os_string();
        s.push(ext);
        PathBuf::from(s)
    };
    (with(".hdr"), with(".cfl"))
}

/// Whether `name` names a cfl pair (by extension, or a base name whose
/// `.hdr` exists).
pub fn is_cfl(name: &Path) -> bool {
    matches!(
        name.extension().and_then(|e| e.to_str()),
        Some("cfl" | "hdr")
    ) || paths(name).0.is_file()
}

/// Reads a cfl pair: its dimensions (16, trailing ones included) and
/// values, at most `max_values`.
pub fn read(
    name: &Path,
    max_values: usize,
) -> Result<(Vec<usize>, Vec<Complex<f64>>), ImportError> {
    let (hdr, cfl) = paths(name);
    let text = std::fs::read_to_string(&hdr).map_err(|e| ImportError::io(&hdr, e))?;
    let dims = parse_header(&text).map_err(|why| ImportError::format(&hdr, why))?;
    let count = dims
        .iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d))
        .filter(|&n| n <= max_values)
        .ok_or_else(|| {
            ImportError::format(
                &hdr,
                format!("declares dimensions {dims:?}: more than {max_values} values"),
            )
        })?;
    let bytes = std::fs::read(&cfl).map_err(|e| ImportError::io(&cfl, e))?;
    if bytes.len() != 8 * count {
        return Err(ImportError::format(
            &cfl,
            format!(
                "holds {} bytes, but its header's dimensions {:?} need {} (complex float32)",
                bytes.len(),
                trimmed(&dims),
                8 * count
            ),
        ));
    }
    let f = |b: &[u8]| f32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f64;
    let values = bytes
        .chunks_exact(8)
        .map(|c| Complex::new(f(&c[..4]), f(&c[4..])))
        .collect();
    Ok((dims, values))
}

/// The dimensions of a header: the line after `# Dimensions`, each a
/// positive integer, at most 16, padded with ones to 16.
fn parse_header(text: &str) -> Result<Vec<usize>, String> {
    let mut lines = text.lines();
    lines
        .by_ref()
        .find(|l| l.trim() == "# Dimensions")
        .ok_or("has no `# Dimensions` line: not a BART header")?;
    let line = lines.next().ok_or("ends after `# Dimensions`")?;
    let mut dims = Vec::new();
    for word in line.split_whitespace() {
        match word.parse::<usize>() {
            Ok(d) if d >= 1 => dims.push(d),
            _ => {
                return Err(format!(
                    "has dimension {word:?}: each must be a positive integer"
                ))
            }
        }
    }
    if dims.is_empty() || dims.len() > DIMS {
        return Err(format!(
            "gives {} dimensions: BART has 1 to {DIMS}",
            dims.len()
        ));
    }
    dims.resize(DIMS, 1);
    Ok(dims)
}

/// `dims` without its trailing ones (at least one kept).
pub fn trimmed(dims: &[usize]) -> &[usize] {
    let n = dims.iter().rposition(|&d| d != 1).map_or(1, |i| i + 1);
    &dims[..n]
}

/// The header of an array of `dims` (first fastest, at most 16).
pub fn header(dims: &[usize]) -> String {
    assert!(dims.len() <= DIMS, "BART has at most {DIMS} dimensions");
    let mut all = dims.to_vec();
    all.resize(DIMS, 1);
    let line: Vec<String> = all.iter().map(|d| d.to_string()).collect();
    format!("# Dimensions\n{}\n", line.join(" "))
}

/// The data file's bytes of `values`.
pub fn bytes(values: &[Complex<f32>]) -> Vec<u8> {
    let mut out = Vec::with_capacity(8 * values.len());
    for v in values {
        out.extend_from_slice(&v.re.to_le_bytes());
        out.extend_from_slice(&v.im.to_le_bytes());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pair_written_reads_back_and_bad_headers_are_named() {
        let tmp = tempfile::tempdir().unwrap();
        let name = tmp.path().join("x");
        let values: Vec<Complex<f32>> = (0..24)
            .map(|i| Complex::new(i as f32, -(i as f32)))
            .collect();
        std::fs::write(tmp.path().join("x.hdr"), header(&[3, 4, 2])).unwrap();
        std::fs::write(tmp.path().join("x.cfl"), bytes(&values)).unwrap();
        let (dims, back) = read(&tmp.path().join("x.cfl"), 1000).unwrap();
        assert_eq!(trimmed(&dims), &[3, 4, 2]);
        assert_eq!(dims.len(), DIMS);
        assert!(back
            .iter()
            .zip(&values)
            .all(|(b, v)| b.re == v.re as f64 && b.im == v.im as f64));
        // Too many values for the limit, a short data file, bad headers.
        assert!(read(&name, 10)
            .unwrap_err()
            .to_string()
            .contains("more than 10"));
        std::fs::write(tmp.path().join("x.cfl"), [0u8; 16]).unwrap();
        let e = read(&name, 1000).unwrap_err().to_string();
        assert!(
            e.contains("x.cfl") && e.contains("16 bytes") && e.contains("192"),
            "{e}"
        );
        for (hdr, expect) in [
            ("3 4\n", "no `# Dimensions`"),
            ("# Dimensions\n3 0 2\n", "\"0\""),
            ("# Dimensions\n3 x\n", "\"x\""),
            ("# Dimensions\n", "ends after"),
        ] {
            std::fs::write(tmp.path().join("x.hdr"), hdr).unwrap();
            let e = read(&name, 1000).unwrap_err().to_string();
            assert!(e.contains("x.hdr") && e.contains(expect), "{hdr:?}: {e}");
        }
    }
}
