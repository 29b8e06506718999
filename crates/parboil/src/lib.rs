//! Parboil's mri-q benchmark files, so that Q can be computed from them and
//! checked against outputs this project did not write.
//!
//! All little-endian. Input: `int32 numK, int32 numX`, then float32
//! `kx[numK] ky[numK] kz[numK] x[numX] y[numX] z[numX] phiR[numK] phiI[numK]`.
//! Output: `uint32 numX`, then float32 `Qr[numX]`, then `Qi[numX]`. Q is
//! `sum_m (phiR^2 + phiI^2) exp(i 2pi (kx x + ky y + kz z))`: the summation
//! engine with k as sources and the file's points as targets, phase in turns.
//! Reading checks everything before anything is computed: counts, sizes and
//! finiteness, each failure naming what is wrong.

use recon_core::{Backend, Complex, Progress, Real, Sign, Targets};
use std::path::Path;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum ParboilError {
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("{path}: the file is {len} bytes, too short for the two int32 counts (8 bytes)")]
    NoHeader { path: String, len: usize },
    #[error("{path}: negative count: numK = {num_k}, numX = {num_x}")]
    Negative {
        path: String,
        num_k: i64,
        num_x: i64,
    },
    #[error("{path}: numK = {num_k} and numX = {num_x} need {expected} bytes, but the file has {len}{hint}")]
    Size {
        path: String,
        num_k: usize,
        num_x: usize,
        expected: usize,
        len: usize,
        hint: &'static str,
    },
    #[error("{path}: {array}[{index}] is {value}: every value must be finite")]
    NotFinite {
        path: String,
        array: &'static str,
        index: usize,
        value: f32,
    },
    #[error(
        "{path}: numK = {num_k} and numX = {num_x}: Q needs at least one sample and one point"
    )]
    Empty {
        path: String,
        num_k: usize,
        num_x: usize,
    },
    #[error("{path}: the sum of phiR^2 + phiI^2 over the samples is {sum:e}, beyond float32's range (3.4e38): Q could not be written in Parboil's float32 output")]
    Overflow { path: String, sum: f64 },
    #[error(transparent)]
    Backend(#[from] recon_core::Error),
}

/// The contents of an mri-q input file.
#[derive(Debug, Clone, PartialEq)]
pub struct Input {
    /// k-space positions (kx, ky, kz).
    pub k: Vec<[f64; 3]>,
    /// Points at which Q is computed (x, y, z).
    pub x: Vec<[f64; 3]>,
    /// phiR^2 + phiI^2 per sample.
    pub phi_mag: Vec<f64>,
}

fn f32s(bytes: &[u8]) -> impl Iterator<Item = f32> + '_ {
    bytes
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}

/// Parses input bytes; `path` names the file in errors.
pub fn parse_input(
    bytes: &[u8],
    path: &str,
    max_samples: Option<usize>,
) -> Result<Input, ParboilError> {
    let path_s = path.to_string();
    if bytes.len() < 8 {
        return Err(ParboilError::NoHeader {
            path: path_s,
            len: bytes.len(),
        });
    }
    let num_k = i32::from_le_bytes(bytes[0..4].try_into().unwrap()) as i64;
    let num_x = i32::from_le_bytes(bytes[4..8].try_into().unwrap()) as i64;
    if num_k < 0 || num_x < 0 {
        return Err(ParboilError::Negative {
            path: path_s,
            num_k,
            num_x,
        });
    }
    let (nk, nx) = (num_k as usize, num_x as usize);
    let expected = 8 + 4 * (5 * nk + 3 * nx);
    if bytes.len() != expected {
        return Err(ParboilError::Size {
            path: path_s,
            num_k: nk,
            num_x: nx,
            expected,
            len: bytes.len(),
            hint: if bytes.len() < expected {
                " (truncated?)"
            } else {
                " (trailing data?)"
            },
        });
    }
    let mut v: Vec<f32> = f32s(&bytes[8..]).collect();
    let names = ["kx", "ky", "kz", "x", "y", "z", "phiR", "phiI"];
    let lens = [nk, nk, nk, nx, nx, nx, nk, nk];
    let mut arrays: Vec<Vec<f32>> = Vec::with_capacity(8);
    let mut rest = &mut v[..];
    for (name, len) in names.iter().zip(lens) {
        let (head, tail) = rest.split_at_mut(len);
        if let Some(i) = head.iter().position(|f| !f.is_finite()) {
            return Err(ParboilError::NotFinite {
                path: path_s,
                array: name,
                index: i,
                value: head[i],
            });
        }
        arrays.push(head.to_vec());
        rest = tail;
    }
    let k_used = max_samples.map_or(nk, |m| m.min(nk));
    if k_used == 0 || nx == 0 {
        return Err(ParboilError::Empty {
            path: path_s,
            num_k: k_used,
            num_x: nx,
        });
    }
    // |Q| <= sum |phi|^2: beyond float32 it would be written as Inf.
    let sum: f64 = (0..k_used)
        .map(|m| (arrays[6][m] as f64).powi(2) + (arrays[7][m] as f64).powi(2))
        .sum();
    if !(sum <= f32::MAX as f64) {
        return Err(ParboilError::Overflow { path: path_s, sum });
    }
    Ok(Input {
        k: (0..k_used)
            .map(|m| [arrays[0][m], arrays[1][m], arrays[2][m]].map(f64::from))
            .collect(),
        x: (0..nx)
            .map(|n| [arrays[3][n], arrays[4][n], arrays[5][n]].map(f64::from))
            .collect(),
        phi_mag: (0..k_used)
            .map(|m| (arrays[6][m] as f64).powi(2) + (arrays[7][m] as f64).powi(2))
            .collect(),
    })
}

/// Reads an input file; `max_samples` caps numK, as Parboil's `-S` option does.
pub fn read_input(path: &Path, max_samples: Option<usize>) -> Result<Input, ParboilError> {
    let bytes = std::fs::read(path).map_err(|source| ParboilError::Io {
        path: path.display().to_string(),
        source,
    })?;
    parse_input(&bytes, &path.display().to_string(), max_samples)
}

/// Q at the file's points, on any backend.
pub fn compute_q<B: Backend>(
    backend: &B,
    input: &Input,
    progress: Progress<'_>,
) -> Result<Vec<Complex<B::Real>>, ParboilError> {
    let coef: Vec<Complex<B::Real>> = input
        .phi_mag
        .iter()
        .map(|&p| Complex::new(B::Real::of(p), B::Real::of(0.0)))
        .collect();
    let mut q = vec![Complex::default(); input.x.len()];
    recon_ops::sum_exp_on_shards(
        backend,
        &mut q,
        Targets::List(&input.x),
        &input.k,
        &coef,
        Sign::Plus,
        progress,
    )?;
    Ok(q)
}

/// Output bytes: `uint32 numX`, then Qr, then Qi, as float32.
pub fn output_bytes<T: Real>(q: &[Complex<T>]) -> Vec<u8> {
    let mut out = Vec::with_capacity(4 + 8 * q.len());
    out.extend_from_slice(&(q.len() as u32).to_le_bytes());
    for c in q {
        out.extend_from_slice(&(c.re.f64() as f32).to_le_bytes());
    }
    for c in q {
        out.extend_from_slice(&(c.im.f64() as f32).to_le_bytes());
    }
    out
}

/// Parses output bytes into (Qr, Qi).
pub fn parse_output(bytes: &[u8], path: &str) -> Result<(Vec<f32>, Vec<f32>), ParboilError> {
    if bytes.len() < 4 {
        return Err(ParboilError::NoHeader {
            path: path.to_string(),
            len: bytes.len(),
        });
    }
    let n = u32::from_le_bytes(bytes[0..4].try_into().unwrap()) as usize;
    if bytes.len() != 4 + 8 * n {
        return Err(ParboilError::Size {
            path: path.to_string(),
            num_k: 0,
            num_x: n,
            expected: 4 + 8 * n,
            len: bytes.len(),
            hint: "",
        });
    }
    let v: Vec<f32> = f32s(&bytes[4..]).collect();
    Ok((v[..n].to_vec(), v[n..].to_vec()))
}

/// How an output compares with a reference under Parboil's rule.
#[derive(Debug, Clone, PartialEq)]
pub struct Comparison {
    /// Values failing both tolerances.
    pub failures: usize,
    pub values: usize,
    /// Largest |out - ref| over max |ref|.
    pub max_rel_error: f64,
}

impl Comparison {
    pub fn passed(&self) -> bool {
        self.failures == 0
    }
}

/// Parboil's acceptance rule: each value passes when
/// `|out - ref| <= 1e-4 max|ref|` (the maximum over Qr and Qi together) or
/// `|out - ref| < 0.002 |ref|`. The counts must match.
pub fn compare(out: (&[f32], &[f32]), reference: (&[f32], &[f32])) -> Result<Comparison, String> {
    if out.0.len() != reference.0.len() || out.1.len() != reference.1.len() {
        return Err(format!(
            "counts differ: {} values against {} in the reference",
            out.0.len(),
            reference.0.len()
        ));
    }
    let peak = reference
        .0
        .iter()
        .chain(reference.1)
        .fold(0.0f64, |m, v| m.max((*v as f64).abs()));
    let (mut failures, mut worst) = (0, 0.0f64);
    for (o, r) in out
        .0
        .iter()
        .chain(out.1)
        .zip(reference.0.iter().chain(reference.1))
    {
        let d = (*o as f64 - *r as f64).abs();
        worst = worst.max(d);
        if !(d <= 1e-4 * peak || d < 0.002 * (*r as f64).abs()) {
            failures += 1;
        }
    }
    Ok(Comparison {
        failures,
        values: 2 * out.0.len(),
        max_rel_error: worst / peak,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input_bytes(num_k: i32, num_x: i32, values: &[f32]) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend_from_slice(&num_k.to_le_bytes());
        b.extend_from_slice(&num_x.to_le_bytes());
        for v in values {
            b.extend_from_slice(&v.to_le_bytes());
        }
        b
    }

    #[test]
    fn parses_and_caps_samples() {
        // 2 samples, 1 point: kx ky kz (2 each), x y z (1 each), phiR phiI (2 each).
        let v = [
            1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 0.1, 0.2, 0.3, 1.0, 2.0, 3.0, 4.0,
        ];
        let inp = parse_input(&input_bytes(2, 1, &v), "t", None).unwrap();
        assert_eq!(inp.k, vec![[1.0, 3.0, 5.0], [2.0, 4.0, 6.0]]);
        assert_eq!(inp.x.len(), 1);
        assert!((inp.x[0][1] - 0.2f32 as f64).abs() < 1e-12);
        assert_eq!(inp.phi_mag, vec![1.0 + 9.0, 4.0 + 16.0]);
        let capped = parse_input(&input_bytes(2, 1, &v), "t", Some(1)).unwrap();
        assert_eq!(capped.k.len(), 1);
        assert_eq!(capped.phi_mag, vec![10.0]);
    }

    #[test]
    fn each_bad_input_is_named() {
        let v = [1.0f32; 13];
        let good = input_bytes(2, 1, &v);
        let msg = |b: &[u8]| parse_input(b, "f.bin", None).unwrap_err().to_string();
        assert!(msg(&good[..5]).contains("too short"));
        assert!(msg(&good[..good.len() - 4]).contains("truncated"));
        assert!(msg(&input_bytes(3, 1, &v)).contains("numK = 3"));
        assert!(msg(&input_bytes(-1, 1, &v)).contains("negative"));
        let mut nan = v;
        nan[3] = f32::NAN; // ky[1]: kx is 0..2, ky 2..4
        assert!(msg(&input_bytes(2, 1, &nan)).contains("ky[1]"));
        let mut inf = v;
        inf[12] = f32::INFINITY; // phiI[1]
        assert!(msg(&input_bytes(2, 1, &inf)).contains("phiI[1]"));
    }

    #[test]
    fn output_round_trips_and_rule_applies() {
        let q = vec![Complex::new(1.0f32, -2.0), Complex::new(3.0, 0.5)];
        let bytes = output_bytes(&q);
        let (re, im) = parse_output(&bytes, "o").unwrap();
        assert_eq!((re.clone(), im.clone()), (vec![1.0, 3.0], vec![-2.0, 0.5]));
        assert!(compare((&re, &im), (&re, &im)).unwrap().passed());
        // peak 3: 1e-4 * 3 = 3e-4 absolute; 0.002 * 0.5 = 1e-3 relative for the last value.
        let near = [0.5 + 9e-4];
        assert!(compare((&re, &[-2.0, near[0]]), (&re, &im))
            .unwrap()
            .passed());
        let far = compare((&re, &[-2.0, 0.6]), (&re, &im)).unwrap();
        assert_eq!(far.failures, 1);
        assert!(compare((&re[..1], &im[..1]), (&re, &im)).is_err());
    }
}
