//! The command line for your own scans: `recon SCAN --out DIR` with the
//! common settings as flags and any config key by `--set`, a config as an
//! optional protocol the flags override, `-q` and `-v`, and the usage
//! errors (status 2 for a bare `recon`, errors naming the flag or key,
//! nothing written).

use crate::common;

use common::*;
use std::path::{Path, PathBuf};

fn scan() -> PathBuf {
    repo().join("tests/fixtures/test-flat.ismrmrd.h5")
}

fn report(out: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap()
}

/// The `[gridding]` table's defaults, as a config without one resolves it.
fn default_gridding() -> serde_json::Value {
    let cfg: recon::config::Config = toml::from_str("[scan]\nfile = \"x.h5\"\n").unwrap();
    serde_json::to_value(&cfg.gridding).unwrap()
}

fn run(args: &[&str], dir: &Path) -> std::process::Output {
    recon(args, &dir.join("cache"))
}

#[test]
fn a_scan_file_reconstructs_with_flags_and_no_config() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let (scan, out_s) = (scan(), out.to_str().unwrap().to_string());
    let o = run(
        &[
            scan.to_str().unwrap(),
            "--out",
            &out_s,
            "--lambda",
            "0.02",
            "--iterations",
            "7",
            "--threads",
            "1",
            "--set",
            "engine.precision=f64",
        ],
        tmp.path(),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let r = report(&out);
    assert_eq!(r["iterations"], 7);
    // A scan is read, not synthesised; its noise scan gives the noise level;
    // no reference, so no stage for one.
    assert!(r["seconds"]["read"].as_f64().is_some(), "{}", r["seconds"]);
    assert!(r["seconds"].get("synthesis").is_none(), "{}", r["seconds"]);
    assert!(
        r["noise_sigma"].as_f64().unwrap() > 0.0,
        "{}",
        r["noise_sigma"]
    );
    assert!(
        !stderr(&o).contains("reference on the grid"),
        "{}",
        stderr(&o)
    );
    assert_eq!(r["lambda"], 0.02);
    assert!(
        r["device"].as_str().unwrap().contains("f64"),
        "{}",
        r["device"]
    );
    for f in ["recon.h5", "recon.nii", "montage.png"] {
        assert!(out.join(f).exists(), "{f}");
    }
    // Provenance: version, commit, command line, every setting resolved,
    // the input's hash, the device and the lambda rule; recon.h5 holds the
    // same JSON.
    let p = &r["provenance"];
    assert_eq!(p["recon_version"], env!("CARGO_PKG_VERSION"));
    assert!(!p["commit"].as_str().unwrap().is_empty());
    let args: Vec<&str> = p["command_line"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert!(
        args.windows(2).any(|w| w == ["--lambda", "0.02"]),
        "{args:?}"
    );
    assert_eq!(p["settings"]["solver"]["lambda"], 0.02);
    assert_eq!(p["settings"]["solver"]["iterations"], 7);
    assert_eq!(p["settings"]["engine"]["precision"], "f64");
    assert_eq!(
        p["settings"]["gridding"],
        serde_json::to_value(default_gridding()).unwrap()
    );
    let sha = {
        use sha2::Digest;
        hex::encode(sha2::Sha256::digest(std::fs::read(&scan).unwrap()))
    };
    assert_eq!(p["input"]["sha256"], sha);
    assert_eq!(p["device"], r["device"]);
    assert_eq!(p["lambda_rule"], "given");
    no_hdf5_locking();
    let f = recon_io::hdf5::File::open(out.join("recon.h5")).unwrap();
    let attr: recon_io::hdf5::types::VarLenUnicode =
        f.attr("provenance").unwrap().read_scalar().unwrap();
    let in_h5: serde_json::Value = serde_json::from_str(attr.as_str()).unwrap();
    assert_eq!(&in_h5, p);
    // `recon run SCAN` is the same command.
    let again = tmp.path().join("again");
    let o = run(
        &[
            "run",
            scan.to_str().unwrap(),
            "--out",
            again.to_str().unwrap(),
            "--iterations",
            "7",
        ],
        tmp.path(),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(report(&again)["iterations"], 7);
}

#[test]
fn flags_override_the_config_and_the_scan_replaces_its_scan() {
    let tmp = tempfile::tempdir().unwrap();
    let cfg = tmp.path().join("protocol.toml");
    std::fs::write(
        &cfg,
        "[scan]\nfile = \"elsewhere.h5\"\n[solver]\niterations = 20\nlambda = 0.5\n[output]\ndir = \"from-config\"\n",
    )
    .unwrap();
    let o = run(
        &[
            scan().to_str().unwrap(),
            "--config",
            cfg.to_str().unwrap(),
            "--iterations",
            "4",
        ],
        tmp.path(),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    // output.dir from the config, relative to its folder; lambda from the
    // config; iterations from the flag.
    let r = report(&tmp.path().join("from-config"));
    assert_eq!(
        (r["iterations"].clone(), r["lambda"].clone()),
        (4.into(), 0.5.into())
    );
}

#[test]
fn bad_command_lines_say_what_is_wrong_and_write_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let out_s = out.to_str().unwrap();
    let scan = scan();
    let scan_s = scan.to_str().unwrap();
    // A bare `recon` is a usage error: help, status 2.
    let o = run(&[], tmp.path());
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("Usage"));
    for (args, expect) in [
        (
            vec![scan_s],
            vec!["no output folder", "--out", "output.dir"],
        ),
        (
            vec![scan_s, "--out", out_s, "--set", "solver.lamda=3"],
            vec!["solver", "unknown field `lamda`", "the command line"],
        ),
        (
            vec![scan_s, "--out", out_s, "--set", "lambda=3"],
            vec!["--set", "name its section"],
        ),
        (
            vec![scan_s, "--out", out_s, "--set", "solver.lambda"],
            vec!["--set", "section.key=value"],
        ),
        (
            vec![scan_s, "--out", out_s, "--prior", "smooth"],
            vec!["prior.kind", "smooth"],
        ),
        (
            vec![scan_s, "--out", out_s, "--set", "solver.lambda=-1"],
            vec!["solver.lambda", "zero or positive"],
        ),
        (
            vec!["--lambda", "0.1", "--out", out_s],
            vec!["scan file", "recon SCAN"],
        ),
        (vec!["missing.h5", "--out", out_s], vec!["missing.h5"]),
    ] {
        let o = run(&args, tmp.path());
        fails_with(&o, &expect);
        assert!(!out.exists(), "{args:?} wrote {}", out.display());
    }
    // A file that is not HDF5, as a run's scan and to inspect.
    let text = tmp.path().join("notes.txt");
    std::fs::write(&text, "not a scan").unwrap();
    for args in [
        vec![text.to_str().unwrap(), "--out", out_s],
        vec!["inspect", text.to_str().unwrap()],
    ] {
        let o = run(&args, tmp.path());
        fails_with(&o, &["notes.txt is not an HDF5 file"]);
    }
    assert!(!out.exists());
}

#[test]
fn check_takes_a_scan_and_a_device_and_inspect_both_unit_spellings() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let o = run(
        &[
            "check",
            scan().to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "--device",
            "cpu",
        ],
        tmp.path(),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("OK"));
    for units in ["cycles-per-fov", "cycles_per_fov"] {
        let o = run(
            &[
                "inspect",
                scan().to_str().unwrap(),
                "--trajectory-units",
                units,
            ],
            tmp.path(),
        );
        assert!(o.status.success(), "{units}: {}", stderr(&o));
    }
}

#[test]
fn quiet_says_nothing_verbose_every_iteration_and_paths_print_normalised() {
    let tmp = tempfile::tempdir().unwrap();
    let scan = scan();
    // `a/./b/../c` is printed as `a/c`.
    let out = tmp.path().join("a/./b/../c");
    let args = |flag: &'static str| {
        vec![
            scan.to_str().unwrap().to_string(),
            "--out".into(),
            out.to_str().unwrap().to_string(),
            "--iterations".into(),
            "5".into(),
            "--lambda".into(),
            "0.01".into(),
            flag.into(),
        ]
    };
    let quiet: Vec<String> = args("-q");
    let o = run(
        &quiet.iter().map(|s| s.as_str()).collect::<Vec<_>>(),
        tmp.path(),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    // The scan's own warnings may remain; no progress, no log line.
    assert!(!stderr(&o).contains("CG"), "{}", stderr(&o));
    assert!(!stderr(&o).contains("F^H D"), "{}", stderr(&o));
    let stdout = String::from_utf8_lossy(&o.stdout).into_owned();
    let shown = tmp.path().join("a/c");
    assert!(
        stdout.contains(&format!("in {}", shown.display())),
        "{stdout}"
    );
    let verbose: Vec<String> = args("-v");
    let o = run(
        &verbose.iter().map(|s| s.as_str()).collect::<Vec<_>>(),
        tmp.path(),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        stderr(&o).matches("CG: iteration").count(),
        5,
        "{}",
        stderr(&o)
    );
}

#[test]
fn auto_runs_a_problem_too_small_for_a_gpu_on_the_cpu_and_says_so() {
    // In f32 (the GPU's precision) under `auto`, test-small (16^3, 6,000
    // samples) and the fixture scan go to the CPU by their size, not for
    // want of a GPU: the note says which, on any machine. A scan starts
    // the GPU's warm-up while it is read; the CPU run leaves it unwaited.
    let tmp = tempfile::tempdir().unwrap();
    let config = repo().join("configs/test-small.toml");
    let scan = scan();
    for (name, input) in [
        ("config", vec!["--config", config.to_str().unwrap()]),
        ("scan", vec![scan.to_str().unwrap(), "--lambda", "0.01"]),
    ] {
        let out = tmp.path().join(name);
        let mut args = input;
        args.extend([
            "--set",
            "engine.precision=f32",
            "--out",
            out.to_str().unwrap(),
        ]);
        let o = run(&args, tmp.path());
        assert!(o.status.success(), "{name}: {}", stderr(&o));
        assert!(
            stderr(&o).contains("device auto: a small problem"),
            "{name}: {}",
            stderr(&o)
        );
        let r = report(&out);
        assert!(
            r["device"].as_str().unwrap().starts_with("CPU"),
            "{name}: {}",
            r["device"]
        );
        assert_eq!(r["precision"], "f32", "{name}");
    }
    // f64 under `auto` runs on the CPU for its precision, as before.
    let out = tmp.path().join("f64");
    let o = run(
        &[
            "--config",
            config.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ],
        tmp.path(),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("engine.precision = f64 runs on the CPU"),
        "{}",
        stderr(&o)
    );
}
