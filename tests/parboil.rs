//! Parboil mri-q compatibility: Q from Parboil's input files against its
//! reference outputs, by Parboil's own acceptance rule; and bad input files.
//! The datasets live beside the project in ../shared/parboil/mri-q (or
//! `RECON_PARBOIL_DIR`); when they are absent the tests say so and skip.

use recon_core::{Complex, CpuBackend};
use std::path::{Path, PathBuf};

use crate::common;

/// `recon` with a throw-away cache.
fn recon(args: &[&str]) -> std::process::Output {
    common::recon(
        args,
        &std::env::temp_dir().join(format!("recon-parboil-test-{}", std::process::id())),
    )
}

fn data_dir() -> Option<PathBuf> {
    let dir = std::env::var_os("RECON_PARBOIL_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/parboil/mri-q")
        });
    if dir.is_dir() {
        Some(dir)
    } else {
        println!(
            "skipped: Parboil mri-q datasets not found at {}",
            dir.display()
        );
        None
    }
}

/// (input, reference output) of a dataset: the one file in each folder.
fn dataset(dir: &Path, name: &str) -> (PathBuf, PathBuf) {
    let one = |sub: &str| {
        std::fs::read_dir(dir.join(name).join(sub))
            .unwrap()
            .map(|e| e.unwrap().path())
            .next()
            .unwrap_or_else(|| panic!("no file in {name}/{sub}"))
    };
    (one("input"), one("output"))
}

fn reference(path: &Path) -> (Vec<f32>, Vec<f32>) {
    recon_parboil::parse_output(&std::fs::read(path).unwrap(), "reference").unwrap()
}

fn halves(q: &[Complex<f32>]) -> (Vec<f32>, Vec<f32>) {
    (
        q.iter().map(|c| c.re).collect(),
        q.iter().map(|c| c.im).collect(),
    )
}

#[test]
fn both_datasets_pass_parboils_rule_on_the_cpu() {
    let Some(dir) = data_dir() else { return };
    for name in ["small", "large"] {
        let (input, output) = dataset(&dir, name);
        let inp = recon_parboil::read_input(&input, None).unwrap();
        let q = recon_parboil::compute_q(&CpuBackend::<f32>::new(), &inp, &mut |_, _| {}).unwrap();
        let (re, im) = halves(&q);
        let (rr, ri) = reference(&output);
        let c = recon_parboil::compare((&re, &im), (&rr, &ri)).unwrap();
        println!("{name}: {c:?}");
        assert!(c.passed(), "{name}: {c:?}");
    }
}

#[test]
fn command_writes_parboils_format_and_caps_samples() {
    let Some(dir) = data_dir() else { return };
    let (input, output) = dataset(&dir, "small");
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("q.out");
    let o = recon(&[
        "parboil-q",
        input.to_str().unwrap(),
        out.to_str().unwrap(),
        "--device",
        "cpu",
        "--compare",
        output.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stdout).contains("PASS"));
    // The file itself passes: uint32 count, then Qr, then Qi.
    let (re, im) = recon_parboil::parse_output(&std::fs::read(&out).unwrap(), "out").unwrap();
    let (rr, ri) = reference(&output);
    assert!(recon_parboil::compare((&re, &im), (&rr, &ri))
        .unwrap()
        .passed());

    // --samples 100: the same as computing with the first 100 samples.
    let o = recon(&[
        "parboil-q",
        input.to_str().unwrap(),
        out.to_str().unwrap(),
        "--device",
        "cpu",
        "--samples",
        "100",
    ]);
    assert!(o.status.success());
    let (re, im) = recon_parboil::parse_output(&std::fs::read(&out).unwrap(), "out").unwrap();
    let inp = recon_parboil::read_input(&input, Some(100)).unwrap();
    assert_eq!(inp.k.len(), 100);
    let q = recon_parboil::compute_q(&CpuBackend::<f32>::new(), &inp, &mut |_, _| {}).unwrap();
    assert_eq!((re, im), halves(&q));
    // ... and not the full result.
    assert!(
        !recon_parboil::compare((&halves(&q).0, &halves(&q).1), (&rr, &ri))
            .unwrap()
            .passed()
    );
}

/// A small valid input file: 3 samples, 2 points.
fn small_input() -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(&3i32.to_le_bytes());
    b.extend_from_slice(&2i32.to_le_bytes());
    for i in 0..(5 * 3 + 3 * 2) {
        b.extend_from_slice(&(0.1f32 * i as f32).to_le_bytes());
    }
    b
}

#[test]
fn bad_input_files_stop_with_a_reason_and_write_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let good = small_input();
    let mut nan = good.clone();
    nan[8 + 4 * 4..8 + 4 * 5].copy_from_slice(&f32::NAN.to_le_bytes()); // ky[1]
    let mut inf = good.clone();
    let at = 8 + 4 * (3 * 3 + 3 * 2); // phiR[0]
    inf[at..at + 4].copy_from_slice(&f32::INFINITY.to_le_bytes());
    let mut counts = good.clone();
    counts[0..4].copy_from_slice(&4i32.to_le_bytes());
    let mut negative = good.clone();
    negative[4..8].copy_from_slice(&(-2i32).to_le_bytes());
    let cases: [(&str, Vec<u8>, &str); 6] = [
        ("truncated", good[..good.len() - 6].to_vec(), "truncated"),
        ("no header", good[..6].to_vec(), "too short"),
        ("counts", counts, "numK = 4"),
        ("negative", negative, "negative count"),
        ("nan", nan, "ky[1] is NaN"),
        ("inf", inf, "phiR[0] is inf"),
    ];
    for (name, bytes, expect) in cases {
        let input = tmp.path().join(format!("{name}.bin"));
        std::fs::write(&input, bytes).unwrap();
        let out = tmp.path().join(format!("{name}.out"));
        let o = recon(&[
            "parboil-q",
            input.to_str().unwrap(),
            out.to_str().unwrap(),
            "--device",
            "cpu",
        ]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{name}: accepted");
        assert!(err.contains(expect), "{name}: {err}");
        assert!(!out.exists(), "{name}: output written");
    }
    // No temporary files either.
    let left: Vec<_> = std::fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| {
            n.to_string_lossy().ends_with(".out") || n.to_string_lossy().contains("partial")
        })
        .collect();
    assert!(left.is_empty(), "{left:?}");
    // The good file works.
    let input = tmp.path().join("good.bin");
    std::fs::write(&input, &good).unwrap();
    let out = tmp.path().join("good.out");
    let o = recon(&[
        "parboil-q",
        input.to_str().unwrap(),
        out.to_str().unwrap(),
        "--device",
        "cpu",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(std::fs::metadata(&out).unwrap().len(), 4 + 8 * 2);
}
