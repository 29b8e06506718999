//! Opening a scan file's parts checked, before anything large is read:
//! datasets of numbers (float32, float64 or h5py's complex types) of a declared shape (each axis named in messages),
//! optional groups that are present but unreadable (an error, not an
//! absence), attributes of three numbers, and the memory a read needs.

use crate::hdf5;
use crate::{layout as bad, Context, IoError};
use hdf5::types::TypeDescriptor;
use std::path::Path;

/// One axis of a dataset's expected shape.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Axis {
    /// Any length, named in messages (`C`, `M`, ...).
    Any(&'static str),
    /// This length, named in messages (`Nz`, ...).
    Named(&'static str, usize),
    /// This length (the trailing 2 of complex pairs, 3 of k).
    Is(usize),
}

impl Axis {
    fn fits(self, got: usize) -> bool {
        match self {
            Axis::Any(_) => true,
            Axis::Named(_, n) | Axis::Is(n) => got == n,
        }
    }

    fn show(self) -> String {
        match self {
            Axis::Any(name) => name.to_string(),
            Axis::Named(name, n) => format!("{name} = {n}"),
            Axis::Is(n) => n.to_string(),
        }
    }
}

/// How a dataset's numbers are stored. Every kind is converted to float64
/// on read, so a file written by NumPy or h5py is read as it comes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stored {
    /// float32 or float64.
    Real,
    /// h5py's complex type: a compound of two floats named `r` and `i`
    /// (complex64 or complex128), one element for a trailing axis of 2.
    Complex,
}

/// The numbers a dataset holds, or why they are not numbers recon reads.
fn stored(ds: &hdf5::Dataset, path: &Path, name: &str) -> Result<Stored, IoError> {
    use hdf5::types::FloatSize;
    let dtype = ds
        .dtype()
        .and_then(|t| t.to_descriptor())
        .at(path, &format!("read the type of `{name}`"))?;
    let float =
        |t: &TypeDescriptor| matches!(t, TypeDescriptor::Float(FloatSize::U4 | FloatSize::U8));
    match &dtype {
        t if float(t) => Ok(Stored::Real),
        TypeDescriptor::Compound(c)
            if c.fields.len() == 2
                && c.fields[0].name == "r"
                && c.fields[1].name == "i"
                && float(&c.fields[0].ty)
                && c.fields[0].ty == c.fields[1].ty =>
        {
            Ok(Stored::Complex)
        }
        t => Err(bad(
            path,
            name,
            format!(
                "has type {t}, expected float32 or float64, or for complex values pairs [..., 2] \
                 or h5py's complex64/complex128 (a compound of two floats named r and i)"
            ),
        )),
    }
}

/// Checks a dataset's type and declared shape (nothing is read). Real
/// numbers are float32 or float64; where `shape` ends with a pair axis
/// `Is(2)` (complex values), h5py's complex types are accepted too, with
/// one element for each pair. The shape returned counts the pair axis
/// either way, as if the values were real pairs.
pub(crate) fn check_numbers(
    ds: &hdf5::Dataset,
    path: &Path,
    name: &str,
    shape: &[Axis],
) -> Result<Vec<usize>, IoError> {
    let kind = stored(ds, path, name)?;
    let pairs = matches!(shape.last(), Some(Axis::Is(2)));
    let mut got = ds.shape();
    if kind == Stored::Complex {
        if !pairs {
            return Err(bad(
                path,
                name,
                "holds complex numbers, expected real ones (float32 or float64)",
            ));
        }
        got.push(2);
    }
    if got.len() != shape.len() || !got.iter().zip(shape).all(|(g, a)| a.fits(*g)) {
        let want: Vec<String> = shape.iter().map(|a| a.show()).collect();
        let (got, want) = match kind {
            Stored::Complex => (
                format!("{:?} (complex)", &got[..got.len() - 1]),
                format!("[{}] (complex)", want[..want.len() - 1].join(", ")),
            ),
            Stored::Real => (format!("{got:?}"), format!("[{}]", want.join(", "))),
        };
        return Err(bad(path, name, format!("has shape {got}, expected {want}")));
    }
    Ok(got)
}

/// The bytes a dataset declares as stored (elements times their size; 4
/// per element when its type cannot be read, which the type check refuses).
pub(crate) fn stored_bytes(ds: &hdf5::Dataset) -> u64 {
    let size = ds.dtype().map_or(4, |t| t.size());
    (ds.size() * size) as u64
}

/// The rank a dataset has read as real numbers: one more than stored for
/// h5py's complex types (their pair axis). 0 when its type is unreadable.
pub(crate) fn real_rank(ds: &hdf5::Dataset) -> usize {
    let complex = matches!(
        ds.dtype().and_then(|t| t.to_descriptor()),
        Ok(TypeDescriptor::Compound(_))
    );
    ds.ndim() + usize::from(complex)
}

/// A dataset that must be present, opened and checked by [`check_numbers`].
pub(crate) fn open_numbers(
    file: &hdf5::File,
    path: &Path,
    name: &str,
    shape: &[Axis],
) -> Result<(hdf5::Dataset, Vec<usize>), IoError> {
    let ds = file
        .dataset(name)
        .map_err(|_| bad(path, name, "is missing"))?;
    let got = check_numbers(&ds, path, name, shape)?;
    Ok((ds, got))
}

/// Whether `group` (named `group_name` in messages) links `name`; an error
/// when its links cannot be read (a damaged group is not an absent one).
fn links(group: &hdf5::Group, path: &Path, group_name: &str, name: &str) -> Result<bool, IoError> {
    let names = group.member_names().map_err(|e| {
        bad(
            path,
            group_name,
            format!("is present but its members cannot be read: {e}"),
        )
    })?;
    Ok(names.iter().any(|n| n == name))
}

/// The optional dataset `group/name`: `None` when absent, an error when
/// the group or the dataset is present but cannot be read.
pub(crate) fn optional(
    file: &hdf5::File,
    path: &Path,
    group: &str,
    name: &str,
) -> Result<Option<hdf5::Dataset>, IoError> {
    if !links(file, path, "/", group)? {
        return Ok(None);
    }
    let group_name = format!("/{group}");
    let g = file.group(group).map_err(|e| {
        bad(
            path,
            &group_name,
            format!("is present but cannot be read: {e}"),
        )
    })?;
    if !links(&g, path, &group_name, name)? {
        return Ok(None);
    }
    let full = format!("{group}/{name}");
    g.dataset(name)
        .map(Some)
        .map_err(|e| bad(path, &full, format!("is present but cannot be read: {e}")))
}

/// Reads a dataset checked by [`check_numbers`] as float64 (complex
/// values as real pairs, `shape` as it returned), and checks its values
/// are finite.
pub(crate) fn read_checked(
    ds: &hdf5::Dataset,
    path: &Path,
    name: &str,
    shape: &[usize],
) -> Result<Vec<f64>, IoError> {
    let read = format!("read `{name}`");
    let v: Vec<f64> = match stored(ds, path, name)? {
        Stored::Real => ds.read_raw().at(path, &read)?,
        Stored::Complex => ds
            .read_raw::<recon_core::Complex<f64>>()
            .at(path, &read)?
            .into_iter()
            .flat_map(|c| [c.re, c.im])
            .collect(),
    };
    if let Some(i) = v.iter().position(|x| !x.is_finite()) {
        let row: usize = shape[1..].iter().product();
        return Err(bad(
            path,
            name,
            format!(
                "holds {} at index {} (row {}): values must be finite",
                v[i],
                i,
                i / row.max(1)
            ),
        ));
    }
    Ok(v)
}

/// Attribute `name` of `owner` (a group or dataset path, for messages): 3 numbers.
pub(crate) fn attr3<T: hdf5::H5Type + Copy>(
    loc: &hdf5::Location,
    path: &Path,
    owner: &str,
    name: &str,
) -> Result<[T; 3], IoError> {
    let what = format!("{owner} attribute {name}");
    let a = loc.attr(name).map_err(|_| bad(path, &what, "is missing"))?;
    let v: Vec<T> = a
        .read_raw()
        .map_err(|e| bad(path, &what, format!("cannot be read as 3 numbers: {e}")))?;
    match v[..] {
        [a, b, c] => Ok([a, b, c]),
        _ => Err(bad(
            path,
            &what,
            format!("has {} values, expected 3 (x, y, z)", v.len()),
        )),
    }
}

/// The `version` attribute of `/kspace`: `None` when absent, else 1 or 2;
/// anything else (another number, a string, several values) is an error.
pub(crate) fn version(ks: &hdf5::Group, path: &Path) -> Result<Option<u32>, IoError> {
    let what = "/kspace attribute version";
    let Ok(a) = ks.attr("version") else {
        return Ok(None);
    };
    let wrong = |got: String| {
        bad(
            path,
            what,
            format!("is {got}: recon reads scan files of version 1 and 2 (an integer)"),
        )
    };
    let integer = matches!(
        a.dtype().and_then(|t| t.to_descriptor()),
        Ok(TypeDescriptor::Integer(_) | TypeDescriptor::Unsigned(_))
    );
    if !integer {
        let t = a
            .dtype()
            .and_then(|t| t.to_descriptor())
            .map_or("unreadable".to_string(), |t| format!("of type {t}"));
        return Err(wrong(t));
    }
    let v: Vec<i64> = a
        .read_raw()
        .map_err(|e| bad(path, what, format!("cannot be read: {e}")))?;
    match v[..] {
        [v @ (1 | 2)] => Ok(Some(v as u32)),
        [v] => Err(wrong(v.to_string())),
        _ => Err(wrong(format!("{} values", v.len()))),
    }
}

/// The memory reading a file takes, checked against every limit that
/// applies before anything large is read.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Need {
    /// This process's peak while it reads (the decoded scan and the largest
    /// dataset as stored, converted while both are held).
    pub own: u64,
    /// The decoded scan, which a receiving process holds too.
    pub decoded: u64,
}

/// Refuses to read what `need` counts when a limit cannot hold it: this
/// process's own limits, and with `handed_to` (a process that decodes its
/// own copy while this one still holds its), that process's limits and
/// both peaks together against the machine's and the cgroups' memory. The
/// message names the binding limit.
pub(crate) fn check_fits(
    path: &Path,
    what: &str,
    need: Need,
    handed_to: Option<u32>,
) -> Result<(), IoError> {
    use recon_core::memory::{gib, machine_limits, process_limits, smallest};
    let (reader, both) = match handed_to {
        Some(_) => (
            "in the reader process".to_string(),
            format!(
                "together ({:.2} GiB in the reader process and {:.2} GiB in recon, which receives \
                 the scan)",
                gib(need.own),
                gib(need.decoded)
            ),
        ),
        None => (String::new(), String::new()),
    };
    let mut checks = vec![
        (
            need.own
                .saturating_add(handed_to.map_or(0, |_| need.decoded)),
            machine_limits(),
            both,
        ),
        (need.own, process_limits("self"), reader),
    ];
    if let Some(pid) = handed_to {
        checks.push((
            need.decoded,
            process_limits(&pid.to_string()),
            "in recon, which receives the scan".to_string(),
        ));
    }
    for (bytes, limits, whose) in checks {
        if let Some(limit) = smallest(limits).filter(|l| bytes > l.bytes) {
            return Err(bad(
                path,
                what,
                format!(
                    "would need {:.2} GiB of memory to read {whose}, but {:.2} GiB is available \
                     under {}",
                    gib(bytes),
                    gib(limit.bytes),
                    limit.what
                ),
            ));
        }
    }
    Ok(())
}

/// A reconstruction matrix from a file, held to the config's limits
/// ([`recon_core::matrix_problem`]).
pub(crate) fn check_matrix(path: &Path, what: &str, n: [i64; 3]) -> Result<[usize; 3], IoError> {
    // Negative or huge sizes become 0, which breaks the rule too.
    let sizes = n.map(|v| usize::try_from(v).unwrap_or(0));
    if let Some(rule) = recon_core::matrix_problem(sizes) {
        return Err(bad(path, what, format!("is {n:?}: {rule}")));
    }
    Ok(n.map(|v| v as usize))
}
