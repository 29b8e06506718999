//! Scan files: written by `recon simulate` or by h5py, reconstructed with
//! `[scan] file = ...`; and every kind of bad file, each named.

use crate::common;

use common::{recon, repo};
use recon_io::hdf5;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn ok(o: &Output) -> String {
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The small test config, as a synthetic source.
fn synthetic_config(dir: &Path) -> PathBuf {
    let text = std::fs::read_to_string(repo().join("configs/test-small.toml")).unwrap();
    let text = text.replace(
        "../phantoms/shepp-logan.toml",
        &repo()
            .join("phantoms/shepp-logan.toml")
            .display()
            .to_string(),
    );
    let p = dir.join("synthetic.toml");
    std::fs::write(&p, text).unwrap();
    p
}

/// A config reconstructing `scan`, plus `extra` lines.
fn scan_config(dir: &Path, scan: &Path, extra: &str) -> PathBuf {
    let p = dir.join("scan.toml");
    std::fs::write(
        &p,
        format!(
            "[scan]\nfile = \"{}\"\n{extra}\n[engine]\nprecision = \"f64\"\n[solver]\niterations = 30\nlambda = 0.01\n[output]\ndir = \"out\"\n",
            scan.display()
        ),
    )
    .unwrap();
    p
}

/// `recon simulate` of `synth` into `scan`.
fn simulate(synth: &Path, scan: &Path, cache: &Path) -> String {
    ok(&recon(
        &[
            "simulate",
            "--config",
            synth.to_str().unwrap(),
            "--out",
            scan.to_str().unwrap(),
        ],
        cache,
    ))
}

fn report(dir: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("report.json")).unwrap()).unwrap()
}

#[test]
fn simulated_scan_reconstructs_like_the_synthetic_run_and_hits_the_cache() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = tmp.path().join("cache");
    let synth = synthetic_config(tmp.path());
    let scan = tmp.path().join("scan.h5");
    let s = ok(&recon(
        &[
            "simulate",
            "--config",
            synth.to_str().unwrap(),
            "--out",
            scan.to_str().unwrap(),
        ],
        &cache,
    ));
    assert!(s.contains("6000 samples"), "{s}");
    ok(&recon(
        &[
            "--config",
            synth.to_str().unwrap(),
            "--out",
            tmp.path().join("a").to_str().unwrap(),
        ],
        &cache,
    ));
    let direct = report(&tmp.path().join("a"));

    let cfg = scan_config(tmp.path(), &scan, "");
    let out = tmp.path().join("b");
    let first = recon(
        &[
            "--config",
            cfg.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ],
        &cache,
    );
    ok(&first);
    let r = report(&out);
    assert_eq!(r["truth"], true);
    // The file stores float32: PSNR agrees with the float64 synthetic run to rounding.
    let (a, b) = (
        direct["psnr_db"].as_f64().unwrap(),
        r["psnr_db"].as_f64().unwrap(),
    );
    assert!((a - b).abs() < 0.01, "synthetic {a} vs scan {b}");
    assert_eq!(r["samples"], 6000);
    // The same trajectory again: Q comes from the cache.
    let second = recon(
        &[
            "--config",
            cfg.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ],
        &cache,
    );
    assert!(String::from_utf8_lossy(&second.stderr).contains("Q: loaded from cache"));
    assert_eq!(report(&out)["q_cache"], "hit");
}

#[test]
fn scan_without_truth_reports_none_and_recon_h5_can_hold_q() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = tmp.path().join("cache");
    let synth = synthetic_config(tmp.path());
    let scan = tmp.path().join("scan.h5");
    simulate(&synth, &scan, &cache);
    // Drop /reference: a scan of a patient has no truth.
    // Closed explicitly: HDF5 locks a file open for writing against other processes.
    let f = hdf5::File::open_rw(&scan).unwrap();
    f.unlink("reference").unwrap();
    f.close().unwrap();
    let cfg = scan_config(tmp.path(), &scan, "");
    std::fs::write(
        &cfg,
        std::fs::read_to_string(&cfg)
            .unwrap()
            .replace("dir = \"out\"", "dir = \"out\"\nq = true"),
    )
    .unwrap();
    let stdout = ok(&recon(&["--config", cfg.to_str().unwrap()], &cache));
    assert!(stdout.contains("no true image"), "{stdout}");
    let out = tmp.path().join("out");
    let r = report(&out);
    assert_eq!(r["truth"], false);
    assert!(r["psnr_db"].is_null() && r["gridding_psnr_db"].is_null());
    let f = hdf5::File::open(out.join("recon.h5")).unwrap();
    assert_eq!(f.dataset("q").unwrap().shape(), vec![32, 32, 32]);
    assert!(f.dataset("truth").is_err(), "no truth to store");
}

#[test]
fn scan_written_by_h5py_is_read() {
    let tmp = tempfile::tempdir().unwrap();
    let scan = tmp.path().join("h5py.h5");
    // A 16^3 grid, radial-ish samples within Nyquist, data of a point at the centre.
    let py = r#"
import sys, numpy as np, h5py
rng = np.random.default_rng(1)
k = rng.uniform(-8, 8, size=(4000, 3)).astype(np.float32)
d = np.zeros((4000, 2), np.float32); d[:, 0] = 1.0
with h5py.File(sys.argv[1], "w") as f:
    g = f.create_group("kspace")
    g["trajectory"] = k
    g["data"] = d
    g.attrs["fov_mm"] = np.array([200.0, 200.0, 200.0])
    g.attrs["matrix"] = np.array([16, 16, 16], np.int32)
"#;
    match Command::new("/usr/bin/python3")
        .args(["-c", py, scan.to_str().unwrap()])
        .output()
    {
        Ok(o) if o.status.success() => {}
        Ok(o) if String::from_utf8_lossy(&o.stderr).contains("No module named") => {
            println!("skipped: h5py or numpy missing (scripts/setup.sh installs python3-h5py)");
            return;
        }
        Ok(o) => panic!("{}", String::from_utf8_lossy(&o.stderr)),
        Err(_) => {
            println!("skipped: no /usr/bin/python3");
            return;
        }
    }
    let cfg = scan_config(tmp.path(), &scan, "");
    let stdout = ok(&recon(
        &["--config", cfg.to_str().unwrap()],
        &tmp.path().join("cache"),
    ));
    assert!(stdout.contains("4000 samples"), "{stdout}");
    // Constant data: a delta at the centre voxel, which must be the brightest.
    let f = hdf5::File::open(tmp.path().join("out/recon.h5")).unwrap();
    let img: Vec<recon_core::Complex<f32>> = f.dataset("recon").unwrap().read_raw().unwrap();
    let peak = (0..img.len())
        .max_by(|&a, &b| img[a].norm().total_cmp(&img[b].norm()))
        .unwrap();
    assert_eq!(peak, (8 * 16 + 8) * 16 + 8);
}

/// Writes a scan file from parts, for the bad cases.
struct Parts {
    traj: Option<(Vec<usize>, Vec<f32>)>,
    data_int: bool,
    data: Option<(Vec<usize>, Vec<f32>)>,
    matrix: Vec<i64>,
    truth: Option<(Vec<usize>, Vec<f32>)>,
}

impl Parts {
    fn good() -> Self {
        let m = 50;
        let traj: Vec<f32> = (0..3 * m)
            .map(|i| ((i * 7 % 13) as f32 - 6.0) * 0.5)
            .collect();
        Parts {
            traj: Some((vec![m, 3], traj)),
            data_int: false,
            data: Some((vec![m, 2], vec![0.5; 2 * m])),
            matrix: vec![8, 8, 8],
            truth: Some((vec![8, 8, 8], vec![1.0; 512])),
        }
    }

    fn write(&self, path: &Path) {
        let f = hdf5::File::create(path).unwrap();
        let g = f.create_group("kspace").unwrap();
        if let Some((s, v)) = &self.traj {
            g.new_dataset::<f32>()
                .shape(s.clone())
                .create("trajectory")
                .unwrap()
                .write_raw(v)
                .unwrap();
        }
        if let Some((s, v)) = &self.data {
            if self.data_int {
                let v: Vec<i32> = v.iter().map(|x| *x as i32).collect();
                g.new_dataset::<i32>()
                    .shape(s.clone())
                    .create("data")
                    .unwrap()
                    .write_raw(&v)
                    .unwrap();
            } else {
                g.new_dataset::<f32>()
                    .shape(s.clone())
                    .create("data")
                    .unwrap()
                    .write_raw(v)
                    .unwrap();
            }
        }
        g.new_attr::<f64>()
            .shape([3])
            .create("fov_mm")
            .unwrap()
            .write_raw(&[200.0, 200.0, 200.0])
            .unwrap();
        g.new_attr::<i64>()
            .shape([self.matrix.len()])
            .create("matrix")
            .unwrap()
            .write_raw(&self.matrix)
            .unwrap();
        if let Some((s, v)) = &self.truth {
            let r = f.create_group("reference").unwrap();
            r.new_dataset::<f32>()
                .shape(s.clone())
                .create("truth")
                .unwrap()
                .write_raw(v)
                .unwrap();
        }
    }
}

#[test]
fn bad_scan_files_are_named_and_nothing_is_written() {
    let tmp = tempfile::tempdir().unwrap();
    let mut cases: Vec<(&str, Parts, &str, &[&str])> = Vec::new();
    let mut p = Parts::good();
    p.traj = None;
    cases.push(("missing", p, "", &["kspace/trajectory", "missing"]));
    let mut p = Parts::good();
    p.traj = Some((vec![75, 2], vec![0.0; 150]));
    cases.push((
        "shape",
        p,
        "",
        &["kspace/trajectory", "shape [75, 2]", "expected [M, 3]"],
    ));
    let mut p = Parts::good();
    p.data_int = true;
    cases.push(("dtype", p, "", &["kspace/data", "float32 or float64"]));
    let mut p = Parts::good();
    p.data.as_mut().unwrap().1[17] = f32::NAN;
    cases.push(("nan", p, "", &["kspace/data", "NaN", "index 17"]));
    let mut p = Parts::good();
    p.traj.as_mut().unwrap().1[4] = f32::INFINITY;
    cases.push(("inf", p, "", &["kspace/trajectory", "inf"]));
    let mut p = Parts::good();
    p.traj.as_mut().unwrap().1[5] = 4.5; // kz of sample 1, beyond 8/2
    cases.push((
        "nyquist",
        p,
        "",
        &[
            "kspace/trajectory",
            "beyond Nyquist",
            "allow_beyond_nyquist",
        ],
    ));
    let mut p = Parts::good();
    p.data = Some((vec![49, 2], vec![0.5; 98]));
    cases.push(("count", p, "", &["kspace/data", "49 samples", "50"]));
    let mut p = Parts::good();
    p.truth = Some((vec![8, 8, 4], vec![1.0; 256]));
    cases.push(("truth", p, "", &["reference/truth", "[8, 8, 4]", "matrix"]));
    let mut p = Parts::good();
    p.matrix = vec![8, 8];
    cases.push(("matrix", p, "", &["matrix", "expected 3"]));
    cases.push((
        "grid",
        Parts::good(),
        "[grid]\nmatrix = 16\nfov_mm = 200.0\n",
        &["grid", "disagree"],
    ));
    for (name, parts, extra, expect) in cases {
        let dir = tmp.path().join(name);
        std::fs::create_dir(&dir).unwrap();
        let scan = dir.join("scan.h5");
        parts.write(&scan);
        let cfg = scan_config(&dir, &scan, "");
        let text = std::fs::read_to_string(&cfg).unwrap();
        std::fs::write(&cfg, format!("{extra}{text}")).unwrap();
        let o = recon(&["--config", cfg.to_str().unwrap()], &dir.join("cache"));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{name}: accepted");
        for e in expect {
            assert!(err.contains(e), "{name}: error should mention {e:?}: {err}");
        }
        assert!(
            !dir.join("out").exists() && !dir.join("cache").exists(),
            "{name}: wrote output"
        );
    }
    // Beyond Nyquist with the opt-in is accepted.
    let dir = tmp.path().join("opt-in");
    std::fs::create_dir(&dir).unwrap();
    let mut p = Parts::good();
    p.traj.as_mut().unwrap().1[5] = 4.5;
    p.write(&dir.join("scan.h5"));
    let cfg = scan_config(&dir, &dir.join("scan.h5"), "allow_beyond_nyquist = true");
    ok(&recon(
        &["--config", cfg.to_str().unwrap()],
        &dir.join("cache"),
    ));
}

#[test]
fn ismrmrd_fixture_from_the_reference_implementation_reconstructs() {
    // tests/fixtures/test-small.ismrmrd.h5 was written by the ismrmrd Python
    // package (scripts/make-ismrmrd-fixture.py) from `recon simulate` of
    // configs/test-small.toml, with a noise scan first. Reconstructing it
    // must give what the scan file it came from gives.
    let tmp = tempfile::tempdir().unwrap();
    let cache = tmp.path().join("cache");
    let synth = synthetic_config(tmp.path());
    let scan = tmp.path().join("scan.h5");
    simulate(&synth, &scan, &cache);
    let fixture = repo().join("tests/fixtures/test-small.ismrmrd.h5");
    let from_scan = scan_config(tmp.path(), &scan, "");
    ok(&recon(
        &[
            "--config",
            from_scan.to_str().unwrap(),
            "--out",
            tmp.path().join("a").to_str().unwrap(),
        ],
        &cache,
    ));
    let from_ismrmrd = scan_config(tmp.path(), &fixture, "trajectory_units = \"normalized\"");
    let stdout = ok(&recon(
        &[
            "--config",
            from_ismrmrd.to_str().unwrap(),
            "--out",
            tmp.path().join("b").to_str().unwrap(),
        ],
        &cache,
    ));
    // 150 projections of 40 samples; the 40 samples of the noise scan are skipped.
    assert!(
        stdout.contains("6000 samples") && stdout.contains("matrix [16, 16, 16]"),
        "{stdout}"
    );
    assert!(stdout.contains("no true image"), "{stdout}");
    let read = |d: &str| -> Vec<recon_core::Complex<f64>> {
        let f = hdf5::File::open(tmp.path().join(d).join("recon.h5")).unwrap();
        let v: Vec<recon_core::Complex<f32>> = f.dataset("recon").unwrap().read_raw().unwrap();
        v.iter()
            .map(|c| recon_core::Complex::new(c.re as f64, c.im as f64))
            .collect()
    };
    let err = recon_core::metrics::nrmse(&read("b"), &read("a"));
    // The same float32 samples; normalised k times 16 is exact in float32.
    assert!(
        err < 1e-6,
        "ISMRMRD vs scan file: {err:e} (regenerate the fixture if synthesis changed)"
    );

    // Taken as cycles/FOV instead, the normalised trajectory is tiny but valid.
    let wrong = scan_config(
        tmp.path(),
        &fixture,
        "trajectory_units = \"cycles_per_fov\"",
    );
    ok(&recon(
        &[
            "--config",
            wrong.to_str().unwrap(),
            "--out",
            tmp.path().join("c").to_str().unwrap(),
        ],
        &cache,
    ));
}

#[test]
fn bench_nufft_times_a_scan_file_and_checks_its_options() {
    let tmp = tempfile::tempdir().unwrap();
    let synth = common::config_with(tmp.path(), |t| t);
    let scan = tmp.path().join("scan.h5");
    simulate(&synth, &scan, tmp.path());
    let s = scan.to_str().unwrap();
    for precision in ["f64", "f32"] {
        let out = ok(&recon(
            &[
                "bench-nufft",
                "--scan",
                s,
                "--precision",
                precision,
                "--repeats",
                "1",
            ],
            tmp.path(),
        ));
        let v: serde_json::Value =
            serde_json::from_str(out.trim().lines().last().unwrap()).unwrap();
        assert_eq!(v["precision"], precision);
        assert_eq!(v["samples"], 6000);
        for k in [
            "plan_s",
            "type1_s",
            "type2_s",
            "q_s",
            "type1_norm",
            "type2_norm",
            "q_norm",
        ] {
            let x = v[k].as_f64().unwrap();
            assert!(x.is_finite() && x > 0.0, "{k}: {x}");
        }
    }
    for (args, expect) in [
        (&["--tolerance", "0.5"][..], "[1e-14, 1e-1]"),
        (
            &["--precision", "f32", "--tolerance", "1e-8"][..],
            "float32",
        ),
        (&["--repeats", "0"][..], "--repeats"),
    ] {
        let mut a = vec!["bench-nufft", "--scan", s];
        a.extend_from_slice(args);
        common::fails_with(&recon(&a, tmp.path()), &[expect]);
    }
}

#[test]
fn multi_coil_ismrmrd_fixture_gives_every_channel_and_its_noise() {
    // tests/fixtures/test-small-3coils.ismrmrd.h5: the ismrmrd package's
    // file of `recon simulate` of configs/test-small.toml with 3 coils
    // (noise SNR 20, correlation 0.3), each acquisition holding 3 channels,
    // after 8 noise acquisitions drawn with the file's covariance.
    let tmp = tempfile::tempdir().unwrap();
    let cache = tmp.path().join("cache");
    let text = std::fs::read_to_string(synthetic_config(tmp.path()))
        .unwrap()
        .replace("lambda = 0.01", "lambda = 0.3")
        .replace(
            "[solver]",
            "[noise]\nsnr = 20.0\nseed = 2\n[coils]\ncount = 3\nnoise_correlation = 0.3\n[solver]",
        );
    let synth = tmp.path().join("coils.toml");
    std::fs::write(&synth, text).unwrap();
    let scan = tmp.path().join("scan.h5");
    simulate(&synth, &scan, &cache);
    let fixture = repo().join("tests/fixtures/test-small-3coils.ismrmrd.h5");
    let s = recon_io::scan::read_scan(&scan, false).unwrap();
    let i = recon_io::ismrmrd::read_ismrmrd(&fixture, recon_io::ismrmrd::Units::Normalized, false)
        .unwrap();
    assert_eq!(i.coils, 3);
    // The same float32 samples, channel after channel in the file's order.
    assert_eq!(
        i.data, s.data,
        "regenerate the fixture if synthesis changed"
    );
    let (
        Some(recon_io::scan::CoilNoise::Samples(noise)),
        Some(recon_io::scan::CoilNoise::Covariance(psi)),
    ) = (&i.noise, &s.noise)
    else {
        panic!("noise: {:?} and {:?}", i.noise.is_some(), s.noise.is_some());
    };
    assert_eq!(noise.len(), 3 * 8 * 40);
    let est = recon_coils::covariance(noise, 3).unwrap();
    for (e, p) in est.iter().zip(psi) {
        // 320 samples per coil: a sample covariance within about 6% of the
        // diagonal; allow 25%.
        assert!((e - p).norm() < 0.25 * psi[0].norm(), "{e} vs {p}");
    }
    // Without whitening the two files give the same image, to the bit;
    // whitened, each by its own noise (true or estimated), they differ.
    let run = |file: &Path, dir: &str| -> Vec<recon_core::Complex<f64>> {
        let cfg = scan_config(tmp.path(), file, "[sense]\nprewhiten = false");
        ok(&recon(
            &[
                "--config",
                cfg.to_str().unwrap(),
                "--out",
                tmp.path().join(dir).to_str().unwrap(),
            ],
            &cache,
        ));
        let f = hdf5::File::open(tmp.path().join(dir).join("recon.h5")).unwrap();
        let v: Vec<recon_core::Complex<f32>> = f.dataset("recon").unwrap().read_raw().unwrap();
        v.iter()
            .map(|c| recon_core::Complex::new(c.re as f64, c.im as f64))
            .collect()
    };
    assert_eq!(run(&scan, "a"), run(&fixture, "b"));
}

#[test]
fn ismrmrd_contrasts_are_images_of_their_own_not_merged() {
    // tests/fixtures/test-small-2contrasts.ismrmrd.h5: the ismrmrd package's
    // file of configs/test-small.toml written twice, idx.contrast 0 and 1
    // (the second at half the signal; scripts/make-ismrmrd-fixture.py with
    // CONTRASTS = 2). It reads as two images, and reconstructs as two: the
    // one-contrast file's image, and half of it.
    let tmp = tempfile::tempdir().unwrap();
    let cache = tmp.path().join("cache");
    let fixture = repo().join("tests/fixtures/test-small-2contrasts.ismrmrd.h5");
    let s = recon_io::ismrmrd::read_ismrmrd(&fixture, recon_io::ismrmrd::Units::Normalized, false)
        .unwrap();
    assert_eq!(s.traj.len(), 12000);
    assert_eq!(s.parts.len(), 2);
    assert_eq!(s.parts[1].index.0, [0, 1, 0, 0, 0]);
    let read = |file: &Path, dir: &str| -> (Vec<usize>, Vec<recon_core::Complex<f64>>, String) {
        let cfg = scan_config(tmp.path(), file, "trajectory_units = \"normalized\"");
        let out = ok(&recon(
            &[
                "--config",
                cfg.to_str().unwrap(),
                "--out",
                tmp.path().join(dir).to_str().unwrap(),
            ],
            &cache,
        ));
        let f = hdf5::File::open(tmp.path().join(dir).join("recon.h5")).unwrap();
        let ds = f.dataset("recon").unwrap();
        let v: Vec<recon_core::Complex<f32>> = ds.read_raw().unwrap();
        let v = v
            .iter()
            .map(|c| recon_core::Complex::new(c.re as f64, c.im as f64))
            .collect();
        (ds.shape(), v, out)
    };
    let (shape, two, stdout) = read(&fixture, "two");
    assert_eq!(shape, vec![2, 16, 16, 16]);
    assert!(
        stdout.contains("slice 0, contrast 1: ") && stdout.contains("plan and Q shared"),
        "{stdout}"
    );
    let (_, one, _) = read(&repo().join("tests/fixtures/test-small.ismrmrd.h5"), "one");
    let n = one.len();
    // Contrast 0 is the one-contrast file's image; contrast 1 half of it
    // (normalised by a power of two, float32 outputs: the same numbers).
    assert_eq!(two[..n], one[..]);
    let half: Vec<_> = one.iter().map(|v| v * 0.5).collect();
    assert_eq!(two[n..], half[..]);
}
