//! Input formats: a scan file in every number type h5py writes (float32 or
//! float64 pairs, complex64 or complex128) reads as the same scan, and
//! numbers of another type or shape are refused by name.

mod common;

use common::*;
use recon_io::hdf5;
use std::path::Path;

/// Writes `tests/scan_variants.py`'s files into `dir`; false (after saying
/// so) when Python, NumPy or h5py is missing.
fn variants(dir: &Path) -> bool {
    let script = repo().join("tests/scan_variants.py");
    match std::process::Command::new("python3")
        .arg(&script)
        .arg(dir)
        .output()
    {
        Ok(o) if o.status.success() => true,
        Ok(o) if String::from_utf8_lossy(&o.stderr).contains("No module named") => {
            println!("skipped: h5py or numpy missing (scripts/setup.sh installs them)");
            false
        }
        Ok(o) => panic!("{}", String::from_utf8_lossy(&o.stderr)),
        Err(_) => {
            println!("skipped: no python3");
            false
        }
    }
}

fn image(out: &Path) -> Vec<recon_core::Complex<f32>> {
    let f = hdf5::File::open(out.join("recon.h5")).unwrap();
    f.dataset("recon").unwrap().read_raw().unwrap()
}

#[test]
fn every_number_type_h5py_writes_reads_as_the_same_scan() {
    no_hdf5_locking();
    let tmp = tempfile::tempdir().unwrap();
    if !variants(tmp.path()) {
        return;
    }
    let mut images = Vec::new();
    for kind in ["float32", "float64", "complex64", "complex128"] {
        let scan = tmp.path().join(format!("{kind}.h5"));
        let out = tmp.path().join(format!("out-{kind}"));
        let o = recon(
            &[
                scan.to_str().unwrap(),
                "--out",
                out.to_str().unwrap(),
                "--iterations",
                "4",
                "--lambda",
                "0.01",
                "--threads",
                "1",
                "--set",
                "engine.precision=f64",
            ],
            &tmp.path().join("cache"),
        );
        assert!(o.status.success(), "{kind}: {}", stderr(&o));
        let report: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap())
                .unwrap();
        // Two coils, their noise scan and maps, and the truth were all read.
        assert_eq!(report["coils"], 2, "{kind}: {report}");
        assert!(report["psnr_db"].as_f64().is_some(), "{kind}: {report}");
        images.push((kind, image(&out)));
    }
    // Every file holds the same float32 numbers, and conversion to float64
    // is exact: the images are equal to the bit.
    for (kind, img) in &images[1..] {
        assert!(img == &images[0].1, "{kind} differs from float32");
    }
}

#[test]
fn numbers_of_another_type_or_shape_are_refused_by_name() {
    no_hdf5_locking();
    let tmp = tempfile::tempdir().unwrap();
    if !variants(tmp.path()) {
        return;
    }
    let cases: [(&str, &[&str]); 3] = [
        (
            "bad-complex-trajectory",
            &["kspace/trajectory", "complex numbers, expected real"],
        ),
        (
            "bad-integer-data",
            &["kspace/data", "expected float32 or float64", "complex64"],
        ),
        (
            "bad-complex-shape",
            &[
                "kspace/data",
                "[2, 3000, 2] (complex)",
                "expected [C, M] (complex)",
            ],
        ),
    ];
    for (name, expect) in cases {
        let out = tmp.path().join(format!("out-{name}"));
        let scan = tmp.path().join(format!("{name}.h5"));
        let o = recon(
            &[scan.to_str().unwrap(), "--out", out.to_str().unwrap()],
            &tmp.path().join("cache"),
        );
        let err = stderr(&o);
        assert!(!o.status.success(), "{name}: accepted");
        for e in expect {
            assert!(err.contains(e), "{name}: error should name {e:?}: {err}");
        }
        assert!(!out.exists(), "{name}: wrote output");
    }
}
