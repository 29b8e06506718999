//! Bad data (hardening, third pass): noise too thin or ill-conditioned for
//! whitening, data whose scale overflows or underflows float32, a
//! trajectory at one point, coil maps of a lost scale, unknown scan file
//! versions, groups present but unreadable, and the messages that named
//! the wrong thing. Each test failed before its fix.

use crate::common;

use common::{config_with, fails_with, recon, scan_run_config, stderr};
use recon_io::hdf5;
use std::path::{Path, PathBuf};

/// The small test problem (16^3) as a scan file at `dir/NAME`, written by
/// `recon simulate` with `extra` config sections.
fn simulated_scan(dir: &Path, name: &str, extra: &str) -> PathBuf {
    common::no_hdf5_locking();
    let cfg = config_with(dir, |t| t + extra);
    let out = dir.join(name);
    let o = recon(
        &[
            "simulate",
            "--config",
            cfg.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ],
        dir,
    );
    assert!(o.status.success(), "{}", stderr(&o));
    // simulate says the version it wrote, by the rule: 1 for one coil
    // without noise data, 2 with coils or a noise covariance.
    let f = recon_io::hdf5::File::open(&out).unwrap();
    let v = f.group("kspace").unwrap().attr("version").unwrap();
    let v = v.read_raw::<i64>().unwrap()[0];
    let said = String::from_utf8_lossy(&o.stdout);
    assert!(said.contains(&format!("(scan file version {v})")), "{said}");
    let rule = if extra.contains("[coils]") || extra.contains("[noise]") {
        2
    } else {
        1
    };
    assert_eq!(v, rule, "{extra}");
    out
}

/// Four coils, noisy: with their noise covariance, maps and truth.
fn four_coil_scan(dir: &Path, name: &str) -> PathBuf {
    let coils = "\n[noise]\nsnr = 30.0\nseed = 1\n[coils]\ncount = 4\narrangement = \"ring\"\nradius = 1.2\n";
    simulated_scan(dir, name, coils)
}

/// One coil, noiseless, with its truth.
fn one_coil_scan(dir: &Path, name: &str) -> PathBuf {
    simulated_scan(dir, name, "")
}

/// Replaces dataset `name` of `file` by float32 `values` of `shape`.
fn put(file: &Path, name: &str, shape: &[usize], values: &[f32]) {
    let f = hdf5::File::open_rw(file).unwrap();
    if f.link_exists(name) {
        f.unlink(name).unwrap();
    }
    f.new_dataset::<f32>()
        .shape(shape.to_vec())
        .create(name)
        .unwrap()
        .write_raw(values)
        .unwrap();
    f.close().unwrap();
}

fn read(file: &Path, name: &str) -> Vec<f32> {
    hdf5::File::open(file)
        .unwrap()
        .dataset(name)
        .unwrap()
        .read_raw()
        .unwrap()
}

/// Multiplies dataset `name` of `file` by `factor` (in float64, stored as
/// float32).
fn scale(file: &Path, name: &str, factor: f64) {
    let f = hdf5::File::open_rw(file).unwrap();
    let ds = f.dataset(name).unwrap();
    let v: Vec<f32> = ds.read_raw().unwrap();
    let v: Vec<f32> = v.iter().map(|x| (*x as f64 * factor) as f32).collect();
    ds.write_raw(&v).unwrap();
    f.close().unwrap();
}

/// Runs `file` (plus `extra` config lines) and returns the run's output.
fn run(dir: &Path, file: &Path, extra: &str) -> std::process::Output {
    let cfg = scan_run_config(dir, file, extra);
    let _ = std::fs::remove_dir_all(dir.join("out"));
    recon(&["--config", cfg.to_str().unwrap()], &dir.join("cache"))
}

/// The iterative PSNR a run printed.
fn psnr(o: &std::process::Output) -> f64 {
    let out = String::from_utf8_lossy(&o.stdout);
    let line = out
        .lines()
        .find(|l| l.trim_start().starts_with("iterative"))
        .unwrap_or_else(|| panic!("no PSNR in:\n{out}\n{}", stderr(o)));
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

// Noise scans with about as many samples as coils passed the singularity
// test and ruined SENSE silently; a covariance with one coil at 1e-11 of
// the others gave -87 dB silently; a complex variance was accepted.
#[test]
fn noise_too_thin_or_ill_conditioned_for_whitening_is_refused_or_warned_about() {
    let tmp = tempfile::tempdir().unwrap();
    let base = four_coil_scan(tmp.path(), "base.h5");
    let with_samples = |k: usize, name: &str| {
        let p = tmp.path().join(name);
        std::fs::copy(&base, &p).unwrap();
        let f = hdf5::File::open_rw(&p).unwrap();
        f.unlink("kspace/noise_covariance").unwrap();
        f.close().unwrap();
        let mut rng = common::Rng::new(9);
        let v: Vec<f32> = (0..4 * k * 2).map(|_| rng.sym() as f32).collect();
        put(&p, "kspace/noise", &[4, k, 2], &v);
        p
    };
    // K = C: refused, naming the dataset and the counts.
    let thin = with_samples(4, "thin.h5");
    let o = run(tmp.path(), &thin, "");
    fails_with(&o, &["kspace/noise", "4 per coil", "at least 16"]);
    assert!(!tmp.path().join("out").exists());
    // 5 per coil: accepted, with a warning.
    let few = with_samples(20, "few.h5");
    let o = run(tmp.path(), &few, "");
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("warning") && stderr(&o).contains("80 or more"),
        "{}",
        stderr(&o)
    );
    // A coil whose noise is 1e-11 of the others': a warning naming the
    // condition number.
    let ill = tmp.path().join("ill.h5");
    std::fs::copy(&base, &ill).unwrap();
    let mut psi = vec![0f32; 4 * 4 * 2];
    for (i, v) in [1.0, 1.0, 1.0, 1e-11].iter().enumerate() {
        psi[2 * (5 * i)] = *v;
    }
    put(&ill, "kspace/noise_covariance", &[4, 4, 2], &psi);
    let o = run(tmp.path(), &ill, "");
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("condition number 1.0e11"),
        "{}",
        stderr(&o)
    );
    // A variance with an imaginary part: an error naming the entry.
    psi[2 * 10 + 1] = 0.5; // entry (2, 2), imaginary part
    psi[2 * 15] = 1.0;
    put(&ill, "kspace/noise_covariance", &[4, 4, 2], &psi);
    let o = run(tmp.path(), &ill, "");
    fails_with(&o, &["kspace/noise_covariance", "(2, 2)", "real"]);
}

// Finite data that overflow float32 in the engine failed late as "the
// operator is not positive definite"; data 1e-20 times the usual gave an
// image of zeros.
#[test]
fn data_of_any_scale_reconstruct_alike() {
    let tmp = tempfile::tempdir().unwrap();
    let base = one_coil_scan(tmp.path(), "base.h5");
    let f32_ = "[engine]\nprecision = \"f32\"\ndevice = \"cpu\"";
    let o = run(tmp.path(), &base, f32_);
    assert!(o.status.success(), "{}", stderr(&o));
    let reference = psnr(&o);
    let recon_of = |dir: &Path| -> Vec<recon_core::Complex<f32>> {
        hdf5::File::open(dir.join("out/recon.h5"))
            .unwrap()
            .dataset("recon")
            .unwrap()
            .read_raw()
            .unwrap()
    };
    let want = recon_of(tmp.path());
    // Scaled by powers of two: the data are normalised by one, so the
    // image is the same numbers times the factor, to the bit.
    for e in [60i32, -60] {
        let p = tmp.path().join(format!("pow{e}.h5"));
        std::fs::copy(&base, &p).unwrap();
        scale(&p, "kspace/data", 2f64.powi(e));
        scale(&p, "reference/truth", 2f64.powi(e));
        let o = run(tmp.path(), &p, f32_);
        assert!(o.status.success(), "2^{e}: {}", stderr(&o));
        assert_eq!(psnr(&o), reference, "2^{e}");
        let got = recon_of(tmp.path());
        for (g, w) in got.iter().zip(&want) {
            assert_eq!(g.re as f64, w.re as f64 * 2f64.powi(e), "2^{e}");
            assert_eq!(g.im as f64, w.im as f64 * 2f64.powi(e), "2^{e}");
        }
    }
    // Scaled by 1e30 and 1e-30 (rounded to float32 in the file): the same
    // image quality, to what the rounding of the file's values moves a
    // float32 solve (images differ by about 2e-3, PSNR by 0.02 dB).
    for factor in [1e30, 1e-30] {
        let p = tmp.path().join(format!("x{factor:e}.h5"));
        std::fs::copy(&base, &p).unwrap();
        scale(&p, "kspace/data", factor);
        scale(&p, "reference/truth", factor);
        let o = run(tmp.path(), &p, f32_);
        assert!(o.status.success(), "{factor:e}: {}", stderr(&o));
        assert!(
            (psnr(&o) - reference).abs() < 0.05,
            "{factor:e}: {} against {reference}",
            psnr(&o)
        );
    }
}

// A trajectory with every sample at k = 0 failed in float32 at iteration
// 8 as "not positive definite".
#[test]
fn a_trajectory_at_one_point_is_refused_at_read_time() {
    let tmp = tempfile::tempdir().unwrap();
    let p = one_coil_scan(tmp.path(), "base.h5");
    let m = read(&p, "kspace/trajectory").len() / 3;
    put(&p, "kspace/trajectory", &[m, 3], &vec![0.0; 3 * m]);
    let o = run(tmp.path(), &p, "[engine]\nprecision = \"f32\"");
    fails_with(&o, &["kspace/trajectory", "one point of k-space"]);
    assert!(!stderr(&o).contains("positive definite"), "{}", stderr(&o));
    let cfg = scan_run_config(tmp.path(), &p, "");
    let o = recon(&["check", "--config", cfg.to_str().unwrap()], tmp.path());
    fails_with(&o, &["kspace/trajectory", "one point of k-space"]);
}

// Given maps x 1e-40 gave PSNR -185 dB silently; all-zero maps failed
// after Q and F^H D naming neither dataset nor file, and `recon check`
// passed.
#[test]
fn given_maps_of_a_lost_scale_are_refused_when_read() {
    let tmp = tempfile::tempdir().unwrap();
    let base = four_coil_scan(tmp.path(), "base.h5");
    let given = "[sense]\nmaps = \"given\"";
    for (name, factor, expect) in [
        ("tiny.h5", 1e-40, "below 1e-30"),
        ("zero.h5", 0.0, "zero everywhere"),
    ] {
        let p = tmp.path().join(name);
        std::fs::copy(&base, &p).unwrap();
        scale(&p, "coils/maps", factor);
        let cfg = scan_run_config(tmp.path(), &p, given);
        for args in [&["check", "--config"][..], &["--config"][..]] {
            let mut a = args.to_vec();
            a.push(cfg.to_str().unwrap());
            let o = recon(&a, &tmp.path().join("cache"));
            fails_with(&o, &["coils/maps", expect, p.to_str().unwrap()]);
        }
        assert!(!tmp.path().join("cache").exists());
    }
    // Scaled by 1e-20, they are normalised as usual: the same image.
    let o = run(tmp.path(), &base, given);
    assert!(o.status.success(), "{}", stderr(&o));
    let p = tmp.path().join("small.h5");
    std::fs::copy(&base, &p).unwrap();
    scale(&p, "coils/maps", 1e-20);
    let o2 = run(tmp.path(), &p, given);
    assert!(o2.status.success(), "{}", stderr(&o2));
    // Only the maps' float32 rounding in the file differs (about 6e-8
    // relative); 0.01 dB is the last digit printed.
    assert!(
        (psnr(&o) - psnr(&o2)).abs() < 0.01,
        "{} {}",
        psnr(&o),
        psnr(&o2)
    );
}

// compress_coils above the coil count was clamped silently.
#[test]
fn compressing_to_more_coils_than_there_are_is_warned_about() {
    let tmp = tempfile::tempdir().unwrap();
    let base = four_coil_scan(tmp.path(), "base.h5");
    for k in [5, 1_000_000] {
        let o = run(tmp.path(), &base, &format!("[sense]\ncompress_coils = {k}"));
        assert!(o.status.success(), "{}", stderr(&o));
        let err = stderr(&o);
        assert!(
            err.contains("sense.compress_coils")
                && err.contains(&format!("{k} virtual coils"))
                && err.contains("4 coil(s)"),
            "{err}"
        );
    }
}

// Shape errors printed the coil axis as `M`; the version attribute was
// never read (99 and "two" passed) and not written for version 1.
#[test]
fn scan_file_versions_and_axes_are_named() {
    let tmp = tempfile::tempdir().unwrap();
    let one = one_coil_scan(tmp.path(), "one.h5");
    let f = hdf5::File::open(&one).unwrap();
    let v: Vec<i64> = f
        .group("kspace")
        .unwrap()
        .attr("version")
        .unwrap()
        .read_raw()
        .unwrap();
    assert_eq!(v, [1]);
    drop(f);
    let four = four_coil_scan(tmp.path(), "four.h5");
    // [C, M, 2] data of the wrong width: each axis named.
    let p = tmp.path().join("axes.h5");
    std::fs::copy(&four, &p).unwrap();
    put(&p, "kspace/data", &[4, 10, 3], &[0.5; 120]);
    let e = recon_io::scan::read_scan(&p, false)
        .unwrap_err()
        .to_string();
    assert!(e.contains("expected [C, M, 2]"), "{e}");
    // Versions other than 1 and 2, as numbers or text.
    let set = |p: &Path, edit: &dyn Fn(&hdf5::Group)| {
        let f = hdf5::File::open_rw(p).unwrap();
        let g = f.group("kspace").unwrap();
        g.delete_attr("version").unwrap();
        edit(&g);
        f.close().unwrap();
    };
    let p = tmp.path().join("v99.h5");
    std::fs::copy(&one, &p).unwrap();
    set(&p, &|g| {
        g.new_attr::<i64>()
            .create("version")
            .unwrap()
            .write_scalar(&99)
            .unwrap();
    });
    let e = recon_io::scan::read_scan(&p, false)
        .unwrap_err()
        .to_string();
    assert!(e.contains("version") && e.contains("is 99"), "{e}");
    set(&p, &|g| common::text_attr(g, "version", "two"));
    let e = recon_io::scan::read_scan(&p, false)
        .unwrap_err()
        .to_string();
    assert!(e.contains("version") && e.contains("integer"), "{e}");
    // Version 1 with a coil axis, or version 2 without one.
    let p = tmp.path().join("v1of4.h5");
    std::fs::copy(&four, &p).unwrap();
    set(&p, &|g| {
        g.new_attr::<i64>()
            .create("version")
            .unwrap()
            .write_scalar(&1)
            .unwrap();
    });
    let e = recon_io::scan::read_scan(&p, false)
        .unwrap_err()
        .to_string();
    assert!(e.contains("expected [M, 2]"), "{e}");
    // A file without the attribute is read by its data's rank (files
    // written before it was always set).
    set(&p, &|_| {});
    assert_eq!(recon_io::scan::read_scan(&p, false).unwrap().coils, 4);
}

/// Breaks the group holding link `member`: the signature of the header
/// that holds the link's name (the group's object header, `OHDR`, where
/// links are stored compactly, or its local heap, `HEAP`, in the oldest
/// format), so that the group is present but cannot be read.
fn break_group_of(file: &Path, member: &str) {
    let mut b = std::fs::read(file).unwrap();
    let at = b
        .windows(member.len())
        .position(|w| w == member.as_bytes())
        .unwrap_or_else(|| panic!("{member} not found"));
    let header = [b"OHDR", b"HEAP"]
        .iter()
        .filter_map(|sig| b[..at].windows(4).rposition(|w| w == *sig))
        .max()
        .expect("a header before the name");
    b[header..header + 4].copy_from_slice(b"XXXX");
    std::fs::write(file, b).unwrap();
}

// Scan files whose /coils or /reference groups were unreadable were read
// as if those were absent.
#[test]
fn groups_present_but_unreadable_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let four = four_coil_scan(tmp.path(), "four.h5");
    for (group, member) in [("/coils", "maps"), ("/reference", "truth")] {
        let p = tmp.path().join(format!("{member}.h5"));
        std::fs::copy(&four, &p).unwrap();
        break_group_of(&p, member);
        let o = recon(&["inspect", p.to_str().unwrap()], tmp.path());
        fails_with(&o, &[group, "cannot be read"]);
    }
}
