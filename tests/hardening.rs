//! Bad input: one test per crash, hang or broken promise on bad input
//! found by the hardening audit (memory, sizes, declared shapes, command-line
//! numbers, HDF5 crashes and hangs), each failing before its fix, and the
//! poor results it listed. Faults (full folders, signals, stale files) are
//! in faults.rs.

use crate::common;

use common::{
    config_with, fails_with, kspace_group, recon, recon_bin, repo, scan_run_config, stderr,
};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

// 1. No memory estimate on the CPU.
#[test]
fn a_run_too_large_for_the_host_is_refused_at_once() {
    let tmp = tempfile::tempdir().unwrap();
    let need_gib = 600.0; // a 1024^3 run on the CPU needs hundreds of GiB
    if recon_core::memory::available_host_bytes()
        .is_some_and(|b| recon_core::memory::gib(b) > need_gib)
    {
        println!("skipped: this machine has more than {need_gib} GiB free");
        return;
    }
    for precision in ["f32", "f64"] {
        let cfg = config_with(tmp.path(), |t| {
            t.replace("matrix = 16", "matrix = 1024").replace(
                "precision = \"f64\"",
                &format!("precision = \"{precision}\""),
            )
        });
        let t = Instant::now();
        let o = recon(
            &["--config", cfg.to_str().unwrap(), "--device", "cpu"],
            &tmp.path().join("cache"),
        );
        fails_with(
            &o,
            &[
                "not enough memory",
                "GiB",
                "largest cubic matrix that fits is",
            ],
        );
        // Refused before the truth is rasterised or anything allocated.
        assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
        assert!(!tmp.path().join("out").exists());
    }
    // The benchmark and `recon q` estimate too.
    let o = recon(
        &[
            "bench",
            "--device",
            "cpu",
            "--matrix",
            "1024",
            "--samples",
            "10",
        ],
        tmp.path(),
    );
    fails_with(&o, &["not enough memory"]);
    let o = recon(
        &["bench", "--matrix", "4000000", "--samples", "10"],
        tmp.path(),
    );
    fails_with(&o, &["--matrix must be even, from 4 to 1024"]);
}

/// A scan file with the given matrix attribute and datasets (float32).
fn write_scan_raw(path: &Path, matrix: [i64; 3], m: usize, declared_m: Option<usize>) {
    let ks = kspace_group(path, matrix);
    match declared_m {
        // Declared huge, chunked and never written: 50 KB on disk.
        Some(big) => {
            ks.new_dataset::<f32>()
                .chunk([1024, 3])
                .shape([big, 3])
                .create("trajectory")
                .unwrap();
        }
        None => {
            ks.new_dataset::<f32>()
                .shape([m, 3])
                .create("trajectory")
                .unwrap()
                .write_raw(&vec![0.5f32; 3 * m])
                .unwrap();
        }
    }
    ks.new_dataset::<f32>()
        .shape([m, 2])
        .create("data")
        .unwrap()
        .write_raw(&vec![1.0f32; 2 * m])
        .unwrap();
    // The file closes with its last handle, the group.
    drop(ks);
}

// 2. Overflowing voxel count.
#[test]
fn a_scan_file_matrix_beyond_the_limits_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let scan = tmp.path().join("huge.h5");
    write_scan_raw(&scan, [4194304; 3], 10, None);
    let cfg = scan_run_config(tmp.path(), &scan, "[q]\ncache = false");
    let o = recon(&["--config", cfg.to_str().unwrap()], tmp.path());
    fails_with(&o, &["matrix", "from 4 to 1024"]);
    // Odd and negative sizes too.
    for m in [[15, 16, 16], [-16, 16, 16], [2, 16, 16]] {
        write_scan_raw(&scan, m, 10, None);
        let o = recon(&["--config", cfg.to_str().unwrap()], tmp.path());
        fails_with(&o, &["matrix", "even, from 4 to 1024"]);
    }
    assert!(!tmp.path().join("out").exists());
}

// 3. Declared dataset sizes are trusted.
#[test]
fn declared_dataset_sizes_are_checked_before_reading() {
    let tmp = tempfile::tempdir().unwrap();
    let scan = tmp.path().join("declared.h5");
    write_scan_raw(&scan, [16; 3], 100, Some(1 << 36));
    assert!(std::fs::metadata(&scan).unwrap().len() < 1 << 20);
    let cfg = scan_run_config(tmp.path(), &scan, "");
    let t = Instant::now();
    let o = recon(&["--config", cfg.to_str().unwrap()], tmp.path());
    fails_with(
        &o,
        &[
            "kspace/data",
            "has 100 samples per coil but kspace/trajectory has 68719476736",
        ],
    );
    assert!(t.elapsed() < Duration::from_secs(10));
}

// 7. Command-line numbers.
#[test]
fn every_command_line_number_is_checked() {
    let tmp = tempfile::tempdir().unwrap();
    let cfg = config_with(tmp.path(), |t| t);
    let c = cfg.to_str().unwrap();
    let cases: &[(&[&str], &str)] = &[
        (
            &["bench", "--timing-voxels", "0"],
            "--timing-voxels must be at least 1",
        ),
        (
            &["bench", "--check-voxels", "0"],
            "--check-voxels must be at least 1",
        ),
        (
            &["bench", "--iterations", "0"],
            "--iterations must be at least 1",
        ),
        (&["bench", "--matrix", "7"], "--matrix must be even"),
        (&["bench", "--samples", "0"], "--samples must be 1 to"),
        (
            &["bench", "--variants", "9"],
            "--variants takes numbers from 1 to 6",
        ),
        (&["bench", "--tune", "3x100"], "--tune takes PERxBLOCK"),
        (
            &["validate", "--config", c, "--sweep-points", "1"],
            "--sweep-points must be 2 to 1000",
        ),
        (
            &["validate", "--config", c, "--sweep-points", "0"],
            "--sweep-points must be 2 to 1000",
        ),
        (
            &["validate", "--config", c, "--lambda-min", "0"],
            "--lambda-min must be positive",
        ),
        (
            &["validate", "--config", c, "--lambda-max", "1e-4"],
            "--lambda-max must be finite and above",
        ),
        (
            &["validate", "--config", c, "--snr", "0"],
            "--snr must be positive",
        ),
        (
            &["validate", "--config", c, "--snr", "nan"],
            "--snr must be positive",
        ),
        (
            &["parboil-q", "in", "out", "--samples", "0"],
            "--samples must be at least 1",
        ),
    ];
    for (args, expect) in cases {
        let o = recon(args, tmp.path());
        fails_with(&o, &[expect]);
    }
    assert!(!tmp.path().join("out").exists());
    // Options a subcommand does not take are refused by the parser (exit 2).
    for args in [
        &["bench", "--config", c][..],
        &["q", "--config", c, "--out", "x"],
        &["parboil-q", "--config", c, "a", "b"],
        &["--config", c, "--iterations", "many"],
        &["--config", c, "a.h5", "b.h5"],
    ] {
        let o = recon(args, tmp.path());
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
    }
}

/// The ISMRMRD fixture with `mutate` applied, at `path`.
fn mutated_fixture(path: &Path, mutate: impl Fn(&mut Vec<u8>)) {
    let mut b = std::fs::read(repo().join("tests/fixtures/test-small.ismrmrd.h5")).unwrap();
    mutate(&mut b);
    std::fs::write(path, b).unwrap();
}

// 8 and 9. Corrupted ISMRMRD files crash and hang HDF5: read in a child
// process with a time limit, they are errors.
#[test]
fn corrupted_ismrmrd_files_that_crash_or_hang_hdf5_are_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let seg = tmp.path().join("segv.h5");
    mutated_fixture(&seg, |b| b[108561] ^= 0x80);
    let hang = tmp.path().join("hang.h5");
    mutated_fixture(&hang, |b| b[111593..112105].fill(0));
    for (file, expect) in [(&seg, "cannot read"), (&hang, "did not finish within 3 s")] {
        let cfg = scan_run_config(tmp.path(), file, "");
        let t = Instant::now();
        let o = Command::new(recon_bin())
            .args(["--config", cfg.to_str().unwrap()])
            .env("HDF5_USE_FILE_LOCKING", "FALSE")
            .env("RECON_CACHE_DIR", tmp.path().join("cache"))
            .env("RECON_READ_TIMEOUT_S", "3")
            .output()
            .unwrap();
        fails_with(&o, &[expect, &file.display().to_string()]);
        assert!(t.elapsed() < Duration::from_secs(30), "{:?}", t.elapsed());
        assert!(!tmp.path().join("out").exists());
    }
}

// Poor results.
#[test]
fn an_os_error_is_printed_once() {
    let tmp = tempfile::tempdir().unwrap();
    let o = recon(&["--config", "/nonexistent/recon.toml"], tmp.path());
    fails_with(&o, &["No such file or directory"]);
    assert_eq!(
        stderr(&o).matches("No such file or directory").count(),
        1,
        "{}",
        stderr(&o)
    );
    let o = recon(&["inspect", "/nonexistent.h5"], tmp.path());
    assert_eq!(
        stderr(&o).matches("No such file or directory").count(),
        1,
        "{}",
        stderr(&o)
    );
}

#[test]
fn non_finite_or_oversized_phantoms_are_named() {
    let tmp = tempfile::tempdir().unwrap();
    let phantom = tmp.path().join("huge.toml");
    std::fs::write(
        &phantom,
        "name = \"huge\"\n[[ellipsoid]]\nvalue = 1.0\nsemi_axes_mm = [1e300, 1e300, 1e300]\ncentre_mm = [0.0, 0.0, 0.0]\n",
    )
    .unwrap();
    let cfg = config_with(tmp.path(), |t| {
        t.replace(
            &repo()
                .join("phantoms/shepp-logan.toml")
                .display()
                .to_string(),
            &phantom.display().to_string(),
        )
    });
    let o = recon(&["--config", cfg.to_str().unwrap()], tmp.path());
    fails_with(&o, &["ellipsoid 1", "within 1e5 mm"]);
}

#[test]
fn normalised_ismrmrd_trajectories_read_as_cycles_per_fov_are_warned_about() {
    let tmp = tempfile::tempdir().unwrap();
    let fixture = repo().join("tests/fixtures/test-small.ismrmrd.h5");
    let o = recon(
        &[
            "inspect",
            fixture.to_str().unwrap(),
            "--trajectory-units",
            "cycles-per-fov",
        ],
        tmp.path(),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("looks normalised"), "{}", stderr(&o));
    let o = recon(&["inspect", fixture.to_str().unwrap()], tmp.path());
    assert!(
        o.status.success() && !stderr(&o).contains("warning"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn parboil_inputs_that_overflow_or_hold_nothing_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let input = |phi: f32, num_k: i32| {
        let mut b = Vec::new();
        b.extend_from_slice(&num_k.to_le_bytes());
        b.extend_from_slice(&2i32.to_le_bytes());
        let k = num_k as usize;
        for _ in 0..3 * k {
            b.extend_from_slice(&0.1f32.to_le_bytes());
        }
        for _ in 0..6 {
            b.extend_from_slice(&0.5f32.to_le_bytes());
        }
        for _ in 0..2 * k {
            b.extend_from_slice(&phi.to_le_bytes());
        }
        b
    };
    let out = tmp.path().join("q.out");
    for (bytes, expect) in [
        (input(1e20, 4), "beyond float32's range"),
        (input(1.0, 0), "at least one sample"),
    ] {
        let file = tmp.path().join("in.bin");
        std::fs::write(&file, bytes).unwrap();
        let o = recon(
            &[
                "parboil-q",
                file.to_str().unwrap(),
                out.to_str().unwrap(),
                "--device",
                "cpu",
            ],
            tmp.path(),
        );
        fails_with(&o, &[expect]);
        assert!(!out.exists());
    }
}

#[test]
fn bench_finds_its_phantom_from_any_folder_and_shows_stages() {
    let tmp = tempfile::tempdir().unwrap();
    let o = Command::new(recon_bin())
        .args([
            "bench",
            "--device",
            "cpu",
            "--matrix",
            "8",
            "--samples",
            "500",
            "--iterations",
            "2",
        ])
        .current_dir(tmp.path())
        .output()
        .unwrap();
    let err = stderr(&o);
    assert!(o.status.success(), "{err}");
    // stderr is a pipe here: stage lines, not progress bars.
    for line in [
        "Q: started",
        "Q: done in",
        "F^H D: done in",
        "CG: iteration 2/2",
    ] {
        assert!(err.contains(line), "{line}: {err}");
    }
    // Both engines' stages, each with its errors against float64.
    let out = String::from_utf8_lossy(&o.stdout);
    for row in ["CG (ms/it)", "exact summation", "nufft (tolerance 1e-6"] {
        assert!(out.contains(row), "{row}: {out}");
    }
    let bad = Command::new(recon_bin())
        .args(["bench", "--device", "cpu", "--engines", "fast"])
        .current_dir(tmp.path())
        .output()
        .unwrap();
    fails_with(&bad, &["--engines", "fast"]);
    let bad = Command::new(recon_bin())
        .args([
            "bench",
            "--device",
            "cpu",
            "--engines",
            "nufft",
            "--tolerance",
            "1e-8",
        ])
        .current_dir(tmp.path())
        .output()
        .unwrap();
    fails_with(&bad, &["--tolerance", "float32"]);
}

#[test]
fn a_run_logs_every_stage_when_stderr_is_not_a_terminal() {
    let tmp = tempfile::tempdir().unwrap();
    let cfg = config_with(tmp.path(), |t| t);
    let o = recon(
        &["--config", cfg.to_str().unwrap()],
        &tmp.path().join("cache"),
    );
    let err = stderr(&o);
    assert!(o.status.success(), "{err}");
    for stage in ["k-space", "truth", "Q", "F^H D", "gridding"] {
        assert!(err.contains(&format!("{stage}: started")), "{stage}: {err}");
        assert!(err.contains(&format!("{stage}: done in")), "{stage}: {err}");
    }
    assert!(err.contains("CG: iteration 30/30"), "{err}");
}

#[test]
fn recon_check_reports_a_good_config_and_names_a_bad_one() {
    let tmp = tempfile::tempdir().unwrap();
    let cfg = config_with(tmp.path(), |t| t);
    let o = recon(&["check", "--config", cfg.to_str().unwrap()], tmp.path());
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("OK"));
    assert!(!tmp.path().join("out").exists());
    let cfg = config_with(tmp.path(), |t| {
        t.replace("iterations = 30", "iterations = 0")
    });
    let o = recon(&["check", "--config", cfg.to_str().unwrap()], tmp.path());
    fails_with(&o, &["solver.iterations"]);
}

#[test]
fn a_lambda_sweep_extends_its_range_until_the_best_is_inside() {
    let tmp = tempfile::tempdir().unwrap();
    let cfg = config_with(tmp.path(), |t| t);
    let out = tmp.path().join("val");
    // lambda from 10 to 100 over-smooths: the best is below the range.
    let o = recon(
        &[
            "validate",
            "--config",
            cfg.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "--lambda-sweep",
            "--sweeps-only",
            "--lambda-min",
            "10",
            "--lambda-max",
            "100",
            "--sweep-points",
            "2",
        ],
        &tmp.path().join("cache"),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("validation.json")).unwrap())
            .unwrap();
    let pts = v["lambda_sweep"].as_array().unwrap();
    let lambdas: Vec<f64> = pts.iter().map(|p| p["lambda"].as_f64().unwrap()).collect();
    assert!(lambdas.len() > 2, "{lambdas:?}");
    assert!(lambdas[0] < 10.0, "{lambdas:?}");
    // Sorted, and the best is inside unless the report says otherwise.
    assert!(lambdas.windows(2).all(|w| w[0] < w[1]), "{lambdas:?}");
    let best = v["best_lambda"].as_f64().unwrap();
    let md = std::fs::read_to_string(out.join("validation.md")).unwrap();
    if best == lambdas[0] {
        assert_eq!(v["best_lambda_at_range_edge"], true);
        assert!(md.contains("widen --lambda-min"), "{md}");
    } else {
        assert_eq!(v["best_lambda_at_range_edge"], false);
        assert!(best > lambdas[0] && best < lambdas[lambdas.len() - 1]);
    }
}

#[test]
fn engine_settings_outside_their_engine_or_range_are_refused_before_anything_is_written() {
    let tmp = tempfile::tempdir().unwrap();
    let cases: &[(&str, &[&str])] = &[
        ("kind = \"fast\"", &["engine.kind", "nufft", "exact"]),
        ("tolerance = 0.5", &["engine.tolerance", "[1e-14, 1e-3]"]),
        (
            "tolerance = 1e-2",
            &["engine.tolerance", "[1e-14, 1e-3]", "2.4 dB"],
        ),
        ("tolerance = 1e-15", &["engine.tolerance", "[1e-14, 1e-3]"]),
        ("tolerance = nan", &["engine.tolerance"]),
        // Single precision cannot reach below 1e-6.
        (
            "precision = \"f32\"\ntolerance = 1e-8",
            &["engine.tolerance", "float32", "1e-6"],
        ),
        // Settings of the other engine.
        (
            "kind = \"exact\"\ntolerance = 1e-3",
            &["engine.tolerance", "nufft engine", "kind = \"exact\""],
        ),
        (
            "variant = 3",
            &["engine.variant", "exact engine", "kind = \"nufft\""],
        ),
        ("per_thread = 2", &["engine.per_thread", "exact engine"]),
        ("block = 128", &["engine.block", "exact engine"]),
    ];
    for (setting, expect) in cases {
        let cfg = config_with(tmp.path(), |t| {
            // The test config's [engine] has precision = "f64" alone.
            let t = t.replace("[engine]\nprecision = \"f64\"", "[engine]");
            let extra = if setting.contains("precision") {
                ""
            } else {
                "precision = \"f64\"\n"
            };
            t.replace("[engine]\n", &format!("[engine]\n{extra}{setting}\n"))
        });
        for args in [&["--config"][..], &["check", "--config"][..]] {
            let mut a = args.to_vec();
            a.push(cfg.to_str().unwrap());
            let o = recon(&a, tmp.path());
            fails_with(&o, expect);
            assert!(
                !tmp.path().join("out").exists(),
                "{setting}: nothing written"
            );
        }
    }
    // And both engines run with their own settings.
    for setting in [
        "kind = \"exact\"\nvariant = 3",
        "kind = \"nufft\"\ntolerance = 1e-9",
    ] {
        let cfg = config_with(tmp.path(), |t| {
            t.replace("[engine]\n", &format!("[engine]\n{setting}\n"))
        });
        let o = recon(&["check", "--config", cfg.to_str().unwrap()], tmp.path());
        assert!(o.status.success(), "{setting}: {}", stderr(&o));
    }
}
