//! lambda without a truth: "auto" (the discrepancy principle, GCV where
//! the misfit cannot reach the noise) and "gcv", end to end. The rules'
//! searches are unit-tested in crates/pipeline/src/lambda.rs and
//! lambda/gcv.rs against closed forms; here, runs choose and report, and
//! `validate --auto-lambda` holds the choice against a sweep of the truth.

use crate::common;

use common::*;
use std::path::Path;

fn report(out: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap()
}

/// test-small, noisy (SNR 30), lambda from `lambda` (a TOML value; none: the default).
fn noisy(dir: &Path, lambda: Option<&str>) -> std::path::PathBuf {
    config_with(dir, |t| {
        let t = t.replace(
            "lambda = 0.01",
            &lambda.map_or(String::new(), |l| format!("lambda = {l}")),
        );
        t + "\n[noise]\nsnr = 30.0\nseed = 4\n"
    })
}

#[test]
fn auto_is_the_default_and_reports_its_rule_and_candidates() {
    let tmp = tempfile::tempdir().unwrap();
    let cfg = noisy(tmp.path(), None);
    let o = recon(
        &["--config", cfg.to_str().unwrap()],
        &tmp.path().join("cache"),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let r = report(&tmp.path().join("out"));
    let rule = r["lambda_rule"].as_str().unwrap();
    assert!(
        rule.starts_with("discrepancy principle") && rule.contains("noise data"),
        "{rule}"
    );
    // The chosen lambda is one of the candidates, whose misfit met the
    // target within 2%.
    let lambda = r["lambda"].as_f64().unwrap();
    let tried = r["lambda_tried"].as_array().unwrap();
    let chosen = tried
        .iter()
        .find(|t| t[0].as_f64() == Some(lambda))
        .expect("tried");
    assert!(
        (chosen[1].as_f64().unwrap() - 1.0).abs() <= 0.02,
        "{chosen}"
    );
    assert!(r["lambda_unmet"].is_null());
    assert!(String::from_utf8_lossy(&o.stdout).contains("(discrepancy principle"));
}

#[test]
fn auto_and_gcv_come_within_a_db_of_the_best_lambda_in_hindsight() {
    // validate --auto-lambda sweeps the config's prior against the truth
    // and fails (exit 1) when "auto" falls more than 1 dB below the best.
    let tmp = tempfile::tempdir().unwrap();
    let cfg = noisy(tmp.path(), Some("0.01"));
    let out = tmp.path().join("v");
    let o = recon(
        &[
            "validate",
            "--config",
            cfg.to_str().unwrap(),
            "--sweeps-only",
            "--auto-lambda",
            "--out",
            out.to_str().unwrap(),
        ],
        &tmp.path().join("cache"),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("validation.json")).unwrap())
            .unwrap();
    let a = &v["auto_lambda"];
    let best = a["best_psnr_db"].as_f64().unwrap();
    // measured: 0.20 dB below the best for "auto", 0.74 for "gcv"
    assert!(best - a["psnr_db"].as_f64().unwrap() <= 1.0, "{a}");
    assert!(best - a["gcv"][1].as_f64().unwrap() <= 1.0, "{a}");
}

#[test]
fn noise_beyond_the_noise_data_falls_back_to_gcv() {
    // A scan whose noise covariance says 1e-6 of its true noise power: the
    // misfit cannot reach that target, so the quadratic prior takes GCV.
    let tmp = tempfile::tempdir().unwrap();
    no_hdf5_locking();
    let cfg = noisy(tmp.path(), None);
    let scan = tmp.path().join("scan.h5");
    let o = recon(
        &[
            "simulate",
            "--config",
            cfg.to_str().unwrap(),
            "--out",
            scan.to_str().unwrap(),
        ],
        &tmp.path().join("cache"),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    {
        let f = recon_io::hdf5::File::open_rw(&scan).unwrap();
        let d = f.dataset("kspace/noise_covariance").unwrap();
        let v: Vec<f32> = d.read_raw().unwrap();
        d.write_raw(&v.iter().map(|x| x * 1e-6).collect::<Vec<f32>>())
            .unwrap();
    }
    let out = tmp.path().join("out2");
    let o = recon(
        &[
            scan.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "--iterations",
            "20",
        ],
        &tmp.path().join("cache"),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let r = report(&out);
    assert!(
        r["lambda_rule"]
            .as_str()
            .unwrap()
            .starts_with("generalised cross-validation"),
        "{}",
        r["lambda_rule"]
    );
    assert!(
        r["lambda_unmet"]
            .as_str()
            .unwrap()
            .contains("discrepancy principle"),
        "{}",
        r["lambda_unmet"]
    );
    assert!(
        stderr(&o).contains("choosing by generalised cross-validation"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn without_noise_data_the_outer_kspace_gives_the_noise_and_gcv_needs_a_quadratic_prior() {
    let tmp = tempfile::tempdir().unwrap();
    let cfg = config_with(tmp.path(), |t| t.replace("lambda = 0.01", ""));
    let o = recon(
        &["--config", cfg.to_str().unwrap()],
        &tmp.path().join("cache"),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let r = report(&tmp.path().join("out"));
    assert!(
        r["lambda_rule"]
            .as_str()
            .unwrap()
            .contains("estimated from the outer k-space"),
        "{}",
        r["lambda_rule"]
    );
    // "gcv" with a sparse prior: refused, naming the key, nothing written.
    let out = tmp.path().join("tv");
    let o = recon(
        &[
            "--config",
            cfg.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "--prior",
            "tv",
            "--lambda",
            "gcv",
        ],
        &tmp.path().join("cache"),
    );
    fails_with(&o, &["solver.lambda", "\"gcv\" is for the quadratic prior"]);
    assert!(!out.exists());
    // A value that is neither: the flag says what it takes.
    let o = recon(
        &["--config", cfg.to_str().unwrap(), "--lambda", "best"],
        &tmp.path().join("cache"),
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("auto or gcv"), "{}", stderr(&o));
}
