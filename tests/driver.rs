//! The `recon` binary: the whole pipeline end to end (config errors are in
//! tests/config_errors.rs).

use crate::common;

use common::{config_with, files_under, interrupt, recon, repo};
use std::path::Path;
use std::process::Command;

#[test]
fn sparse_priors_run_with_their_own_defaults() {
    // No solver settings but the prior: ADMM, its 20 iterations, and the
    // report says what ran.
    let tmp = tempfile::tempdir().unwrap();
    // each at about its best lambda on this problem (wavelets: 22.2 dB at
    // 2e-4, below gridding's 20.7 at 1e-3)
    for (kind, lambda) in [("tv", 0.002), ("wavelet", 0.0002)] {
        std::fs::create_dir_all(tmp.path().join(kind)).unwrap();
        let cfg = config_with(&tmp.path().join(kind), |t| {
            t.replace("iterations = 30\n", "")
                .replace("lambda = 0.01", "")
                + &format!("\n[prior]\nkind = \"{kind}\"\nlambda = {lambda}\n")
        });
        let o = recon(
            &["--config", cfg.to_str().unwrap()],
            &tmp.path().join("cache"),
        );
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let r = report(&tmp.path().join(kind).join("out"));
        assert_eq!(r["prior_kind"], kind);
        assert_eq!(r["algorithm"], "admm");
        assert_eq!(r["lambda"], lambda);
        // tolerance 0: every one of the default 20 iterations runs
        assert_eq!(r["iterations"], 20);
        assert!(String::from_utf8_lossy(&o.stdout).contains("ADMM:"));
        // a prior that helps: above the gridding baseline
        let (p, g) = (
            r["psnr_db"].as_f64().unwrap(),
            r["gridding_psnr_db"].as_f64().unwrap(),
        );
        assert!(p > g, "{kind}: {p} dB, gridding {g} dB");
    }
}

fn report(dir: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("report.json")).unwrap()).unwrap()
}

#[test]
fn small_pipeline_end_to_end() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = tmp.path().join("cache");
    let out_dir = tmp.path().join("out");
    let cfg = repo().join("configs/test-small.toml");
    let args = [
        "--config",
        cfg.to_str().unwrap(),
        "--out",
        out_dir.to_str().unwrap(),
    ];

    let first = recon(&args, &cache);
    let stderr = String::from_utf8_lossy(&first.stderr);
    assert!(first.status.success(), "{stderr}");
    let r = report(&out_dir);
    for key in [
        "psnr_db",
        "percent_error",
        "gridding_psnr_db",
        "gridding_percent_error",
        "iterations",
        "relative_residual",
        "q_cache",
        "seconds",
        "device",
        "matrix",
        "samples",
    ] {
        assert!(r.get(key).is_some(), "report.json lacks {key}");
    }
    for stage in [
        "synthesis",
        "plan",
        "q",
        "fhd",
        "fft_q",
        "prior",
        "cg",
        "gridding",
        "fhd_host",
        "setup",
        "device",
        "kernels",
        "report",
        "outputs",
        "other",
        "total",
    ] {
        assert!(
            r["seconds"][stage].as_f64().unwrap() >= 0.0,
            "seconds.{stage}"
        );
    }
    // Every second of the wall time in one stage, none in two: the stages
    // add up to the total (`other` is what none timed, never negative).
    let seconds = r["seconds"].as_object().unwrap();
    let total = seconds["total"].as_f64().unwrap();
    let stages: f64 = seconds
        .iter()
        .filter(|(k, _)| *k != "total")
        .map(|(_, v)| v.as_f64().unwrap())
        .sum();
    assert!(
        (stages - total).abs() <= 1e-6 * total,
        "stages {stages} s against the total {total} s: {seconds:?}"
    );
    assert_eq!(r["q_cache"], "miss");
    assert_eq!(r["basis"], "box-sinc");
    assert_eq!(r["matrix"], serde_json::json!([16, 16, 16]));
    assert_eq!(r["iterations"], 30);
    let (it, grid) = (
        r["psnr_db"].as_f64().unwrap(),
        r["gridding_psnr_db"].as_f64().unwrap(),
    );
    // Noiseless, iterative must beat gridding clearly. Issue 2 asked for
    // 2 dB, measured against the trilinear gridding baseline that was 2.4
    // times too dark on twisted projections (gridding 19.5 dB here). With
    // the baseline scaled right (20.6 dB) the lead on this 16^3 problem is
    // 1.8 dB, at 30 or 60 iterations alike; the shipped 32^3 Shepp-Logan
    // config keeps 4.3 dB (bench/h100-2026-11-22/). Bound: 1.5 dB.
    assert!(
        it >= grid + 1.5,
        "iterative {it:.2} dB vs gridding {grid:.2} dB"
    );
    let stdout = String::from_utf8_lossy(&first.stdout);
    assert!(
        stdout.contains("iterative") && stdout.contains("gridding"),
        "{stdout}"
    );

    // recon.h5: the documented datasets and attributes.
    let h5 = out_dir.join("recon.h5");
    let f = recon_io::hdf5::File::open(&h5).unwrap();
    for name in ["recon", "gridding", "fhd", "truth"] {
        assert_eq!(f.dataset(name).unwrap().shape(), vec![16, 16, 16], "{name}");
    }
    let truth: Vec<f32> = f.dataset("truth").unwrap().read_raw().unwrap();
    // The truth integrates to the phantom's integral, its analytic D(k = 0)
    // (every Shepp-Logan ellipsoid lies inside the FOV). 3^3 sub-samples per
    // 15 mm voxel misplace boundaries by up to 2.5 mm: about 1% of the volume.
    let phantom = recon_synth::Phantom::load(&repo().join("phantoms/shepp-logan.toml")).unwrap();
    let integral: f64 = truth.iter().map(|v| *v as f64).sum::<f64>() * 15.0f64.powi(3);
    let analytic = phantom.fourier([0.0; 3]).re;
    assert!(
        (integral / analytic - 1.0).abs() < 0.02,
        "truth integral {integral} vs analytic {analytic}"
    );
    let fov: Vec<f64> = f.attr("fov_mm").unwrap().read_raw().unwrap();
    assert_eq!(fov, vec![240.0; 3]);
    drop(f);
    // Only the two outputs: no temporary files left behind.
    let mut names: Vec<String> = std::fs::read_dir(&out_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            ".recon-outputs",
            "gridding.nii",
            "montage.png",
            "recon.h5",
            "recon.nii",
            "report.json",
            "residual.png",
            "truth.nii"
        ]
    );
    // The pictures decode, at the size their layout gives, and show something.
    let decode = |name: &str| {
        let dec = png::Decoder::new(std::io::BufReader::new(
            std::fs::File::open(out_dir.join(name)).unwrap(),
        ));
        let mut reader = dec.read_info().unwrap();
        let mut buf = vec![0; reader.output_buffer_size().unwrap()];
        let info = reader.next_frame(&mut buf).unwrap();
        buf.truncate(info.buffer_size());
        (info.width, info.height, buf)
    };
    let (w, h, px) = decode("montage.png");
    // 4 columns and 3 rows of 16 voxels magnified 10x (a cubic FOV: the
    // same on every axis), each panel with 24 pixels of orientation
    // letters, plus margins.
    assert_eq!((w, h), (80 + 4 * 184 + 8, 28 + 3 * 184 + 76));
    let greys: std::collections::BTreeSet<u8> = px
        .chunks(3)
        .filter(|p| p[0] == p[1] && p[1] == p[2])
        .map(|p| p[0])
        .collect();
    // Slices of a smooth phantom through a 0..255 grey scale use most levels;
    // a blank, saturated or two-tone montage would use a handful.
    assert!(
        greys.len() > 50,
        "montage has only {} grey levels",
        greys.len()
    );
    let (w, h, px) = decode("residual.png");
    assert_eq!((w, h), (720, 440));
    assert!(
        px.chunks(3).any(|p| p == [30, 90, 200]),
        "no residual curve drawn"
    );

    // The same config again: Q comes from the cache, and the result is the same.
    let second = recon(&args, &cache);
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert!(second.status.success(), "{stderr}");
    assert!(stderr.contains("Q: loaded from cache"), "{stderr}");
    let r2 = report(&out_dir);
    assert_eq!(r2["q_cache"], "hit");
    assert_eq!(r2["psnr_db"], r["psnr_db"]);

    // h5py reads it (complex datasets come back as complex).
    let py = "import h5py,sys; f=h5py.File(sys.argv[1]); d=f['recon']; assert d.dtype.kind=='c' and d.shape==(16,16,16), (d.dtype, d.shape); print('h5py ok')";
    match Command::new("/usr/bin/python3")
        .args(["-c", py, h5.to_str().unwrap()])
        .output()
    {
        Ok(o) if String::from_utf8_lossy(&o.stderr).contains("No module named 'h5py'") => {
            println!(
                "h5py check skipped: h5py is not installed (scripts/setup installs python3-h5py)"
            )
        }
        Ok(o) => assert!(
            o.status.success(),
            "h5py failed: {}",
            String::from_utf8_lossy(&o.stderr)
        ),
        Err(_) => println!("h5py check skipped: no /usr/bin/python3"),
    }
}

#[test]
fn q_subcommand_precomputes_then_hits() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = tmp.path().join("cache");
    let cfg = config_with(tmp.path(), |t| t);
    let first = recon(&["q", "--config", cfg.to_str().unwrap()], &cache);
    assert!(
        first.status.success(),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    assert!(String::from_utf8_lossy(&first.stdout).contains("miss"));
    let second = recon(&["q", "--config", cfg.to_str().unwrap()], &cache);
    assert!(String::from_utf8_lossy(&second.stdout).contains("hit"));
    assert!(
        !tmp.path().join("out").exists(),
        "`recon q` writes only the cache"
    );
}

#[test]
fn nifti_outputs_read_by_nibabel() {
    let check = "import nibabel, h5py, numpy";
    match Command::new("python3").args(["-c", check]).output() {
        Ok(o) if o.status.success() => {}
        _ => {
            println!("skipped: python3 with nibabel, h5py and numpy not found (scripts/setup.sh installs them)");
            return;
        }
    }
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    // A non-cubic grid, so that axis order and voxel sizes are really checked.
    let cfg = config_with(tmp.path(), |t| {
        t.replace("matrix = 16", "matrix = [16, 12, 8]")
            .replace("fov_mm = 240.0", "fov_mm = [240.0, 200.0, 160.0]")
    });
    let o = recon(
        &[
            "--config",
            cfg.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ],
        &tmp.path().join("cache"),
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    common::python_check("nifti_check.py", &[&out], "all NIfTI checks passed");
}

/// Files under `dir`, recursively (an absent folder has none).
#[test]
fn ctrl_c_leaves_no_partial_output() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = tmp.path().join("cache");
    // 32^3 in f64: Q takes seconds, long enough to interrupt during it.
    let cfg = config_with(tmp.path(), |t| t.replace("matrix = 16", "matrix = 32"));
    let out = tmp.path().join("out");
    let status = interrupt(
        &[
            "--config",
            cfg.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ],
        &cache,
        &[],
        "device",
        "INT",
    );
    assert_eq!(status.code(), Some(130), "{status:?}");
    assert!(
        files_under(&out).is_empty() && files_under(&cache).is_empty(),
        "{:?}",
        files_under(tmp.path())
    );

    // While every output is staged under its temporary name.
    let cfg = config_with(tmp.path(), |t| t);
    let status = interrupt(
        &[
            "--config",
            cfg.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ],
        &cache,
        &[("RECON_PAUSE_BEFORE_COMMIT_MS", "20000")],
        "outputs staged",
        "INT",
    );
    assert_eq!(status.code(), Some(130), "{status:?}");
    assert!(
        files_under(&out).is_empty(),
        "left behind: {:?}",
        files_under(&out)
    );
    // The Q cache file of that run was complete before the interrupt, and stays.
    assert_eq!(files_under(&cache).len(), 1, "{:?}", files_under(&cache));
}

#[test]
fn validate_writes_the_matrix_checks_and_sweep() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("val");
    let cfg = config_with(tmp.path(), |t| t);
    let o = recon(
        &[
            "validate",
            "--config",
            cfg.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "--lambda-sweep",
            "--sweep-points",
            "3",
            // A margin no run can meet: the check fails, and so does the
            // command, with every output written.
            "--gridding-margin",
            "1000",
        ],
        &tmp.path().join("cache"),
    );
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "a failed check must fail the command");
    assert!(
        stderr.contains("1 check(s) failed") && stderr.contains("over gridding"),
        "{stderr}"
    );
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("validation.json")).unwrap())
            .unwrap();
    // Two data cases x (4 exact-engine rows, 3 NUFFT rows, gridding).
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 16);
    assert!(rows
        .iter()
        .all(|r| r["psnr_db"].as_f64().unwrap().is_finite()));
    // float64 rows are the reference of the others.
    let diff = |method: &str| -> Vec<f64> {
        rows.iter()
            .filter(|r| r["method"] == method)
            .map(|r| r["relative_difference_to_f64"].as_f64().unwrap())
            .collect()
    };
    for (method, bound) in [
        ("exact, CPU float32", 0.05),
        // The NUFFT at 1e-6 is the exact image to far better than float32.
        ("NUFFT 1e-6, CPU float64", 1e-3),
    ] {
        let d = diff(method);
        assert_eq!(d.len(), 2, "{method}: a row per data case");
        assert!(d.iter().all(|&d| d < bound), "{method}: {d:?}");
    }
    // Checks: f32, hardware sin/cos, the NUFFT and the GPU NUFFT per case,
    // and iterative over gridding.
    let checks = v["checks"].as_array().unwrap();
    assert_eq!(checks.len(), 9);
    for c in checks
        .iter()
        .filter(|c| c["what"].as_str().unwrap().contains("NUFFT against exact"))
    {
        assert_eq!(c["passed"], true, "{c}");
    }
    // The margin over gridding is judged only because --gridding-margin asked.
    let margin = checks
        .iter()
        .find(|c| c["what"].as_str().unwrap().contains("over gridding"))
        .unwrap();
    assert_eq!(margin["bound"], ">= 1000 dB");
    assert_eq!(margin["passed"], false);
    assert_eq!(v["lambda_sweep"].as_array().unwrap().len(), 3);
    assert!(v["best_lambda"].as_f64().unwrap() > 0.0);
    for f in ["validation.md", "psnr.png", "residuals.png", "lambda.png"] {
        assert!(out.join(f).exists(), "{f}");
    }
    let md = std::fs::read_to_string(out.join("validation.md")).unwrap();
    assert!(md.contains("| noiseless | gridding |") && md.contains("Best lambda"));
    // Without a GPU the hardware sin/cos check compares two CPU runs: it
    // is marked as not run, never as passed.
    if rows
        .iter()
        .any(|r| r["method"].as_str().unwrap().contains("(no GPU)"))
    {
        let hw: Vec<_> = checks
            .iter()
            .filter(|c| c["what"].as_str().unwrap().contains("hardware"))
            .collect();
        assert_eq!(hw.len(), 2);
        assert!(hw
            .iter()
            .all(|c| c["passed"].is_null() && c["not_run"].is_string()));
        assert!(md.contains("NOT RUN"), "{md}");
    }
}
