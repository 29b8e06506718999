//! Opening a scan file's parts checked, before anything large is read:
//! float32 datasets of a declared shape (each axis named in messages),
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

/// Checks a float32 dataset's type and declared shape (nothing is read).
pub(crate) fn check_f32(
    ds: &hdf5::Dataset,
    path: &Path,
    name: &str,
    shape: &[Axis],
) -> Result<Vec<usize>, IoError> {
    let dtype = ds
        .dtype()
        .and_then(|t| t.to_descriptor())
        .at(path, &format!("read the type of `{name}`"))?;
    if dtype != TypeDescriptor::Float(hdf5::types::FloatSize::U4) {
        return Err(bad(
            path,
            name,
            format!("has type {dtype}, expected float32"),
        ));
    }
    let got = ds.shape();
    if got.len() != shape.len() || !got.iter().zip(shape).all(|(g, a)| a.fits(*g)) {
        let want: Vec<String> = shape.iter().map(|a| a.show()).collect();
        return Err(bad(
            path,
            name,
            format!("has shape {got:?}, expected [{}]", want.join(", ")),
        ));
    }
    Ok(got)
}

/// A float32 dataset that must be present, opened and checked by [`check_f32`].
pub(crate) fn open_f32(
    file: &hdf5::File,
    path: &Path,
    name: &str,
    shape: &[Axis],
) -> Result<(hdf5::Dataset, Vec<usize>), IoError> {
    let ds = file
        .dataset(name)
        .map_err(|_| bad(path, name, "is missing"))?;
    let got = check_f32(&ds, path, name, shape)?;
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

/// Reads a dataset checked by [`check_f32`], and checks its values are finite.
pub(crate) fn read_checked(
    ds: &hdf5::Dataset,
    path: &Path,
    name: &str,
    shape: &[usize],
) -> Result<Vec<f32>, IoError> {
    let v: Vec<f32> = ds.read_raw().at(path, &format!("read `{name}`"))?;
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
