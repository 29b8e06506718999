//! SENSE end to end: multi-coil runs of the driver (with the uniform W and
//! with total variation), the coil settings' errors, a simulated
//! multi-coil scan file, and validate's comparison of SENSE with each coil
//! alone.

use crate::common;

use common::*;

fn report(dir: &std::path::Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("out/report.json")).unwrap()).unwrap()
}

#[test]
fn four_coil_run_beats_its_gridding_and_reports_its_coils() {
    let tmp = tempfile::tempdir().unwrap();
    let cfg = config_with(tmp.path(), |t| {
        // lambda 0.3: the data are noisy (lambda 0.01 suits the noiseless
        // single-coil run of this config).
        t.replace("matrix = 16", "matrix = 24")
            .replace("lambda = 0.01", "lambda = 0.3")
            .replace(
                "[solver]",
                "[noise]\nsnr = 20.0\nseed = 2\n[coils]\ncount = 4\nnoise_correlation = 0.3\n[solver]",
            )
            .replace("dir = \"out\"", "dir = \"out\"\nmaps_nifti = true")
    });
    let out = recon(
        &["--config", cfg.to_str().unwrap()],
        &tmp.path().join("cache"),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let r = report(tmp.path());
    assert_eq!(r["coils"], 4);
    assert_eq!(r["maps"], "estimate");
    // One CPU: the coils stay on one device.
    assert_eq!(r["coil_devices"], 1);
    let (it, gr) = (
        r["psnr_db"].as_f64().unwrap(),
        r["gridding_psnr_db"].as_f64().unwrap(),
    );
    println!("4 coils, 24^3: SENSE {it:.2} dB, gridding (root sum of squares) {gr:.2} dB");
    // Estimated maps gave 20.9 dB against the gridding's 17.9 dB when this
    // was written (true maps: 23.5 dB); 1 dB is well clear of chance.
    assert!(it > gr + 1.0, "SENSE {it} vs gridding {gr}");
    assert!(r["seconds"]["maps"].as_f64().is_some());
    // The maps SENSE used are in recon.h5, [C, Nz, Ny, Nx]: estimated maps
    // are normalised, their root sum of squares 1 wherever it is not 0.
    let f = recon_io::hdf5::File::open(tmp.path().join("out/recon.h5")).unwrap();
    let ds = f.dataset("coil_maps").unwrap();
    assert_eq!(ds.shape(), [4, 24, 24, 24]);
    let maps: Vec<recon_core::Complex<f32>> = ds.read_raw().unwrap();
    let voxels = 24 * 24 * 24;
    let rss: Vec<f32> = (0..voxels)
        .map(|v| {
            (0..4)
                .map(|c| maps[c * voxels + v].norm_sqr())
                .sum::<f32>()
                .sqrt()
        })
        .collect();
    // float32 storage of unit-norm maps.
    assert!(
        rss.iter().all(|r| *r == 0.0 || (r - 1.0).abs() < 1e-5),
        "{:?}",
        &rss[..8]
    );
    assert!(rss.iter().filter(|r| **r > 0.5).count() > voxels / 2);
    // And, asked for, as a 4-D NIfTI: one volume per coil, the magnitudes.
    let nii = std::fs::read(tmp.path().join("out/maps.nii")).unwrap();
    let dim: Vec<i16> = (0..5)
        .map(|i| i16::from_le_bytes([nii[40 + 2 * i], nii[41 + 2 * i]]))
        .collect();
    assert_eq!(dim, [4, 24, 24, 24, 4]);
}

#[test]
fn four_coil_run_with_total_variation() {
    // SENSE with TV by ADMM (unpreconditioned: the circulant models no
    // coil maps) against SENSE with the uniform W, on the same noisy data.
    let tmp = tempfile::tempdir().unwrap();
    let run = |prior: &str| {
        let cfg = config_with(tmp.path(), |t| {
            t.replace("matrix = 16", "matrix = 24")
                .replace("lambda = 0.01", "")
                .replace(
                    "[solver]",
                    "[noise]\nsnr = 20.0\nseed = 2\n[coils]\ncount = 4\nnoise_correlation = 0.3\n[solver]",
                )
                + prior
        });
        let out = recon(
            &["--config", cfg.to_str().unwrap()],
            &tmp.path().join("cache"),
        );
        assert!(out.status.success(), "{}", stderr(&out));
        report(tmp.path())
    };
    let quadratic = run("\n[prior]\nlambda = 0.3\n");
    let tv = run("\n[prior]\nkind = \"tv\"\nlambda = 0.003\n");
    assert_eq!(
        (tv["coils"].as_u64(), tv["algorithm"].as_str()),
        (Some(4), Some("admm"))
    );
    let (q, t) = (
        quadratic["psnr_db"].as_f64().unwrap(),
        tv["psnr_db"].as_f64().unwrap(),
    );
    println!("4 coils, 24^3: SENSE with the uniform W {q:.2} dB, with TV {t:.2} dB");
    // The piecewise-constant phantom favours TV: 21.95 against 20.82 dB
    // when this was written; 0.5 dB is well clear of chance.
    assert!(t > q + 0.5, "TV {t} vs uniform W {q}");
}

#[test]
fn coil_settings_are_checked() {
    for (edit, expect) in [
        (
            "[coils]\ncount = 0\n",
            vec!["coils", "count must be 1 to 128"],
        ),
        (
            "[coils]\ncount = 4\nnoise_correlation = 1.0\n",
            vec!["coils.noise_correlation", "[0, 1)"],
        ),
        (
            "[coils]\ncount = 4\narrangement = \"cage\"\n",
            vec!["coils.arrangement", "ring"],
        ),
        (
            "[sense]\nmaps = \"given\"\n",
            vec!["sense.maps", "needs [coils]"],
        ),
        ("[sense]\nsmoothing = 4\n", vec!["sense.smoothing", "odd"]),
        ("[sense]\ncalibration = -1.0\n", vec!["sense.calibration"]),
        (
            "[sense]\ncompress_coils = 2\ncompress_energy = 0.9\n",
            vec!["sense.compress_energy", "not both"],
        ),
        (
            "[sense]\ncompress_energy = 1.5\n",
            vec!["sense.compress_energy", "(0, 1]"],
        ),
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let cfg = config_with(tmp.path(), |t| {
            t.replace("[solver]", &format!("{edit}[solver]"))
        });
        let out = recon(
            &["--config", cfg.to_str().unwrap()],
            &tmp.path().join("cache"),
        );
        fails_with(&out, &expect);
        assert!(!tmp.path().join("out").exists(), "{edit}: output written");
    }
}

#[test]
fn a_simulated_multi_coil_scan_file_reconstructs_as_the_synthetic_run() {
    // recon simulate writes the coils' raw data, their noise covariance and
    // sensitivities (version 2); reconstructing the file whitens and
    // estimates maps as the synthetic run does, so the two runs agree.
    let tmp = tempfile::tempdir().unwrap();
    let edit = |t: String| {
        t.replace("lambda = 0.01", "lambda = 0.3").replace(
            "[solver]",
            "[noise]\nsnr = 20.0\nseed = 2\n[coils]\ncount = 3\nnoise_correlation = 0.3\n[solver]",
        )
    };
    let cfg = config_with(tmp.path(), edit);
    let file = tmp.path().join("scan.h5");
    let out = recon(
        &[
            "simulate",
            "--config",
            cfg.to_str().unwrap(),
            "--out",
            file.to_str().unwrap(),
        ],
        &tmp.path().join("cache"),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let scan = recon_io::scan::read_scan(&file, false).unwrap();
    assert_eq!(scan.coils, 3);
    assert!(matches!(
        scan.noise,
        Some(recon_io::scan::CoilNoise::Covariance(_))
    ));
    assert!(scan.maps.is_some());
    let out = recon(
        &["--config", cfg.to_str().unwrap()],
        &tmp.path().join("cache"),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let synthetic = report(tmp.path());
    std::fs::remove_dir_all(tmp.path().join("out")).unwrap();
    let run = scan_run_config(
        tmp.path(),
        &file,
        "[engine]\nprecision = \"f64\"\n[solver]\niterations = 30\nlambda = 0.3\n",
    );
    // scan_run_config writes its own [solver]: keep the one given here.
    let text = std::fs::read_to_string(&run)
        .unwrap()
        .replace("[solver]\niterations = 5\n", "");
    std::fs::write(&run, text).unwrap();
    let out = recon(
        &["--config", run.to_str().unwrap()],
        &tmp.path().join("cache"),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let from_file = report(tmp.path());
    assert_eq!(from_file["coils"], 3);
    assert_eq!(from_file["prewhitened"], true);
    let (a, b) = (
        synthetic["psnr_db"].as_f64().unwrap(),
        from_file["psnr_db"].as_f64().unwrap(),
    );
    // The file stores float32: the runs differ by its rounding only.
    assert!(
        (a - b).abs() < 0.01,
        "synthetic {a} dB, from the file {b} dB"
    );
}

#[test]
fn validate_compares_sense_with_each_coil_alone_and_gridding() {
    // configs/sodium-8coils.toml shrunk to 24^3 and 15,000 samples, 20 CG
    // iterations, 3 lambdas: SENSE (uniform and anatomical W) beside each
    // coil reconstructed alone and combined by the root sum of squares.
    let tmp = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(repo().join("configs/sodium-8coils.toml"))
        .unwrap()
        .replace(
            "\"../phantoms/",
            &format!("\"{}/phantoms/", repo().display()),
        )
        .replace("matrix = 48", "matrix = 24")
        .replace("anatomy_matrix = 96", "anatomy_matrix = 48")
        .replace("projections = 1200", "projections = 300")
        .replace("samples = 100", "samples = 50")
        .replace("iterations = 60", "iterations = 20")
        .replace("../out/sodium-8coils", "out");
    let cfg = tmp.path().join("v8.toml");
    std::fs::write(&cfg, text).unwrap();
    let out = recon(
        &[
            "validate",
            "--config",
            cfg.to_str().unwrap(),
            "--priors",
            "--sweeps-only",
            "--sweep-points",
            "3",
            "--lambda-min",
            "0.1",
            "--lambda-max",
            "10",
        ],
        &tmp.path().join("cache"),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(tmp.path().join("out/validation.json")).unwrap(),
    )
    .unwrap();
    let rows = v["priors"]["rows"].as_array().unwrap();
    let psnr = |m: &str| {
        rows.iter()
            .find(|r| r["method"].as_str().unwrap().starts_with(m))
            .unwrap_or_else(|| panic!("no row {m}: {rows:?}"))["psnr_db"]
            .as_f64()
            .unwrap()
    };
    let (g, u, c, a) = (
        psnr("gridding"),
        psnr("uniform W"),
        psnr("each coil alone"),
        psnr("anatomical W"),
    );
    println!("24^3, 8 coils: gridding {g:.2}, each coil alone {c:.2}, SENSE {u:.2}, anatomical {a:.2} dB");
    // When this was written: 26.6, 28.3, 29.2 and 31.9 dB.
    assert!(u > c && u > g && a > u, "{g} {c} {u} {a}");
    for check in v["checks"].as_array().unwrap() {
        assert_eq!(check["passed"], true, "{check}");
    }
}

#[test]
fn espirit_on_a_grid_too_thin_for_its_calibration_says_so() {
    // 24 x 24 x 8: the calibration radius is capped at 8 / 4 = 2 cycles/FOV,
    // a region of 4^3 samples, too small for ESPIRiT's kernel of 5: no
    // voxel keeps a map. It said "the largest sum of |S_c|^2 is 0".
    let tmp = tempfile::tempdir().unwrap();
    let phantom = repo().join("phantoms/shepp-logan.toml");
    let cfg = tmp.path().join("c.toml");
    std::fs::write(
        &cfg,
        format!(
            "[grid]\nmatrix = [24, 24, 8]\nfov_mm = 240.0\n[phantom]\nfile = \"{}\"\n\
             [trajectory]\nkind = \"radial\"\nspokes = 400\nsamples = 32\n\
             [noise]\nsnr = 30.0\nseed = 1\n[coils]\ncount = 4\narrangement = \"ring\"\nradius = 1.2\n\
             [sense]\nmaps = \"espirit\"\n[solver]\niterations = 10\nlambda = 0.01\n[output]\ndir = \"out\"\n",
            phantom.display().to_string().replace('\\', "/")
        ),
    )
    .unwrap();
    let o = recon(
        &["--config", cfg.to_str().unwrap()],
        &tmp.path().join("cache"),
    );
    fails_with(
        &o,
        &[
            "ESPIRiT",
            "sense.maps",
            "[4, 4, 4]",
            "sense.calibration",
            "\"estimate\"",
        ],
    );
    assert!(!tmp.path().join("out").exists());
}
