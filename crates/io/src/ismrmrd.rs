//! Single-coil, non-Cartesian ISMRMRD raw data (HDF5, `/dataset`).
//!
//! Conventions honoured (see the README): the XML header's first
//! `encoding/encodedSpace` gives the matrix and the field of view; each
//! acquisition in `/dataset/data` holds `number_of_samples` complex samples
//! of one channel and a trajectory of `trajectory_dimensions = 3` values per
//! sample; `discard_pre`/`discard_post` samples are dropped; acquisitions
//! flagged as noise measurement, navigation, phase correction, HP or RT
//! feedback, dummy scan or surface-coil correction scan are skipped.
//! Trajectory units are not fixed by ISMRMRD: `Units::Normalized` (the
//! default, as Gadgetron's non-Cartesian gadgets use) is cycles per pixel
//! in [-0.5, 0.5], multiplied by the matrix size to give cycles/FOV;
//! `Units::CyclesPerFov` takes them as they are.

use crate::hdf5::{self, types::VarLenArray, types::VarLenAscii, types::VarLenUnicode, H5Type};
use crate::scan::Scan;
use crate::{beyond_nyquist, layout as bad, Context, IoError};
use recon_core::{Complex, Grid};
use std::path::Path;

/// How the file's trajectory is scaled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Units {
    /// Cycles per pixel, [-0.5, 0.5].
    Normalized,
    /// Cycles per field of view.
    CyclesPerFov,
}

/// The fields of the acquisition header that are used; HDF5 converts the
/// file's full compound to this subset by field name.
#[derive(H5Type, Clone, Debug)]
#[repr(C)]
struct Head {
    flags: u64,
    number_of_samples: u16,
    active_channels: u16,
    discard_pre: u16,
    discard_post: u16,
    trajectory_dimensions: u16,
}

#[derive(H5Type, Clone, Debug)]
#[repr(C)]
struct Acquisition {
    head: Head,
    traj: VarLenArray<f32>,
    data: VarLenArray<f32>,
}

/// ISMRMRD flag bits (1-based, as in ismrmrd.h) of acquisitions that carry
/// no imaging data: noise measurement, navigation, phase correction, HP
/// feedback, dummy scan, RT feedback, surface-coil correction scan.
const SKIPPED_FLAGS: [u32; 7] = [19, 23, 24, 26, 27, 28, 29];

/// Whether a file looks like ISMRMRD (has `/dataset/data`).
pub fn is_ismrmrd(path: &Path) -> bool {
    hdf5::File::open(path)
        .map(|f| {
            f.link_exists("dataset") && f.group("dataset").is_ok_and(|g| g.link_exists("data"))
        })
        .unwrap_or(false)
}

fn xml_number(
    doc: &roxmltree::Document,
    path: &Path,
    space: &str,
    what: &str,
    axis: &str,
) -> Result<f64, IoError> {
    let node = doc
        .descendants()
        .find(|n| n.has_tag_name("encoding"))
        .and_then(|e| e.children().find(|n| n.has_tag_name(space)))
        .and_then(|s| s.children().find(|n| n.has_tag_name(what)))
        .and_then(|m| m.children().find(|n| n.has_tag_name(axis)));
    let text = node.and_then(|n| n.text()).ok_or_else(|| {
        bad(
            path,
            "dataset/xml",
            format!("has no encoding/{space}/{what}/{axis}"),
        )
    })?;
    text.trim().parse().map_err(|_| {
        bad(
            path,
            "dataset/xml",
            format!("encoding/{space}/{what}/{axis} is {text:?}, not a number"),
        )
    })
}

/// Checks one acquisition and appends its imaging samples (in cycles/FOV).
#[allow(clippy::too_many_arguments)]
fn add_acquisition(
    path: &Path,
    i: usize,
    a: &Acquisition,
    units: Units,
    n: [usize; 3],
    allow_beyond_nyquist: bool,
    traj: &mut Vec<[f64; 3]>,
    data: &mut Vec<Complex<f64>>,
) -> Result<(), IoError> {
    let h = &a.head;
    if SKIPPED_FLAGS
        .iter()
        .any(|b| h.flags & (1u64 << (b - 1)) != 0)
    {
        return Ok(());
    }
    let name = format!("dataset/data[{i}]");
    if h.active_channels != 1 {
        return Err(bad(
            path,
            &name,
            format!(
                "has {} channels: only single-coil data are supported",
                h.active_channels
            ),
        ));
    }
    if h.trajectory_dimensions != 3 {
        return Err(bad(
            path,
            &name,
            format!(
                "has trajectory_dimensions = {}, expected 3 (kx, ky, kz)",
                h.trajectory_dimensions
            ),
        ));
    }
    let ns = h.number_of_samples as usize;
    if a.traj.len() != 3 * ns || a.data.len() != 2 * ns {
        return Err(bad(
            path,
            &name,
            format!(
                "holds {} trajectory and {} data values for {ns} samples (expected {} and {})",
                a.traj.len(),
                a.data.len(),
                3 * ns,
                2 * ns
            ),
        ));
    }
    let (pre, post) = (h.discard_pre as usize, h.discard_post as usize);
    for s in pre..ns.saturating_sub(post) {
        let k = [0, 1, 2].map(|d| a.traj.as_slice()[3 * s + d] as f64);
        let v = [a.data.as_slice()[2 * s], a.data.as_slice()[2 * s + 1]];
        if k.iter()
            .chain(&[v[0] as f64, v[1] as f64])
            .any(|x| !x.is_finite())
        {
            return Err(bad(
                path,
                &name,
                format!("sample {s} holds a NaN or infinite value"),
            ));
        }
        let k = match units {
            Units::Normalized => [0, 1, 2].map(|d| k[d] * n[d] as f64),
            Units::CyclesPerFov => k,
        };
        if !allow_beyond_nyquist {
            if let Some(d) = beyond_nyquist(k, n) {
                return Err(bad(
                    path,
                    &name,
                    format!(
                        "sample {s}: k{} = {} cycles/FOV is beyond Nyquist ({}); check scan.trajectory_units, or opt in with scan.allow_beyond_nyquist",
                        ["x", "y", "z"][d], k[d], n[d] as f64 / 2.0
                    ),
                ));
            }
        }
        traj.push(k);
        data.push(Complex::new(v[0] as f64, v[1] as f64));
    }
    Ok(())
}

/// Reads a single-coil non-Cartesian ISMRMRD file into a [`Scan`] (no
/// truth, no anatomy). Samples beyond Nyquist are an error unless allowed.
pub fn read_ismrmrd(
    path: &Path,
    units: Units,
    allow_beyond_nyquist: bool,
) -> Result<Scan, IoError> {
    let file = hdf5::File::open(path).at(path, "open")?;
    let xml_ds = file
        .dataset("dataset/xml")
        .map_err(|_| bad(path, "dataset/xml", "is missing"))?;
    // The reference implementation writes ASCII; accept UTF-8 too.
    let xml: Vec<String> = match xml_ds.read_raw::<VarLenAscii>() {
        Ok(v) => v.iter().map(|s| s.as_str().to_string()).collect(),
        Err(_) => xml_ds
            .read_raw::<VarLenUnicode>()
            .at(path, "read dataset/xml")?
            .iter()
            .map(|s| s.as_str().to_string())
            .collect(),
    };
    let xml = xml
        .first()
        .ok_or_else(|| bad(path, "dataset/xml", "is empty"))?;
    // roxmltree 0.21.2 panics on some malformed non-ASCII input (slicing
    // inside a character; found by the fuzz tests): a panic there is an
    // invalid header too.
    let parsed = std::panic::catch_unwind(|| roxmltree::Document::parse(xml));
    let doc = match parsed {
        Ok(Ok(doc)) => doc,
        Ok(Err(e)) => {
            return Err(bad(path, "dataset/xml", format!("is not valid XML: {e}")));
        }
        Err(_) => {
            return Err(bad(
                path,
                "dataset/xml",
                "is not valid XML (the XML parser failed on it)",
            ));
        }
    };
    let mut matrix = [0i64; 3];
    let mut fov = [0f64; 3];
    for (d, axis) in ["x", "y", "z"].iter().enumerate() {
        let v = xml_number(&doc, path, "encodedSpace", "matrixSize", axis)?;
        // Out-of-range and fractional sizes are refused below.
        matrix[d] = if v.fract() == 0.0 && v.abs() < 1e15 {
            v as i64
        } else {
            -1
        };
        fov[d] = xml_number(&doc, path, "encodedSpace", "fieldOfView_mm", axis)?;
    }
    let n = crate::scan::check_matrix(path, "dataset/xml encodedSpace/matrixSize", matrix)?;
    let grid =
        Grid::new(n, fov).map_err(|e| bad(path, "dataset/xml encodedSpace", e.to_string()))?;

    let ds = file
        .dataset("dataset/data")
        .map_err(|_| bad(path, "dataset/data", "is missing"))?;
    // Acquisitions are read in blocks, so that memory grows only with
    // what the file really holds, whatever it declares.
    let count = ds.size();
    const BLOCK: usize = 1024;
    let mut traj = Vec::new();
    let mut data = Vec::new();
    for start in (0..count).step_by(BLOCK) {
        let end = (start + BLOCK).min(count);
        let acqs = ds
            .as_reader()
            .conversion(hdf5::Conversion::Soft)
            .read_slice_1d::<Acquisition, _>(start..end)
            .map_err(|e| {
                bad(
                    path,
                    "dataset/data",
                    format!("is not ISMRMRD acquisitions: {e}"),
                )
            })?;
        for (j, a) in acqs.iter().enumerate() {
            add_acquisition(
                path,
                start + j,
                a,
                units,
                n,
                allow_beyond_nyquist,
                &mut traj,
                &mut data,
            )?;
        }
        if traj.len() > recon_core::MAX_SAMPLES {
            return Err(bad(
                path,
                "dataset/data",
                format!("holds more than {} samples", recon_core::MAX_SAMPLES),
            ));
        }
        crate::scan::check_fits(path, "dataset/data", 2 * 40 * traj.len() as u64)?;
    }
    if traj.is_empty() {
        return Err(bad(path, "dataset/data", "holds no imaging samples"));
    }
    Ok(Scan {
        grid,
        traj,
        coils: 1,
        data,
        noise: None,
        maps: None,
        truth: None,
        anatomy: None,
    })
}
