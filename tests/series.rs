//! Scans of several images (ISMRMRD slices and contrasts) and where their
//! images lie in the scanner: reading `idx` and the acquisitions'
//! geometry, one run for every image (the shared plan, Q and maps give
//! each image what its own run gives), the `[scan]` selection keys, the
//! files' layout, the NIfTI affine checked with nibabel, and bad files.
//!
//! The fixture, tests/fixtures/multislice-2contrasts.ismrmrd.h5, is
//! written by scripts/make-ismrmrd-series.py with the ismrmrd package: 3
//! oblique, off-centre 2-D radial slices 6 mm apart, 2 contrasts (the
//! second at half the signal), 2 coils, every sample exact.

use crate::common;

use common::{fails_with, recon, repo, stderr};
use recon_io::geometry::Index;
use recon_io::hdf5;
use std::path::{Path, PathBuf};
use std::process::Command;

fn fixture() -> PathBuf {
    repo().join("tests/fixtures/multislice-2contrasts.ismrmrd.h5")
}

/// A config reconstructing `file` in f64 with `extra` lines in `[scan]`.
fn config(dir: &Path, file: &Path, extra: &str) -> PathBuf {
    let path = dir.join("series.toml");
    std::fs::write(
        &path,
        format!(
            "[scan]\nfile = \"{}\"\n{extra}\n[engine]\nprecision = \"f64\"\n\
             [solver]\niterations = 20\nlambda = 0.01\n[output]\ndir = \"out\"\n",
            file.display().to_string().replace('\\', "/")
        ),
    )
    .unwrap();
    path
}

fn run(dir: &Path, cfg: &Path) -> String {
    let o = recon(&["run", "--config", cfg.to_str().unwrap()], dir);
    assert!(o.status.success(), "{}", stderr(&o));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// recon.h5's `name` as complex values, with its shape.
fn complex(out: &Path, name: &str) -> (Vec<usize>, Vec<recon_core::Complex<f64>>) {
    common::no_hdf5_locking();
    let f = hdf5::File::open(out.join("recon.h5")).unwrap();
    let ds = f.dataset(name).unwrap();
    let v: Vec<recon_core::Complex<f32>> = ds.read_raw().unwrap();
    (
        ds.shape(),
        v.iter()
            .map(|c| recon_core::Complex::new(c.re as f64, c.im as f64))
            .collect(),
    )
}

fn nrmse(a: &[recon_core::Complex<f64>], b: &[recon_core::Complex<f64>]) -> f64 {
    let d: f64 = a.iter().zip(b).map(|(x, y)| (x - y).norm_sqr()).sum();
    let n: f64 = b.iter().map(|y| y.norm_sqr()).sum();
    (d / n).sqrt()
}

#[test]
fn a_file_of_slices_and_contrasts_reads_as_its_images_with_their_geometry() {
    common::no_hdf5_locking();
    let s =
        recon_io::ismrmrd::read_ismrmrd(&fixture(), recon_io::ismrmrd::Units::Normalized, false)
            .unwrap();
    assert_eq!(s.grid.n, [32, 32, 1]);
    assert_eq!(s.coils, 2);
    let indices: Vec<Index> = s.parts.iter().map(|p| p.index).collect();
    let want: Vec<Index> = [(0, 0), (0, 1), (1, 0), (1, 1), (2, 0), (2, 1)]
        .iter()
        .map(|&(sl, c)| Index([sl, c, 0, 0, 0]))
        .collect();
    assert_eq!(indices, want);
    assert!(s.geometry.is_none(), "several images: a geometry each");
    for p in &s.parts {
        assert_eq!(p.samples.len(), 48 * 64);
        let g = p.geometry.expect("the fixture has geometry");
        g.check().unwrap();
        // The script's rotation: read_dir = Rx(20) Rz(30) e_x.
        let (c30, s30) = (30f64.to_radians().cos(), 30f64.to_radians().sin());
        let want = [
            c30,
            s30 * 20f64.to_radians().cos(),
            s30 * 20f64.to_radians().sin(),
        ];
        for (got, want) in g.read_dir.iter().zip(want) {
            // float32 in the file.
            assert!((got - want).abs() < 1e-6, "{:?}", g.read_dir);
        }
        // Slices 6 mm apart along slice_dir, slice 1 at (12, -30, 20).
        let off = (p.index.slice() as f64 - 1.0) * 6.0;
        for d in 0..3 {
            let want = [12.0, -30.0, 20.0][d] + off * g.slice_dir[d];
            assert!(
                (g.position_mm[d] - want).abs() < 1e-4,
                "{:?}",
                g.position_mm
            );
        }
    }
    // Split, each image holds its own samples of both coils.
    let m = s.traj.len();
    let (data, parts) = (s.data.clone(), s.parts.clone());
    let images = s.split();
    assert_eq!(images.len(), 6);
    for ((index, one), p) in images.iter().zip(&parts) {
        assert_eq!(*index, p.index);
        let r = p.samples.clone();
        assert_eq!(one.data[..r.len()], data[r.clone()]);
        assert_eq!(one.data[r.len()..], data[m + r.start..m + r.end]);
        assert_eq!(one.geometry, p.geometry);
    }
}

#[test]
fn every_image_of_one_run_is_what_its_own_run_gives() {
    let (all, one) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let stdout = run(all.path(), &config(all.path(), &fixture(), ""));
    // Contrast 1 of each slice shares contrast 0's plan, Q and maps.
    assert_eq!(stdout.matches("plan and Q shared").count(), 3, "{stdout}");
    let out = all.path().join("out");
    let (shape, recon_all) = complex(&out, "recon");
    assert_eq!(shape, vec![3, 2, 1, 32, 32]);
    let (maps_shape, _) = complex(&out, "coil_maps");
    assert_eq!(maps_shape, vec![3, 2, 2, 1, 32, 32]);
    let f = hdf5::File::open(out.join("recon.h5")).unwrap();
    let slices: Vec<i64> = f.dataset("series/slice").unwrap().read_raw().unwrap();
    let contrasts: Vec<i64> = f.dataset("series/contrast").unwrap().read_raw().unwrap();
    assert_eq!((slices, contrasts), (vec![0, 1, 2], vec![0, 1]));
    let axes: hdf5::types::VarLenUnicode = f.attr("axes").unwrap().read_scalar().unwrap();
    assert_eq!(axes.as_str(), "slice, contrast, z, y, x (x fastest)");
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
    assert_eq!(report["images"].as_array().unwrap().len(), 6);
    assert_eq!(report["images"][3]["index"]["slice"], 1);
    assert_eq!(report["images"][3]["shared"], true);

    // Slice 1, contrast 1 alone: built afresh, with maps of its own data.
    let cfg = config(one.path(), &fixture(), "slices = [1]\ncontrasts = [1]");
    let stdout = run(one.path(), &cfg);
    assert!(!stdout.contains("shared"), "{stdout}");
    let (shape, alone) = complex(&one.path().join("out"), "recon");
    assert_eq!(shape, vec![1, 32, 32]);
    let n = 32 * 32;
    let image = |s: usize, c: usize| &recon_all[(2 * s + c) * n..(2 * s + c + 1) * n];
    // Maps from contrast 0's data against its own (half the signal, the
    // same sensitivities): the same maps but for rounding; float32 files.
    let e = nrmse(image(1, 1), &alone);
    assert!(
        e < 1e-5,
        "slice 1, contrast 1: nrmse {e:e} against its own run"
    );
    // Contrast 1 is contrast 0 at half the signal, in every slice: nothing merged.
    for s in 0..3 {
        let half: Vec<_> = image(s, 0).iter().map(|v| v * 0.5).collect();
        let e = nrmse(image(s, 1), &half);
        assert!(
            e < 1e-5,
            "slice {s}: contrast 1 against half contrast 0: {e:e}"
        );
    }
    // The slices are different images.
    assert!(nrmse(image(0, 0), image(1, 0)) > 0.1);
}

#[test]
fn one_coil_images_of_one_trajectory_are_solved_as_one_batch() {
    // The fixture with coil 0 only: its six 2-D images share the
    // trajectory, so they are solved together (one plan, Q and CG), and
    // the same with `solver.stack = "slices"` one after the other.
    let (batch, alone) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let file = batch.path().join("one-coil.h5");
    common::python_check(
        "ismrmrd_edit.py",
        &[&fixture(), &file, Path::new("one-coil")],
        "",
    );
    let stdout = run(batch.path(), &config(batch.path(), &file, ""));
    assert_eq!(
        stdout.matches("solved with 5 others in one batch").count(),
        6,
        "{stdout}"
    );
    let cfg = config(alone.path(), &file, "");
    let text = std::fs::read_to_string(&cfg).unwrap();
    std::fs::write(
        &cfg,
        text.replace("[solver]", "[solver]\nstack = \"slices\""),
    )
    .unwrap();
    let stdout = run(alone.path(), &cfg);
    assert!(!stdout.contains("batch"), "{stdout}");
    assert_eq!(stdout.matches("plan and Q shared").count(), 5, "{stdout}");
    let report: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(batch.path().join("out/report.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(report["images"][4]["batch"], 6);
    let (shape, x) = complex(&batch.path().join("out"), "recon");
    assert_eq!(shape, vec![3, 2, 1, 32, 32]);
    let (_, y) = complex(&alone.path().join("out"), "recon");
    let e = nrmse(&x, &y);
    // The same equations for every image; one CG shares its step sizes over
    // the six, so 20 iterations land elsewhere than six solves: measured
    // 9.1e-5.
    println!("batch against one image at a time: nrmse {e:e}");
    assert!(e < 1e-3, "batch against one image at a time: nrmse {e:e}");
    // Three images (contrast 0 of each slice): an odd batch, padded by an
    // image of zeros, still the images one at a time.
    let odd = tempfile::tempdir().unwrap();
    let stdout = run(odd.path(), &config(odd.path(), &file, "contrasts = [0]"));
    assert_eq!(
        stdout.matches("solved with 2 others in one batch").count(),
        3,
        "{stdout}"
    );
    let (shape, z) = complex(&odd.path().join("out"), "recon");
    assert_eq!(shape, vec![3, 1, 32, 32]);
    let n = 32 * 32;
    let contrast0: Vec<_> = (0..3)
        .flat_map(|s| y[2 * s * n..(2 * s + 1) * n].iter().copied())
        .collect();
    let e = nrmse(&z, &contrast0);
    assert!(
        e < 1e-3,
        "odd batch against one image at a time: nrmse {e:e}"
    );
    // Within a batch each image's iterate is the same polynomial in the
    // shared operator applied to its own F^H D, so contrast 1 is still
    // exactly half contrast 0 (float32 files).
    for s in 0..3 {
        let half: Vec<_> = x[2 * s * n..(2 * s + 1) * n]
            .iter()
            .map(|v| v * 0.5)
            .collect();
        let e = nrmse(&x[(2 * s + 1) * n..(2 * s + 2) * n], &half);
        assert!(
            e < 1e-5,
            "slice {s}: contrast 1 against half contrast 0: {e:e}"
        );
    }
}

#[test]
fn the_nifti_affine_puts_each_slices_feature_where_it_is_in_the_scanner() {
    let tmp = tempfile::tempdir().unwrap();
    run(tmp.path(), &config(tmp.path(), &fixture(), ""));
    let out = tmp.path().join("out");
    // The check itself, with nibabel.
    common::python_check(
        "geometry_check.py",
        &[&out, &fixture()],
        "every feature within half a voxel",
    );
}

#[test]
fn a_selection_keeps_its_images_and_a_wrong_one_is_refused_by_key() {
    let tmp = tempfile::tempdir().unwrap();
    let cfg = config(tmp.path(), &fixture(), "slices = [0, 2]\ncontrasts = [0]");
    run(tmp.path(), &cfg);
    let (shape, _) = complex(&tmp.path().join("out"), "recon");
    assert_eq!(shape, vec![2, 1, 32, 32]);
    let bad = [
        (
            "contrasts = [5]",
            &["scan.contrasts", "no contrast 5", "0, 1"][..],
        ),
        ("slices = []", &["scan.slices", "empty list", "0, 1, 2"][..]),
        ("sets = [1]", &["scan.sets", "no set 1", "sets: 0"][..]),
    ];
    for (line, expect) in bad {
        let dir = tempfile::tempdir().unwrap();
        let cfg = config(dir.path(), &fixture(), line);
        let o = recon(&["run", "--config", cfg.to_str().unwrap()], dir.path());
        fails_with(&o, expect);
        assert!(!dir.path().join("out").exists(), "{line}: nothing written");
    }
}

#[test]
fn files_whose_images_do_not_fit_together_are_refused_naming_what() {
    let cases = [
        (
            "drop-image",
            &["slice 1, contrast 1", "every combination"][..],
        ),
        (
            "short-image",
            &["slice 0, contrast 1 holds 3008 samples", "as many samples"][..],
        ),
        ("skew", &["read_dir", "orthonormal"][..]),
        ("move", &["dataset/data[3]", "one geometry"][..]),
    ];
    for (edit, expect) in cases {
        let dir = tempfile::tempdir().unwrap();
        let bad = dir.path().join(format!("{edit}.h5"));
        common::python_check("ismrmrd_edit.py", &[&fixture(), &bad, Path::new(edit)], "");
        let cfg = config(dir.path(), &bad, "");
        let o = recon(&["run", "--config", cfg.to_str().unwrap()], dir.path());
        fails_with(&o, expect);
        assert!(!dir.path().join("out").exists(), "{edit}: nothing written");
    }
}

#[test]
fn a_scan_file_carries_its_geometry_to_the_nifti_and_refuses_half_of_one() {
    common::no_hdf5_locking();
    let tmp = tempfile::tempdir().unwrap();
    // The first slice of the fixture as a scan file, with its geometry.
    let s =
        recon_io::ismrmrd::read_ismrmrd(&fixture(), recon_io::ismrmrd::Units::Normalized, false)
            .unwrap();
    let (_, one) = s.split().swap_remove(0);
    let geometry = one.geometry.unwrap();
    let path = tmp.path().join("slice0.h5");
    recon_io::scan::write_scan(&path, &one).unwrap();
    let back = recon_io::scan::read_scan(&path, false).unwrap();
    assert_eq!(back.geometry, Some(geometry));
    run(tmp.path(), &config(tmp.path(), &path, ""));
    // The NIfTI's sform is the geometry's affine (float32 in the header).
    let o = Command::new("python3")
        .args([
            "-c",
            "import nibabel, sys, numpy; print(numpy.array2string(nibabel.load(sys.argv[1]).get_sform().ravel(), separator=','))",
        ])
        .arg(tmp.path().join("out/recon.nii"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8_lossy(&o.stdout).replace(['[', ']', '\n', ' '], "");
    let got: Vec<f64> = text.split(',').map(|v| v.parse().unwrap()).collect();
    let want = geometry.affine(&one.grid);
    for r in 0..3 {
        for c in 0..4 {
            assert!(
                (got[4 * r + c] - want[r][c]).abs() < 1e-4 * (1.0 + want[r][c].abs()),
                "{got:?}"
            );
        }
    }
    // Half a geometry, and directions that are not orthonormal.
    for (attrs, expect) in [
        (
            &["position_mm", "read_dir"][..],
            &["incomplete", "phase_dir, slice_dir"][..],
        ),
        (&[][..], &["read_dir", "orthonormal"][..]),
    ] {
        let bad = tmp.path().join("bad.h5");
        std::fs::copy(&path, &bad).unwrap();
        {
            let f = hdf5::File::open_rw(&bad).unwrap();
            let ks = f.group("kspace").unwrap();
            if attrs.is_empty() {
                ks.delete_attr("read_dir").unwrap();
                recon_io::set_attr(&bad, &ks, "read_dir", &[1.0f64, 1.0, 0.0]).unwrap();
            } else {
                for a in ["phase_dir", "slice_dir"] {
                    ks.delete_attr(a).unwrap();
                }
            }
        }
        let e = recon_io::scan::read_scan(&bad, false)
            .unwrap_err()
            .to_string();
        for x in expect {
            assert!(e.contains(x), "{e}");
        }
    }
}
