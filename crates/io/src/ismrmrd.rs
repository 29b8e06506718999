//! Non-Cartesian ISMRMRD raw data (HDF5, `/dataset`), one coil or many.
//!
//! Conventions honoured (see the README): the XML header's first
//! `encoding/encodedSpace` gives the matrix and the field of view; each
//! acquisition in `/dataset/data` holds `number_of_samples` complex samples
//! of each of its `active_channels` (channel after channel, in the file's
//! order, the same count in every imaging acquisition) and a trajectory of
//! `trajectory_dimensions = 3` values per sample; `discard_pre` and
//! `discard_post` samples are dropped; noise measurement acquisitions give
//! the coils' noise samples (for prewhitening); acquisitions flagged as
//! navigation, phase correction, HP or RT feedback, dummy scan or
//! surface-coil correction scan are skipped. A 2-D matrix (z = 1) also takes
//! `trajectory_dimensions = 2` (k_z = 0). Averages (`idx.average`) are
//! combined; slices, contrasts, phases, repetitions and sets (`idx`) are
//! separate images ([`Part`]s of the scan, in the order of their
//! [`Index`]), which must cover every combination of the counters used and
//! hold the same number of samples each. Each image's geometry comes from
//! its acquisitions' `position`, `read_dir`, `phase_dir` and `slice_dir`
//! (LPS; all directions zero: none given), the same in every acquisition
//! of the image. Acquisitions that refer to another `<encoding>` than the
//! first are refused.
//! Trajectory units are not fixed by ISMRMRD: `Units::Normalized` (the
//! default, as Gadgetron's non-Cartesian gadgets use) is cycles per pixel
//! in [-0.5, 0.5], multiplied by the matrix size to give cycles/FOV;
//! `Units::CyclesPerFov` takes them as they are.

mod images;

use crate::geometry::{Geometry, Index, Part};
use crate::hdf5::{self, types::VarLenArray, types::VarLenAscii, types::VarLenUnicode, H5Type};
use crate::scan::{CoilNoise, ReadOptions, Scan};
use crate::{beyond_nyquist, layout as bad, Context, IoError};
use images::{check_images, Gathered, Image};
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
    encoding_space_ref: u16,
    position: [f32; 3],
    read_dir: [f32; 3],
    phase_dir: [f32; 3],
    slice_dir: [f32; 3],
    idx: Counters,
}

impl Head {
    /// The acquisition's geometry; `Ok(None)` when its directions are all
    /// zero (a converter that does not fill them), an error when they are
    /// not orthonormal.
    fn geometry(&self) -> Result<Option<Geometry>, String> {
        let f = |v: [f32; 3]| v.map(f64::from);
        let g = Geometry {
            position_mm: f(self.position),
            read_dir: f(self.read_dir),
            phase_dir: f(self.phase_dir),
            slice_dir: f(self.slice_dir),
        };
        if g.directions()
            .iter()
            .all(|(_, d)| d.iter().all(|v| *v == 0.0))
        {
            return Ok(None);
        }
        g.check().map(|()| Some(g))
    }
}

/// The counters of `idx` that say which image an acquisition belongs to
/// (ISMRMRD's `EncodingCounters`, by field name).
#[derive(H5Type, Clone, Debug)]
#[repr(C)]
struct Counters {
    average: u16,
    slice: u16,
    contrast: u16,
    phase: u16,
    repetition: u16,
    set: u16,
}

impl Counters {
    /// The image the acquisition belongs to (averages are combined).
    fn index(&self) -> Index {
        Index([
            self.slice,
            self.contrast,
            self.phase,
            self.repetition,
            self.set,
        ])
    }
}

#[derive(H5Type, Clone, Debug)]
#[repr(C)]
struct Acquisition {
    head: Head,
    traj: VarLenArray<f32>,
    data: VarLenArray<f32>,
}

/// ISMRMRD flag bits (1-based, as in ismrmrd.h) of acquisitions that carry
/// no imaging data and are skipped: navigation, phase correction, HP
/// feedback, dummy scan, RT feedback, surface-coil correction scan. (Noise
/// measurements, bit 19, are read as the coils' noise.)
const SKIPPED_FLAGS: [u32; 6] = [23, 24, 26, 27, 28, 29];

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

/// ISMRMRD's ACQ_IS_NOISE_MEASUREMENT flag bit (1-based).
const NOISE_FLAG: u32 = 19;

/// Checks one acquisition and appends its samples: noise measurements to
/// the noise, imaging samples (trajectory in cycles/FOV) to the data; the
/// other non-imaging kinds are skipped.
fn add_acquisition(
    path: &Path,
    i: usize,
    a: &Acquisition,
    units: Units,
    n: [usize; 3],
    allow_beyond_nyquist: bool,
    g: &mut Gathered,
) -> Result<(), IoError> {
    let h = &a.head;
    let flag = |b: u32| h.flags & (1u64 << (b - 1)) != 0;
    let is_noise = flag(NOISE_FLAG);
    if !is_noise && SKIPPED_FLAGS.iter().any(|&b| flag(b)) {
        return Ok(());
    }
    let name = format!("dataset/data[{i}]");
    let channels = h.active_channels as usize;
    if !(1..=crate::scan::MAX_COILS).contains(&channels) {
        return Err(bad(
            path,
            &name,
            format!(
                "has {channels} active channels: there must be 1 to {}",
                crate::scan::MAX_COILS
            ),
        ));
    }
    let ns = h.number_of_samples as usize;
    // Data are [channels][samples] complex.
    if a.data.len() != 2 * channels * ns {
        return Err(bad(
            path,
            &name,
            format!(
                "holds {} data values for {channels} channels of {ns} samples (expected {})",
                a.data.len(),
                2 * channels * ns
            ),
        ));
    }
    let (pre, post) = (h.discard_pre as usize, h.discard_post as usize);
    let kept = pre..ns.saturating_sub(post);
    let sample = |c: usize, s: usize| -> Result<Complex<f64>, IoError> {
        let j = 2 * (c * ns + s);
        let v = [a.data.as_slice()[j], a.data.as_slice()[j + 1]];
        if !(v[0].is_finite() && v[1].is_finite()) {
            return Err(bad(
                path,
                &name,
                format!("channel {c}, sample {s} holds a NaN or infinite value"),
            ));
        }
        Ok(Complex::new(v[0] as f64, v[1] as f64))
    };
    // Every acquisition of a kind has the channels of the first.
    let first = if is_noise {
        (!g.noise.is_empty()).then_some(g.noise.len())
    } else {
        g.channels
    };
    match first {
        Some(c) if c != channels => {
            return Err(bad(
                path,
                &name,
                format!(
                    "has {channels} channels but the first {} acquisition has {c}",
                    if is_noise { "noise" } else { "imaging" },
                ),
            ));
        }
        _ if is_noise => g.noise.resize(channels, Vec::new()),
        _ => g.channels = Some(channels),
    }
    if is_noise {
        for c in 0..channels {
            for s in kept.clone() {
                let v = sample(c, s)?;
                g.noise[c].push(v);
            }
        }
        return Ok(());
    }
    if h.encoding_space_ref != 0 {
        return Err(bad(
            path,
            &name,
            format!(
                "has encoding_space_ref = {}: recon reconstructs the header's first <encoding> only",
                h.encoding_space_ref
            ),
        ));
    }
    // kx, ky, kz; or kx, ky on a 2-D matrix (z = 1), at k_z = 0.
    let dims = h.trajectory_dimensions as usize;
    if !(dims == 3 || (dims == 2 && n[2] == 1)) {
        return Err(bad(
            path,
            &name,
            format!(
                "has trajectory_dimensions = {dims}, expected 3 (kx, ky, kz){}",
                if n[2] == 1 {
                    " or 2 (kx, ky)"
                } else {
                    ", or 2 on a 2-D matrix (z = 1)"
                }
            ),
        ));
    }
    if a.traj.len() != dims * ns {
        return Err(bad(
            path,
            &name,
            format!(
                "holds {} trajectory values for {ns} samples (expected {})",
                a.traj.len(),
                dims * ns
            ),
        ));
    }
    let geometry = h.geometry().map_err(|why| {
        bad(
            path,
            &name,
            format!("position, read_dir, phase_dir, slice_dir: {why}"),
        )
    })?;
    let index = h.idx.index();
    let image = g.images.entry(index).or_insert_with(|| Image {
        data: vec![Vec::new(); channels],
        geometry,
        first: i,
        ..Default::default()
    });
    let same = match (&image.geometry, &geometry) {
        (Some(a), Some(b)) => a.same(b),
        (None, None) => true,
        _ => false,
    };
    if !same {
        return Err(bad(
            path,
            &name,
            format!(
                "lies elsewhere than dataset/data[{}] of the same image ({}): its position or directions differ, and recon reconstructs an image in one geometry",
                image.first,
                index.describe()
            ),
        ));
    }
    for s in kept {
        let at = |d: usize| {
            if d < dims {
                a.traj.as_slice()[dims * s + d] as f64
            } else {
                0.0
            }
        };
        let k = [0, 1, 2].map(at);
        if k.iter().any(|x| !x.is_finite()) {
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
        image.traj.push(k);
        for c in 0..channels {
            let v = sample(c, s)?;
            image.data[c].push(v);
        }
    }
    Ok(())
}

/// Reads a non-Cartesian ISMRMRD file into a [`Scan`] (its noise
/// measurements as noise samples; no maps, truth or anatomy). Samples beyond Nyquist are an error unless allowed.
pub fn read_ismrmrd(
    path: &Path,
    units: Units,
    allow_beyond_nyquist: bool,
) -> Result<Scan, IoError> {
    let opts = ReadOptions {
        allow_beyond_nyquist,
        ..Default::default()
    };
    read_ismrmrd_with(path, units, &opts)
}

/// [`read_ismrmrd`] with all its options. Its acquisitions have no
/// declared size: the file's own is told to `opts.on_declared` once the
/// header is read.
pub fn read_ismrmrd_with(path: &Path, units: Units, opts: &ReadOptions) -> Result<Scan, IoError> {
    let allow_beyond_nyquist = opts.allow_beyond_nyquist;
    let file = crate::open_hdf5(path)?;
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
    // The acquisitions are the data: their size is the file's.
    opts.declared(std::fs::metadata(path).map_or(0, |m| m.len()));
    // Acquisitions are read in blocks, so that memory grows only with
    // what the file really holds, whatever it declares.
    let count = ds.size();
    const BLOCK: usize = 1024;
    let mut g = Gathered::default();
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
            add_acquisition(path, start + j, a, units, n, allow_beyond_nyquist, &mut g)?;
        }
        if g.samples() > recon_core::MAX_SAMPLES {
            return Err(bad(
                path,
                "dataset/data",
                format!("holds more than {} samples", recon_core::MAX_SAMPLES),
            ));
        }
        crate::scan::check_fits(path, "dataset/data", g.need(), opts.handed_to)?;
    }
    if g.images.is_empty() {
        return Err(bad(path, "dataset/data", "holds no imaging samples"));
    }
    check_images(path, &g.images)?;
    for (index, image) in &g.images {
        let what = if g.images.len() == 1 {
            "dataset/data (its trajectories)".to_string()
        } else {
            format!("dataset/data ({}'s trajectory)", index.describe())
        };
        crate::check_spread(path, &what, &image.traj)?;
    }
    let coils = g.channels.expect("imaging acquisitions");
    let noise = if g.noise.is_empty() {
        None
    } else if g.noise.len() != coils {
        return Err(bad(
            path,
            "dataset/data",
            format!(
                "its noise acquisitions have {} channels but its imaging acquisitions {coils}",
                g.noise.len()
            ),
        ));
    } else if g
        .noise
        .iter()
        .any(|v| v.len() != g.noise[0].len() || v.is_empty())
    {
        return Err(bad(
            path,
            "dataset/data",
            "its noise acquisitions hold no samples",
        ));
    } else {
        Some(CoilNoise::Samples(g.noise.concat()))
    };
    // One trajectory, the images' in turn; each coil's samples likewise.
    let mut parts = Vec::with_capacity(g.images.len());
    let mut traj = Vec::with_capacity(g.samples());
    for (index, image) in &mut g.images {
        let start = traj.len();
        traj.append(&mut image.traj);
        parts.push(Part {
            index: *index,
            samples: start..traj.len(),
            geometry: image.geometry,
        });
    }
    let mut data = Vec::with_capacity(coils * traj.len());
    for c in 0..coils {
        for image in g.images.values_mut() {
            data.append(&mut image.data[c]);
        }
    }
    let geometry = match parts.len() {
        1 => parts.pop().expect("one part").geometry,
        _ => None,
    };
    Ok(Scan {
        grid,
        traj,
        coils,
        data,
        noise,
        maps: None,
        truth: None,
        anatomy: None,
        geometry,
        parts,
    })
}
