//! Input formats: a scan file in every number type h5py writes (float32 or
//! float64 pairs, complex64 or complex128) reads as the same scan, and
//! numbers of another type or shape are refused by name.

use crate::common;

use common::*;
use recon_io::hdf5;
use std::path::Path;

/// Runs the Python script `tests/{script}` with `dir`; false (after
/// saying so) when Python, NumPy or h5py is missing.
fn python(script: &str, dir: &Path) -> bool {
    let o = std::process::Command::new("python3")
        .arg(repo().join("tests").join(script))
        .arg(dir)
        .output();
    match o {
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

/// `tests/scan_variants.py`'s files in `dir`: one scan in every number type.
fn variants(dir: &Path) -> bool {
    python("scan_variants.py", dir)
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

/// `tests/import_sources.py`'s files in `dir`: one scan in BART's and
/// NumPy's layouts, and bad inputs.
fn import_sources(dir: &Path) -> bool {
    python("import_sources.py", dir)
}

fn import(dir: &Path, out: &str, args: &[&str]) -> std::process::Output {
    let mut all = vec!["import", "--matrix", "16", "--fov-mm", "200", "--out", out];
    all.extend_from_slice(args);
    recon(&all, &dir.join("cache"))
}

/// A scan file's trajectory, data and noise (empty when absent) as stored.
fn stored(file: &Path) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    let f = hdf5::File::open(file).unwrap();
    let read = |name: &str| -> Vec<f32> {
        let Ok(d) = f.dataset(name) else {
            return Vec::new();
        };
        match d.read_raw::<f32>() {
            Ok(v) => v,
            // h5py's complex64: flattened to pairs
            Err(_) => d
                .read_raw::<recon_core::Complex<f32>>()
                .unwrap()
                .iter()
                .flat_map(|c| [c.re, c.im])
                .collect(),
        }
    };
    (
        read("kspace/trajectory"),
        read("kspace/data"),
        read("kspace/noise"),
    )
}

#[test]
fn bart_numpy_and_sigpy_files_import_to_the_same_scan() {
    no_hdf5_locking();
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    if !import_sources(d) {
        return;
    }
    let p = |name: &str| d.join(name).to_str().unwrap().to_string();
    let cases: [(&str, [String; 3], &[&str]); 3] = [
        ("bart", [p("traj"), p("ksp.cfl"), p("noise.hdr")], &[]),
        ("numpy", [p("traj.npy"), p("ksp.npy"), p("noise.npy")], &[]),
        (
            "sigpy",
            [
                p("sigpy.npz:coord"),
                p("sigpy.npz:ksp"),
                p("sigpy.npz:noise"),
            ],
            &["--k-order", "zyx"],
        ),
    ];
    let expected = stored(&d.join("expected.h5"));
    for (name, [t, k, n], extra) in &cases {
        let out = p(&format!("{name}.h5"));
        let mut args = vec!["--trajectory", t, "--data", k, "--noise", n];
        args.extend_from_slice(extra);
        let o = import(d, &out, &args);
        assert!(o.status.success(), "{name}: {}", stderr(&o));
        let said = String::from_utf8_lossy(&o.stdout);
        assert!(
            said.contains("(scan file version 2): 2000 samples from 2 coils, 100 noise samples"),
            "{name}: {said}"
        );
        // The same float32 numbers in the same order as the expected file.
        assert!(stored(Path::new(&out)) == expected, "{name} differs");
    }
    // Normalised units are multiplied by the matrix.
    let out = p("normalized.h5");
    let o = import(
        d,
        &out,
        &[
            "--trajectory",
            &p("traj-normalized.npy"),
            "--data",
            &p("ksp.npy"),
            "--units",
            "normalized",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let (t, _, _) = stored(Path::new(&out));
    let worst = t
        .iter()
        .zip(&expected.0)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0f32, f32::max);
    assert!(worst < 1e-5, "{worst}"); // float32 rounding of k / 16 * 16

    // The imported scan reconstructs, and --export cfl writes the image
    // BART reads: recon.h5's /recon in BART's order (x fastest).
    let run = d.join("run");
    let o = recon(
        &[
            &p("bart.h5"),
            "--out",
            run.to_str().unwrap(),
            "--iterations",
            "3",
            "--lambda",
            "0.01",
            "--export",
            "cfl",
        ],
        &d.join("cache"),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let hdr = std::fs::read_to_string(run.join("recon.hdr")).unwrap();
    assert!(hdr.starts_with("# Dimensions\n16 16 16 1 "), "{hdr}");
    let (dims, values) = recon_import::cfl::read(&run.join("recon"), 1 << 20).unwrap();
    assert_eq!(&dims[..3], &[16, 16, 16]);
    let img = image(&run);
    assert!(values
        .iter()
        .zip(&img)
        .all(|(a, b)| a.re == b.re as f64 && a.im == b.im as f64));
}

#[test]
fn bad_imports_name_the_input_and_write_nothing() {
    no_hdf5_locking();
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    if !import_sources(d) {
        return;
    }
    let p = |name: &str| d.join(name).to_str().unwrap().to_string();
    let cases: Vec<(Vec<String>, Vec<&str>)> = vec![
        (
            vec![
                "--trajectory".into(),
                p("traj.npy"),
                "--data".into(),
                p("ksp-short.npy"),
            ],
            vec![
                "ksp-short.npy",
                "not a whole number of coils",
                "2000 samples",
            ],
        ),
        (
            vec![
                "--trajectory".into(),
                p("traj-complex.npy"),
                "--data".into(),
                p("ksp.npy"),
            ],
            vec!["traj-complex.npy", "complex coordinates"],
        ),
        (
            vec![
                "--trajectory".into(),
                p("traj.npy"),
                "--data".into(),
                p("ksp-nan.npy"),
            ],
            vec!["ksp-nan.npy", "NaN", "finite"],
        ),
        (
            vec![
                "--trajectory".into(),
                p("traj-int.npy"),
                "--data".into(),
                p("ksp.npy"),
            ],
            vec!["traj-int.npy", "float32, float64, complex64 or complex128"],
        ),
        (
            vec![
                "--trajectory".into(),
                p("traj"),
                "--data".into(),
                p("ksp-cut"),
            ],
            vec!["ksp-cut.cfl", "64 bytes", "need 32000"],
        ),
        (
            vec![
                "--trajectory".into(),
                p("traj.npy"),
                "--data".into(),
                p("sigpy.npz:kspace"),
            ],
            vec!["sigpy.npz", "no array `kspace`", "coord, ksp, noise"],
        ),
        (
            vec![
                "--trajectory".into(),
                p("traj.npy"),
                "--data".into(),
                p("sigpy.npz"),
            ],
            vec!["holds 3 arrays", "FILE.npz:NAME"],
        ),
        (
            vec![
                "--trajectory".into(),
                p("traj.npy"),
                "--data".into(),
                p("ksp.npy"),
                "--noise".into(),
                p("ksp.npy"),
            ],
            vec!["ksp.npy", "noise samples are [coils, samples]"],
        ),
        (
            vec![
                "--trajectory".into(),
                p("traj"),
                "--data".into(),
                p("ksp"),
                "--k-order".into(),
                "zyx".into(),
            ],
            vec!["--k-order zyx is for NumPy"],
        ),
        (
            vec![
                "--trajectory".into(),
                p("traj.npy"),
                "--data".into(),
                p("missing.npy"),
            ],
            vec!["missing.npy"],
        ),
        (
            vec![
                "--trajectory".into(),
                p("traj.txt"),
                "--data".into(),
                p("ksp.npy"),
            ],
            vec!["--trajectory", "traj.txt", "not a file recon imports"],
        ),
    ];
    // A trajectory in cycles/FOV read as normalised lands beyond Nyquist.
    let o = import(
        d,
        &p("beyond.h5"),
        &[
            "--trajectory",
            &p("traj.npy"),
            "--data",
            &p("ksp.npy"),
            "--units",
            "normalized",
        ],
    );
    let err = stderr(&o);
    assert!(
        !o.status.success() && err.contains("beyond Nyquist") && err.contains("--units"),
        "{err}"
    );
    assert!(!d.join("beyond.h5").exists());
    for (i, (args, expect)) in cases.into_iter().enumerate() {
        let out = p(&format!("bad-{i}.h5"));
        let args: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
        let o = import(d, &out, &args);
        let err = stderr(&o);
        assert!(!o.status.success(), "case {i}: accepted");
        for e in expect {
            assert!(err.contains(e), "case {i}: error should name {e:?}: {err}");
        }
        assert!(!Path::new(&out).exists(), "case {i}: wrote the scan file");
    }
    // A FOV is never guessed: --fov-mm is required.
    let o = recon(
        &[
            "import",
            "--matrix",
            "16",
            "--trajectory",
            &p("traj.npy"),
            "--data",
            &p("ksp.npy"),
            "--out",
            &p("x.h5"),
        ],
        &d.join("cache"),
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("--fov-mm"), "{}", stderr(&o));
}

/// The importers inside the fuzz harness: 300 mutants of each input file
/// (bytes overwritten, truncated or extended, with a fixed seed), each
/// imported in this process. Every one must be accepted or refused with
/// an error; none may panic.
#[test]
fn fuzz_imported_files() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    if !import_sources(d) {
        return;
    }
    let mut state = 0x9e3779b97f4a7c15u64;
    let mut next = move |n: usize| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state % n.max(1) as u64) as usize
    };
    let params = recon_import::Params {
        matrix: [16, 16, 16],
        fov_mm: [200.0; 3],
        k_order: recon_import::KOrder::Xyz,
        units: recon_import::Units::CyclesPerFov,
    };
    let (mut accepted, mut refused) = (0, 0);
    for (victim, traj, data) in [
        ("traj.npy", "traj.npy", "ksp.npy"),
        ("ksp.npy", "traj.npy", "ksp.npy"),
        ("traj.hdr", "traj", "ksp"),
        ("ksp.cfl", "traj", "ksp"),
        ("sigpy.npz", "sigpy.npz:coord", "sigpy.npz:ksp"),
    ] {
        let original = std::fs::read(d.join(victim)).unwrap();
        for _ in 0..300 {
            let mut bytes = original.clone();
            match next(3) {
                0 => {
                    for _ in 0..1 + next(4) {
                        let at = next(bytes.len().min(256));
                        bytes[at] = next(256) as u8;
                    }
                }
                1 => bytes.truncate(next(bytes.len())),
                _ => bytes.extend((0..1 + next(64)).map(|_| next(256) as u8)),
            }
            std::fs::write(d.join(victim), &bytes).unwrap();
            let sources = recon_import::Sources {
                trajectory: &d.join(traj),
                data: &d.join(data),
                noise: None,
            };
            let r = std::panic::catch_unwind(|| recon_import::scan(&sources, &params).is_ok());
            match r {
                Ok(true) => accepted += 1,
                Ok(false) => refused += 1,
                Err(_) => panic!("{victim}: a mutant panicked the importer"),
            }
        }
        std::fs::write(d.join(victim), &original).unwrap();
    }
    println!("import fuzz: {accepted} accepted, {refused} refused with an error");
    assert!(
        refused > 0,
        "no mutant was refused: the mutations do nothing"
    );
}

#[test]
fn nifti_complex_and_gzip_on_request() {
    // output.complex: recon.nii holds the complex image (NIfTI complex64),
    // the very values of recon.h5's /recon; output.compress: .nii.gz.
    no_hdf5_locking();
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let scan = repo().join("tests/fixtures/test-flat.ismrmrd.h5");
    let o = recon(
        &[
            scan.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "--iterations",
            "3",
            "--lambda",
            "0.01",
            "--set",
            "output.complex=true",
            "--set",
            "output.compress=true",
        ],
        &tmp.path().join("cache"),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(!out.join("recon.nii").exists());
    let obj = nifti::ReaderOptions::new()
        .read_file(out.join("recon.nii.gz"))
        .unwrap();
    use nifti::{IntoNdArray, NiftiObject};
    assert_eq!(obj.header().datatype, 32, "NIFTI_TYPE_COMPLEX64");
    let v = obj
        .into_volume()
        .into_ndarray::<recon_core::Complex<f32>>()
        .unwrap();
    // [x, y, (z,) ...] as NIfTI stores it; reversed, x fastest as recon.h5.
    let nifti_values: Vec<recon_core::Complex<f32>> = v.reversed_axes().iter().copied().collect();
    let h5 = image(&out);
    assert_eq!(nifti_values.len(), h5.len());
    assert!(nifti_values
        .iter()
        .zip(&h5)
        .all(|(a, b)| a.re == b.re && a.im == b.im));
    // gridding too; the truth (none here) and maps stay magnitudes.
    assert!(out.join("gridding.nii.gz").exists());
}
