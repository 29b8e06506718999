//! `[prior] reference = "file.nii"`: a reference image with its own
//! matrix, FOV and orientation, resampled into each image's frame: at the
//! isocentre it gives what the same reference stored with the data gives;
//! on an oblique, off-centre multi-slice scan it lands where its scanner
//! coordinates say; one that misses the field of view, has no orientation,
//! or comes with another reference is refused, naming the key.

use crate::common;

use common::{fails_with, recon, repo, stderr};
use std::path::{Path, PathBuf};

/// Writes a NIfTI of `values` (i fastest) on `n` voxels with the voxel-to-
/// RAS transform `affine` as sform and qform (or neither, `coded` false).
fn write_nifti(path: &Path, n: [usize; 3], values: &[f64], affine: [[f64; 4]; 3], coded: bool) {
    use ndarray::ShapeBuilder;
    let v = [0, 1, 2].map(|c| (0..3).map(|r| affine[r][c].powi(2)).sum::<f64>().sqrt() as f32);
    let row = |r: usize| [0, 1, 2, 3].map(|c| affine[r][c] as f32);
    let code = if coded { 1 } else { 0 };
    // Axis-aligned references only in these tests: the qform's rotation
    // is the identity (sform carries the full transform in both cases).
    let header = nifti::NiftiHeader {
        pixdim: [1.0, v[0], v[1], v[2], 1.0, 1.0, 1.0, 1.0],
        xyzt_units: 2,
        qform_code: code,
        sform_code: code,
        quatern_x: affine[0][3] as f32,
        quatern_y: affine[1][3] as f32,
        quatern_z: affine[2][3] as f32,
        srow_x: row(0),
        srow_y: row(1),
        srow_z: row(2),
        ..nifti::NiftiHeader::default()
    };
    let f32s: Vec<f32> = values.iter().map(|v| *v as f32).collect();
    let array = ndarray::ArrayView3::from_shape((n[0], n[1], n[2]).f(), &f32s).unwrap();
    nifti::writer::WriterOptions::new(path)
        .reference_header(&header)
        .write_nifti(&array)
        .unwrap();
}

/// tests/fixtures/prior-small.toml (anatomical W, the reference a phantom
/// at 32^3) in `dir`, edited.
fn prior_small(dir: &Path, edit: impl Fn(String) -> String) -> PathBuf {
    let fixtures = repo().join("tests/fixtures");
    let text = std::fs::read_to_string(fixtures.join("prior-small.toml"))
        .unwrap()
        .replace(
            "\"prior-robustness",
            &format!("\"{}/prior-robustness", fixtures.display()),
        )
        .replace("../../out/prior-small", "out");
    let path = dir.join("prior.toml");
    std::fs::write(&path, edit(text)).unwrap();
    path
}

fn run(dir: &Path, cfg: &Path) {
    let o = recon(&["run", "--config", cfg.to_str().unwrap()], dir);
    assert!(o.status.success(), "{}", stderr(&o));
}

#[test]
fn a_reference_at_the_isocentre_gives_what_the_phantoms_own_reference_gives() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let own = prior_small(a.path(), |t| t);
    run(a.path(), &own);
    // The same 32^3 reference as a NIfTI: `recon simulate` keeps it in
    // the scan file's /reference/anatomy, voxel centres (i - 16) 7.5 mm.
    let scan = a.path().join("scan.h5");
    let o = recon(
        &[
            "simulate",
            "--config",
            own.to_str().unwrap(),
            "--out",
            scan.to_str().unwrap(),
        ],
        a.path(),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    common::no_hdf5_locking();
    let anatomy = recon_io::scan::read_scan(&scan, false)
        .unwrap()
        .anatomy
        .unwrap();
    let n = anatomy.grid.n;
    let v = anatomy.grid.voxel_mm();
    let affine = [0, 1, 2].map(|r| {
        let mut row = [0.0; 4];
        row[r] = v[r];
        row[3] = -(n[r] as f64 / 2.0) * v[r];
        row
    });
    let nii = b.path().join("pd.nii");
    write_nifti(&nii, n, &anatomy.values, affine, true);
    let cfg = prior_small(b.path(), |t| {
        t.replace("anatomy = \"", "# anatomy = \"")
            .replace("anatomy_matrix = 32", "")
            + "\n[prior]\nreference = \"pd.nii\"\n"
    });
    run(b.path(), &cfg);
    // Box averaging of a grid twice as fine, and the mean of trilinear
    // samples at the fine grid's voxel centres, are one computation; the
    // NIfTI holds float32.
    let (ra, rb) = (
        common::recon_h5_magnitudes(a.path(), "anatomy"),
        common::recon_h5_magnitudes(b.path(), "anatomy"),
    );
    let peak = ra.iter().cloned().fold(0.0, f64::max);
    for (x, y) in ra.iter().zip(&rb) {
        assert!((x - y).abs() < 1e-6 * peak, "{x} vs {y}");
    }
    let (ia, ib) = (
        common::recon_h5_magnitudes(a.path(), "recon"),
        common::recon_h5_magnitudes(b.path(), "recon"),
    );
    let e = (ia
        .iter()
        .zip(&ib)
        .map(|(x, y)| (x - y).powi(2))
        .sum::<f64>()
        / ia.iter().map(|x| x * x).sum::<f64>())
    .sqrt();
    // The same W but for float32 rounding of the reference.
    assert!(e < 1e-4, "nrmse {e:e}");
}

#[test]
fn a_reference_lands_on_an_oblique_off_centre_slice_where_the_scanner_says() {
    // A linear ramp of RAS position on an axis-aligned 2 mm grid covering
    // the multi-slice fixture; the first image's resampled reference must
    // be the ramp at its voxels' scanner positions.
    let tmp = tempfile::tempdir().unwrap();
    let ramp = |p: [f64; 3]| 1000.0 + 2.0 * p[0] - 1.0 * p[1] + 0.5 * p[2];
    let n = [200, 200, 120];
    let affine = [
        [2.0, 0.0, 0.0, -200.0],
        [0.0, 2.0, 0.0, -200.0],
        [0.0, 0.0, 2.0, -120.0],
    ];
    let values: Vec<f64> = (0..n[0] * n[1] * n[2])
        .map(|i| {
            let c = [i % n[0], (i / n[0]) % n[1], i / (n[0] * n[1])].map(|v| v as f64);
            ramp([0, 1, 2].map(|r| (0..3).map(|k| affine[r][k] * c[k]).sum::<f64>() + affine[r][3]))
        })
        .collect();
    write_nifti(&tmp.path().join("ramp.nii"), n, &values, affine, true);
    let fixture = repo().join("tests/fixtures/multislice-2contrasts.ismrmrd.h5");
    let cfg = tmp.path().join("ms.toml");
    std::fs::write(
        &cfg,
        format!(
            "[scan]\nfile = \"{}\"\nslices = [0]\ncontrasts = [0]\n[prior]\nreference = \"ramp.nii\"\n\
             [regulariser]\nkind = \"anatomical\"\n[solver]\niterations = 5\nlambda = 0.01\n[output]\ndir = \"out\"\n",
            fixture.display()
        ),
    )
    .unwrap();
    run(tmp.path(), &cfg);
    let got = common::recon_h5_magnitudes(tmp.path(), "anatomy");
    common::no_hdf5_locking();
    let s = recon_io::ismrmrd::read_ismrmrd(&fixture, recon_io::ismrmrd::Units::Normalized, false)
        .unwrap();
    let grid = s.grid;
    let a = s.parts[0].geometry.unwrap().affine(&grid);
    for (idx, g) in got.iter().enumerate() {
        let c = [idx % 32, idx / 32, 0].map(|v| v as f64);
        let p = [0, 1, 2].map(|r| (0..3).map(|k| a[r][k] * c[k]).sum::<f64>() + a[r][3]);
        // A linear function: trilinear samples and their mean over the
        // voxel's slab are exact; float32 in the file.
        assert!(
            (g - ramp(p)).abs() < 1e-3,
            "voxel {idx}: {g} vs {}",
            ramp(p)
        );
    }
}

#[test]
fn references_that_cannot_be_placed_are_refused_naming_the_key() {
    let tmp = tempfile::tempdir().unwrap();
    let n = [8, 8, 8];
    let values = vec![1.0; 512];
    // 8 voxels of 5 mm: 40 mm against the run's 240 mm.
    let small = [
        [5.0, 0.0, 0.0, -20.0],
        [0.0, 5.0, 0.0, -20.0],
        [0.0, 0.0, 5.0, -20.0],
    ];
    write_nifti(&tmp.path().join("small.nii"), n, &values, small, true);
    write_nifti(&tmp.path().join("unplaced.nii"), n, &values, small, false);
    std::fs::write(tmp.path().join("junk.nii"), b"not a nifti file").unwrap();
    let without_anatomy = |file: &str| {
        let file = file.to_string();
        move |t: String| {
            t.replace("anatomy = \"", "# anatomy = \"")
                .replace("anatomy_matrix = 32", "")
                + &format!("\n[prior]\nreference = \"{file}\"\n")
        }
    };
    let cases: [(&dyn Fn(String) -> String, &[&str]); 5] = [
        (
            &without_anatomy("small.nii"),
            &["prior.reference", "does not cover"],
        ),
        (
            &without_anatomy("unplaced.nii"),
            &["prior.reference", "qform_code and sform_code 0"],
        ),
        (
            &without_anatomy("junk.nii"),
            &["prior.reference", "junk.nii"],
        ),
        (
            &without_anatomy("missing.nii"),
            &["prior.reference", "missing.nii"],
        ),
        (
            &|t: String| t + "\n[prior]\nreference = \"small.nii\"\n",
            &["prior.reference", "not both"],
        ),
    ];
    for (edit, expect) in cases {
        let cfg = prior_small(tmp.path(), edit);
        let o = recon(&["run", "--config", cfg.to_str().unwrap()], tmp.path());
        fails_with(&o, expect);
        assert!(!tmp.path().join("out").exists(), "nothing written");
    }
}
