//! `recon-import`: other tools' k-space files turned into a recon scan
//! file, and recon's images written for them. BART users hold `.cfl`/`.hdr`
//! pairs (trajectory `[3, readout, spokes]`, k-space `[1, readout, spokes,
//! coils]`, both in cycles per FOV); SigPy and NumPy users hold arrays
//! (`coord [..., d]`, `ksp [coils, ...]`). Key design decision: nothing
//! the source format lacks is guessed. The matrix and the FOV are always
//! given ([`Params`]); the order of a NumPy trajectory's columns (recon's
//! `(kx, ky, kz)`, or SigPy's `(kz, ky, kx)`, which follows the image's
//! axes) and its units are stated or take recon's documented defaults;
//! every array's shape is checked against the others, naming the input,
//! before anything is written, and the scan file is written whole or not
//! at all.

pub mod cfl;
pub mod npy;

use recon_core::{Complex, Grid};
use recon_io::scan::{CoilNoise, Scan};
use std::path::Path;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum ImportError {
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    /// A file that is not what its format says.
    #[error("{path} {problem}")]
    Format { path: String, problem: String },
    /// Inputs that disagree with each other or with the parameters; the
    /// message names them.
    #[error("{0}")]
    Layout(String),
    #[error(transparent)]
    Scan(#[from] recon_io::IoError),
}

impl ImportError {
    pub(crate) fn io(path: &Path, source: std::io::Error) -> Self {
        ImportError::Io {
            path: path.display().to_string(),
            source,
        }
    }
    pub(crate) fn format(path: &Path, problem: impl Into<String>) -> Self {
        ImportError::Format {
            path: path.display().to_string(),
            problem: problem.into(),
        }
    }
}

/// The order of a NumPy trajectory's last axis.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum KOrder {
    /// `(kx, ky, kz)`: recon's and BART's.
    #[default]
    Xyz,
    /// `(kz, ky, kx)`: SigPy's, which follows the image's axes `[z, y, x]`.
    Zyx,
}

/// The trajectory's units.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Units {
    /// Cycles per FOV (Nyquist at `|k| = N/2`): recon's, BART's and SigPy's.
    #[default]
    CyclesPerFov,
    /// Normalised to `[-0.5, 0.5]` (ISMRMRD's habit): multiplied by N.
    Normalized,
}

/// What the source formats lack.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Params {
    /// Image matrix, x y z (z = 1: a 2-D scan).
    pub matrix: [usize; 3],
    /// Field of view in mm, x y z.
    pub fov_mm: [f64; 3],
    pub k_order: KOrder,
    pub units: Units,
}

/// The inputs: each a cfl pair (by either name or the base name), a
/// `.npy` file or `FILE.npz:NAME`.
#[derive(Debug, Clone, Copy)]
pub struct Sources<'a> {
    pub trajectory: &'a Path,
    pub data: &'a Path,
    /// Noise samples per coil (a noise scan), optional.
    pub noise: Option<&'a Path>,
}

/// What was written.
#[derive(Debug, Clone, PartialEq)]
pub struct Info {
    pub samples: usize,
    pub coils: usize,
    /// Noise samples per coil, when given.
    pub noise_samples: Option<usize>,
    /// The scan file's version (the rule: [`Scan::version`]).
    pub version: u32,
}

/// The most bytes one input file may have (16 GiB).
pub const MAX_FILE_BYTES: u64 = 16 << 30;

/// One input, read: its shape (C order for NumPy, BART's 16 dimensions
/// for cfl) and values.
struct Input {
    shape: Vec<usize>,
    values: Vec<Complex<f64>>,
    complex: bool,
    bart: bool,
}

fn read_input(name: &Path, what: &str) -> Result<Input, ImportError> {
    if npy::is_npy(name) {
        let a = npy::read(name, MAX_FILE_BYTES)?;
        return Ok(Input {
            shape: a.shape,
            values: a.values,
            complex: a.complex,
            bart: false,
        });
    }
    if cfl::is_cfl(name) {
        let (dims, values) = cfl::read(name, (MAX_FILE_BYTES / 8) as usize)?;
        return Ok(Input {
            shape: dims,
            values,
            complex: true,
            bart: true,
        });
    }
    Err(ImportError::Layout(format!(
        "{what} {}: not a file recon imports (BART's NAME.cfl with NAME.hdr, NumPy's .npy, or \
         FILE.npz:NAME)",
        name.display()
    )))
}

/// Reads the sources and writes the scan file `out` (atomically).
pub fn import(out: &Path, sources: &Sources, p: &Params) -> Result<Info, ImportError> {
    let scan = scan(sources, p)?;
    recon_io::scan::write_scan(out, &scan)?;
    Ok(Info {
        samples: scan.traj.len(),
        coils: scan.coils,
        noise_samples: match &scan.noise {
            Some(CoilNoise::Samples(v)) => Some(v.len() / scan.coils),
            _ => None,
        },
        version: scan.version(),
    })
}

/// The scan the sources hold, checked.
pub fn scan(sources: &Sources, p: &Params) -> Result<Scan, ImportError> {
    let grid = Grid::new(p.matrix, p.fov_mm)
        .map_err(|e| ImportError::Layout(format!("--matrix and --fov-mm: {e}")))?;
    let t = read_input(sources.trajectory, "--trajectory")?;
    let traj = trajectory(&t, sources.trajectory, &grid, p)?;
    let d = read_input(sources.data, "--data")?;
    let (coils, data) = data(&d, sources.data, traj.len())?;
    finite(&data, sources.data)?;
    let noise = match sources.noise {
        Some(name) => {
            let n = noise(&read_input(name, "--noise")?, name, coils)?;
            finite(&n, name)?;
            Some(n)
        }
        None => None,
    };
    Ok(Scan {
        grid,
        traj,
        coils,
        data,
        noise: noise.map(CoilNoise::Samples),
        maps: None,
        truth: None,
        anatomy: None,
        geometry: None,
        parts: Vec::new(),
    })
}

fn bad(name: &Path, problem: String) -> ImportError {
    ImportError::format(name, problem)
}

/// The trajectory in cycles per FOV, `(kx, ky, kz)` per sample: BART's
/// `[d, ...]` (first dimension the components, x y z), or NumPy's
/// `[..., d]` in the stated order; d = 3, or 2 on a 2-D matrix.
fn trajectory(
    t: &Input,
    name: &Path,
    grid: &Grid,
    p: &Params,
) -> Result<Vec<[f64; 3]>, ImportError> {
    let d = match t.bart {
        true => t.shape[0],
        false => *t.shape.last().unwrap_or(&0),
    };
    let layout = match t.bart {
        true => "BART's [3, readout, spokes, ...]",
        false => "[..., 3] (the last axis holds the components)",
    };
    if !(d == 3 || (d == 2 && grid.is_2d())) {
        return Err(bad(
            name,
            format!(
                "has shape {:?}: a trajectory is {layout}, or 2 components on a 2-D matrix (--matrix z = 1)",
                shown(t)
            ),
        ));
    }
    if t.bart && p.k_order == KOrder::Zyx {
        return Err(ImportError::Layout(
            "--k-order zyx is for NumPy trajectories: BART's are (x, y, z) by definition".into(),
        ));
    }
    if let Some(i) = t.values.iter().position(|v| v.im != 0.0) {
        return Err(bad(
            name,
            format!(
                "holds complex coordinates (value {i} is {}): k must be real",
                t.values[i]
            ),
        ));
    }
    let scale = |a: usize| match p.units {
        Units::CyclesPerFov => 1.0,
        Units::Normalized => grid.n[a] as f64,
    };
    let mut traj = Vec::with_capacity(t.values.len() / d);
    for (m, k) in t.values.chunks_exact(d).enumerate() {
        let mut v = [0.0; 3];
        for (j, c) in k.iter().enumerate() {
            let axis = match p.k_order {
                KOrder::Xyz => j,
                KOrder::Zyx => d - 1 - j,
            };
            v[axis] = c.re * scale(axis);
        }
        let not_finite = (0..3).find(|&a| !v[a].is_finite());
        if let Some(a) = not_finite.or_else(|| recon_io::beyond_nyquist(v, grid.n)) {
            return Err(bad(
                name,
                format!(
                    "sample {m} has k{} = {} in cycles/FOV, beyond Nyquist ({} for --matrix {}): \
                     check --units and --matrix{}",
                    ["x", "y", "z"][a],
                    v[a],
                    grid.n[a] as f64 / 2.0,
                    grid.n[a],
                    if t.bart { "" } else { " and --k-order" }
                ),
            ));
        }
        traj.push(v);
    }
    if traj.is_empty() {
        return Err(bad(name, "holds no samples".into()));
    }
    // all samples at one point: refused here as a scan file's reader does
    recon_io::check_spread(name, "trajectory", &traj)?;
    Ok(traj)
}

/// The k-space data `[C, M]`: BART's `[1, readout, spokes, coils]` (the
/// coils on dimension 3), or NumPy's `[...]` (one coil) or `[C, ...]`
/// with `...` the trajectory's sample axes, complex, or real pairs with a
/// last axis of 2.
fn data(d: &Input, name: &Path, m: usize) -> Result<(usize, Vec<Complex<f64>>), ImportError> {
    if d.bart {
        let s = &d.shape;
        let ok = s[0] == 1 && s[1] * s[2] == m && s[4..].iter().all(|&x| x == 1);
        if !ok {
            return Err(bad(
                name,
                format!(
                    "has dimensions {:?}: BART's k-space is [1, readout, spokes, coils], with \
                     readout x spokes = the trajectory's {m} samples",
                    cfl::trimmed(s)
                ),
            ));
        }
        return Ok((s[3], d.values.clone()));
    }
    let total: usize = d.shape.iter().product();
    let (values, count) = if d.complex {
        (d.values.clone(), total)
    } else if d.shape.last() == Some(&2) {
        let v = d
            .values
            .chunks_exact(2)
            .map(|c| Complex::new(c[0].re, c[1].re))
            .collect();
        (v, total / 2)
    } else {
        return Err(bad(
            name,
            format!(
                "holds real numbers of shape {:?}: k-space is complex (complex64 or complex128), \
                 or real pairs with a last axis of 2",
                d.shape
            ),
        ));
    };
    if count == 0 || count % m != 0 {
        return Err(bad(
            name,
            format!(
                "has {count} complex values, not a whole number of coils of the trajectory's \
                 {m} samples: k-space is [coils, ...] with ... the trajectory's sample axes"
            ),
        ));
    }
    Ok((count / m, values))
}

/// Noise samples `[C, K]`: BART's with the coils on dimension 3, or
/// NumPy's `[C, K]` (`[K]` for one coil).
fn noise(n: &Input, name: &Path, coils: usize) -> Result<Vec<Complex<f64>>, ImportError> {
    let got = match n.bart {
        true => n.shape[3],
        false if n.shape.len() == 1 => 1,
        false if n.shape.len() == 2 => n.shape[0],
        false => 0, // not [C, K]
    };
    if got != coils || n.values.is_empty() {
        return Err(bad(
            name,
            format!(
                "has shape {:?}: noise samples are [coils, samples] ({}), here of {coils} coils \
                 as --data has",
                shown(n),
                if n.bart {
                    "BART: coils on dimension 3"
                } else {
                    "NumPy"
                }
            ),
        ));
    }
    if !n.complex {
        return Err(bad(
            name,
            "holds real numbers: noise samples are complex".into(),
        ));
    }
    if !n.bart {
        return Ok(n.values.clone());
    }
    // BART: coil c's samples are every value whose dimension-3 index is c.
    let inner: usize = n.shape[..3].iter().product();
    let mut out = vec![Complex::default(); n.values.len()];
    let k = n.values.len() / coils;
    for (i, v) in n.values.iter().enumerate() {
        let (c, j) = (
            (i / inner) % coils,
            (i / (inner * coils)) * inner + i % inner,
        );
        out[c * k + j] = *v;
    }
    Ok(out)
}

/// Fails at the first value that is not finite.
fn finite(values: &[Complex<f64>], name: &Path) -> Result<(), ImportError> {
    match values
        .iter()
        .position(|v| !(v.re.is_finite() && v.im.is_finite()))
    {
        Some(i) => Err(bad(
            name,
            format!("holds {} at index {i}: values must be finite", values[i]),
        )),
        None => Ok(()),
    }
}

fn shown(i: &Input) -> Vec<usize> {
    match i.bart {
        true => cfl::trimmed(&i.shape).to_vec(),
        false => i.shape.clone(),
    }
}
