//! A seeded mutation fuzzer for the HDF5 formats recon reads: scan files
//! here, ISMRMRD files in fuzz_ismrmrd.rs. A few hundred mutants each (byte flips, truncation,
//! zeroed, random and copied ranges, and format-aware changes of shapes,
//! attributes, counts and values), each read through `recon inspect`,
//! asserting no panic, no abort, no signal and no run past a time limit:
//! every file is either accepted or refused with an error. fuzz_text.rs
//! does the same for the text and binary formats; `fuzz/` holds cargo-fuzz
//! targets for longer runs (see docs/development.md).
//!
//! `recon inspect` reads the file in a child process: the HDF5 library
//! itself may crash or hang on a damaged file (recon then reports an
//! error), and this harness checks that recon never does.

use crate::common;

use common::{inspect, mutate_bytes, run_hdf5_cases, Outcome, Rng, HDF5_CASES};
use recon_core::{Grid, Volume};
use std::path::{Path, PathBuf};

/// A small valid scan file with truth and anatomy.
fn base_scan(dir: &Path) -> PathBuf {
    let grid = Grid::new([8, 8, 8], [200.0; 3]).unwrap();
    let mut rng = Rng::new(11);
    let traj = common::random_traj(&grid, 200, &mut rng);
    let ag = Grid::new([4, 6, 8], [220.0, 210.0, 200.0]).unwrap();
    let scan = recon_io::scan::Scan {
        grid,
        coils: 1,
        data: rng.complex(200),
        noise: None,
        maps: None,
        traj,
        truth: Some((0..grid.len()).map(|i| i as f64).collect()),
        anatomy: Some(Volume::new(ag, (0..ag.len()).map(|i| i as f64).collect()).unwrap()),
        // An oblique, off-centre geometry, for the mutants to damage.
        geometry: Some(recon_io::geometry::Geometry {
            position_mm: [10.0, -20.0, 30.0],
            read_dir: [0.6, 0.8, 0.0],
            phase_dir: [-0.8, 0.6, 0.0],
            slice_dir: [0.0, 0.0, 1.0],
        }),
        parts: Vec::new(),
    };
    let path = dir.join("base.h5");
    recon_io::scan::write_scan(&path, &scan).unwrap();
    // The base itself is accepted.
    assert_eq!(
        recon_io::scan::read_scan(&path, false).unwrap().traj.len(),
        200
    );
    path
}

/// Format-aware changes of a scan file: shapes, types, attributes, values.
fn structured_scan_mutants(dir: &Path, base: &Path) -> Vec<(PathBuf, String)> {
    use recon_io::hdf5;
    type Edit = Box<dyn Fn(&hdf5::File)>;
    let set_attr = |group: &'static str, name: &'static str, v: Vec<f64>| -> Edit {
        Box::new(move |f: &hdf5::File| {
            let g = f.group(group).unwrap();
            g.delete_attr(name).unwrap();
            g.new_attr::<f64>()
                .shape([v.len()])
                .create(name)
                .unwrap()
                .write_raw(&v)
                .unwrap();
        })
    };
    let set_imatrix = |v: Vec<i64>| -> Edit {
        Box::new(move |f: &hdf5::File| {
            let g = f.group("kspace").unwrap();
            g.delete_attr("matrix").unwrap();
            g.new_attr::<i64>()
                .shape([v.len()])
                .create("matrix")
                .unwrap()
                .write_raw(&v)
                .unwrap();
        })
    };
    let set_version = |v: Vec<i64>| -> Edit {
        Box::new(move |f: &hdf5::File| {
            let g = f.group("kspace").unwrap();
            let _ = g.delete_attr("version");
            g.new_attr::<i64>()
                .shape([v.len()])
                .create("version")
                .unwrap()
                .write_raw(&v)
                .unwrap();
        })
    };
    let edits: Vec<(&str, Edit)> = vec![
        ("version 99", set_version(vec![99])),
        ("version 2 of [M, 2] data", set_version(vec![2])),
        ("version two values", set_version(vec![1, 2])),
        ("version as float", set_attr("kspace", "version", vec![1.5])),
        (
            "version as text",
            Box::new(|f: &hdf5::File| {
                let g = f.group("kspace").unwrap();
                let _ = g.delete_attr("version");
                common::text_attr(&g, "version", "two");
            }),
        ),
        (
            "trajectory all at one point",
            replace("kspace/trajectory", vec![200, 3], 0.0),
        ),
        (
            "data times 1e30",
            replace("kspace/data", vec![200, 2], 1e30),
        ),
        (
            "read_dir not of unit length",
            set_attr("kspace", "read_dir", vec![0.6, 0.9, 0.0]),
        ),
        (
            "phase_dir along read_dir",
            set_attr("kspace", "phase_dir", vec![0.6, 0.8, 0.0]),
        ),
        (
            "position NaN",
            set_attr("kspace", "position_mm", vec![f64::NAN, 0.0, 0.0]),
        ),
        (
            "slice_dir of two values",
            set_attr("kspace", "slice_dir", vec![0.0, 1.0]),
        ),
        (
            "slice_dir infinite",
            set_attr("kspace", "slice_dir", vec![0.0, 0.0, f64::INFINITY]),
        ),
        (
            "geometry without position",
            Box::new(|f: &hdf5::File| {
                f.group("kspace")
                    .unwrap()
                    .delete_attr("position_mm")
                    .unwrap()
            }),
        ),
        ("matrix odd", set_imatrix(vec![7, 8, 8])),
        ("matrix negative", set_imatrix(vec![-8, 8, 8])),
        ("matrix huge", set_imatrix(vec![1 << 40, 1 << 40, 1 << 40])),
        ("matrix two values", set_imatrix(vec![8, 8])),
        (
            "matrix as floats",
            set_attr("kspace", "matrix", vec![8.5, 8.0, 8.0]),
        ),
        (
            "fov NaN",
            set_attr("kspace", "fov_mm", vec![f64::NAN, 200.0, 200.0]),
        ),
        (
            "fov negative",
            set_attr("kspace", "fov_mm", vec![-200.0, 200.0, 200.0]),
        ),
        ("fov zero", set_attr("kspace", "fov_mm", vec![0.0; 3])),
        (
            "fov four values",
            set_attr("kspace", "fov_mm", vec![200.0; 4]),
        ),
        (
            "trajectory 4 columns",
            replace("kspace/trajectory", vec![200, 4], 0.1),
        ),
        (
            "trajectory 1-D",
            replace("kspace/trajectory", vec![600], 0.1),
        ),
        (
            "trajectory empty",
            replace("kspace/trajectory", vec![0, 3], 0.1),
        ),
        (
            "trajectory shorter",
            replace("kspace/trajectory", vec![199, 3], 0.1),
        ),
        (
            "trajectory beyond Nyquist",
            replace("kspace/trajectory", vec![200, 3], 9.0),
        ),
        (
            "trajectory NaN",
            replace("kspace/trajectory", vec![200, 3], f32::NAN),
        ),
        (
            "data infinite",
            replace("kspace/data", vec![200, 2], f32::INFINITY),
        ),
        ("data 3 columns", replace("kspace/data", vec![200, 3], 1.0)),
        (
            "truth wrong shape",
            replace("reference/truth", vec![8, 8, 6], 1.0),
        ),
        (
            "truth NaN",
            replace("reference/truth", vec![8, 8, 8], f32::NAN),
        ),
        (
            "anatomy odd",
            replace("reference/anatomy", vec![3, 6, 8], 1.0),
        ),
        ("anatomy 2-D", replace("reference/anatomy", vec![8, 8], 1.0)),
        (
            "anatomy huge",
            replace("reference/anatomy", vec![2, 2, 4096], 1.0),
        ),
        (
            "data as float64",
            Box::new(|f: &hdf5::File| {
                f.unlink("kspace/data").unwrap();
                f.new_dataset::<f64>()
                    .shape([200, 2])
                    .create("kspace/data")
                    .unwrap()
                    .write_raw(&[1.0f64; 400])
                    .unwrap();
            }),
        ),
        // h5py's complex types, converted on read where pairs go.
        (
            "data complex64",
            replace_complex("kspace/data", vec![200], 1.0),
        ),
        (
            "data complex NaN",
            replace_complex("kspace/data", vec![200], f32::NAN),
        ),
        (
            "data complex as pairs",
            replace_complex("kspace/data", vec![200, 2], 1.0),
        ),
        (
            "trajectory complex",
            replace_complex("kspace/trajectory", vec![200, 3], 0.5),
        ),
        (
            "truth complex",
            replace_complex("reference/truth", vec![8, 8, 8], 1.0),
        ),
        (
            "data complex declared 2^36",
            Box::new(|f: &hdf5::File| {
                f.unlink("kspace/data").unwrap();
                f.new_dataset::<recon_core::Complex<f32>>()
                    .chunk([1024])
                    .shape([1usize << 36])
                    .create("kspace/data")
                    .unwrap();
            }),
        ),
        (
            "no data",
            Box::new(|f: &hdf5::File| f.unlink("kspace/data").unwrap()),
        ),
        (
            "no kspace",
            Box::new(|f: &hdf5::File| f.unlink("kspace").unwrap()),
        ),
        (
            "trajectory declared 2^36 rows",
            Box::new(|f: &hdf5::File| {
                f.unlink("kspace/trajectory").unwrap();
                f.new_dataset::<f32>()
                    .chunk([1024, 3])
                    .shape([1usize << 36, 3])
                    .create("kspace/trajectory")
                    .unwrap();
            }),
        ),
        (
            "both declared 2^36 rows",
            Box::new(|f: &hdf5::File| {
                for (name, w) in [("kspace/trajectory", 3), ("kspace/data", 2)] {
                    f.unlink(name).unwrap();
                    f.new_dataset::<f32>()
                        .chunk([1024, w])
                        .shape([1usize << 36, w])
                        .create(name)
                        .unwrap();
                }
            }),
        ),
    ];
    apply_edits(dir, base, "structured", edits)
}

/// An edit that replaces dataset `name` (if present) by float32 `value`s
/// of `shape`.
fn replace(
    name: &'static str,
    shape: Vec<usize>,
    value: f32,
) -> Box<dyn Fn(&recon_io::hdf5::File)> {
    replace_as(name, shape, value)
}

/// An edit that replaces dataset `name` (if present) by complex64 values
/// `value + i value` of `shape`, as h5py writes NumPy's complex64.
fn replace_complex(
    name: &'static str,
    shape: Vec<usize>,
    value: f32,
) -> Box<dyn Fn(&recon_io::hdf5::File)> {
    replace_as(name, shape, recon_core::Complex::new(value, value))
}

/// An edit that replaces dataset `name` (if present) by `value`s of
/// `shape`, of `value`'s type.
fn replace_as<T: recon_io::hdf5::H5Type + Clone + 'static>(
    name: &'static str,
    shape: Vec<usize>,
    value: T,
) -> Box<dyn Fn(&recon_io::hdf5::File)> {
    Box::new(move |f: &recon_io::hdf5::File| {
        if f.link_exists(name) {
            f.unlink(name).unwrap();
        }
        let n: usize = shape.iter().product();
        f.new_dataset::<T>()
            .shape(shape.clone())
            .create(name)
            .unwrap()
            .write_raw(&vec![value.clone(); n])
            .unwrap();
    })
}

/// Copies of `base`, each changed by one edit, named `{prefix}-{i}.h5`.
#[allow(clippy::type_complexity)]
fn apply_edits(
    dir: &Path,
    base: &Path,
    prefix: &str,
    edits: Vec<(&str, Box<dyn Fn(&recon_io::hdf5::File)>)>,
) -> Vec<(PathBuf, String)> {
    edits
        .into_iter()
        .enumerate()
        .map(|(i, (what, edit))| {
            let p = dir.join(format!("{prefix}-{i}.h5"));
            std::fs::copy(base, &p).unwrap();
            let f = recon_io::hdf5::File::open_rw(&p).unwrap();
            edit(&f);
            f.close().unwrap();
            (p, what.to_string())
        })
        .collect()
}

/// A small valid version 2 scan file: 3 coils, noise samples, maps, truth.
fn base_multicoil_scan(dir: &Path) -> PathBuf {
    let grid = Grid::new([8, 8, 8], [200.0; 3]).unwrap();
    let mut rng = Rng::new(12);
    let traj = common::random_traj(&grid, 100, &mut rng);
    let scan = recon_io::scan::Scan {
        grid,
        coils: 3,
        data: rng.complex(300),
        traj,
        noise: Some(recon_io::scan::CoilNoise::Samples(rng.complex(3 * 30))),
        maps: Some((0..3).map(|_| rng.complex(grid.len())).collect()),
        truth: Some((0..grid.len()).map(|i| i as f64).collect()),
        anatomy: None,
        geometry: None,
        parts: Vec::new(),
    };
    let path = dir.join("base-v2.h5");
    recon_io::scan::write_scan(&path, &scan).unwrap();
    assert_eq!(recon_io::scan::read_scan(&path, false).unwrap().coils, 3);
    path
}

/// Changes of a version 2 file's coil datasets: channel counts, shapes,
/// types and values that disagree.
fn structured_multicoil_mutants(dir: &Path, base: &Path) -> Vec<(PathBuf, String)> {
    use recon_io::hdf5;
    let edits: Vec<(&str, Box<dyn Fn(&hdf5::File)>)> = vec![
        ("data 2 coils", replace("kspace/data", vec![2, 100, 2], 1.0)),
        ("data 0 coils", replace("kspace/data", vec![0, 100, 2], 1.0)),
        ("data 4-D", replace("kspace/data", vec![3, 100, 2, 1], 1.0)),
        (
            "data NaN",
            replace("kspace/data", vec![3, 100, 2], f32::NAN),
        ),
        (
            "noise 2 channels",
            replace("kspace/noise", vec![2, 30, 2], 1.0),
        ),
        ("noise empty", replace("kspace/noise", vec![3, 0, 2], 1.0)),
        (
            "noise infinite",
            replace("kspace/noise", vec![3, 30, 2], f32::INFINITY),
        ),
        ("noise 2-D", replace("kspace/noise", vec![3, 60], 1.0)),
        (
            "covariance beside noise",
            replace("kspace/noise_covariance", vec![3, 3, 2], 1.0),
        ),
        (
            "maps 4 channels",
            replace("coils/maps", vec![4, 8, 8, 8, 2], 1.0),
        ),
        (
            "maps wrong grid",
            replace("coils/maps", vec![3, 8, 4, 8, 2], 1.0),
        ),
        ("maps 4-D", replace("coils/maps", vec![3, 8, 8, 16], 1.0)),
        (
            "maps NaN",
            replace("coils/maps", vec![3, 8, 8, 8, 2], f32::NAN),
        ),
        (
            "maps declared 2^30 coils",
            Box::new(|f: &hdf5::File| {
                f.unlink("coils/maps").unwrap();
                f.new_dataset::<f32>()
                    .chunk([1, 8, 8, 8, 2])
                    .shape([1usize << 30, 8, 8, 8, 2])
                    .create("coils/maps")
                    .unwrap();
            }),
        ),
        (
            "noise as float64",
            Box::new(|f: &hdf5::File| {
                f.unlink("kspace/noise").unwrap();
                f.new_dataset::<f64>()
                    .shape([3, 30, 2])
                    .create("kspace/noise")
                    .unwrap()
                    .write_raw(&[1.0f64; 180])
                    .unwrap();
            }),
        ),
    ];
    apply_edits(dir, base, "structured-v2", edits)
}

#[test]
fn fuzz_multicoil_scan_files() {
    let tmp = tempfile::tempdir().unwrap();
    let base = base_multicoil_scan(tmp.path());
    assert_eq!(
        inspect(&base, "base version 2 scan file"),
        Outcome::Accepted
    );
    let bytes = std::fs::read(&base).unwrap();
    let mut rng = Rng::new(2027);
    let mut cases = structured_multicoil_mutants(tmp.path(), &base);
    // Half the single-coil fuzzer's count: the format's common parts are
    // fuzzed there.
    for i in cases.len()..HDF5_CASES / 2 {
        let (b, what) = mutate_bytes(&bytes, &mut rng, None);
        let p = tmp.path().join(format!("v2-m{i}.h5"));
        std::fs::write(&p, b).unwrap();
        cases.push((p, format!("case {i}: {what}")));
    }
    run_hdf5_cases("version 2 scan files", cases);
}

#[test]
fn fuzz_scan_files() {
    let tmp = tempfile::tempdir().unwrap();
    let base = base_scan(tmp.path());
    assert_eq!(inspect(&base, "base scan file"), Outcome::Accepted);
    let bytes = std::fs::read(&base).unwrap();
    let mut rng = Rng::new(2026);
    let mut cases = structured_scan_mutants(tmp.path(), &base);
    for i in cases.len()..HDF5_CASES {
        let (b, what) = mutate_bytes(&bytes, &mut rng, None);
        let p = tmp.path().join(format!("m{i}.h5"));
        std::fs::write(&p, b).unwrap();
        cases.push((p, format!("case {i}: {what}")));
    }
    run_hdf5_cases("scan files", cases);
}
