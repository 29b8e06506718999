//! Stacks (one 2-D trajectory on every Cartesian k_z partition): found in
//! the trajectory, and split exactly into one 2-D problem per slice.

use crate::common;

use common::*;
use recon_cg::{Normal, Regularised, Toeplitz};
use recon_core::{metrics::nrmse, Backend, Basis, Complex, CpuBackend, Grid, Stencil};
use recon_encoding::{batched_q, plane, Stack};
use recon_synth::Trajectory;

type Cpu = CpuBackend<f64>;

fn stars(spokes: usize, samples: usize) -> Trajectory {
    Trajectory::StackOfStars {
        spokes,
        samples,
        partitions: None,
        kmax: 1.0,
    }
}

#[test]
fn the_3d_data_of_a_stack_split_into_each_slices_2d_data() {
    // F_3D rho on a stack of stars, split by the inverse DFT along k_z,
    // against F_2D of each slice of rho: the same sums, exactly, for both
    // voxel bases.
    for basis in [Basis::Box, Basis::Delta] {
        let grid = Grid::new([8, 6, 6], [200.0, 150.0, 90.0])
            .unwrap()
            .with_basis(basis);
        let traj = stars(7, 8).generate(&grid).unwrap();
        let stack = Stack::detect(&grid, &traj).expect("a stack of stars is a stack");
        assert_eq!(stack.len(), 6);
        assert_eq!(stack.plane.len(), 7 * 8);
        assert_eq!(stack.slice.n, [8, 6, 1]);
        let mut rng = Rng::new(81);
        let rho = rng.complex(grid.len());
        let be = Cpu::new();
        let data = common::forward(&be, &grid, &traj, &rho);
        let slices = stack.slices(&data).unwrap();
        for (j, d) in slices.iter().enumerate() {
            let want = common::forward(&be, &stack.slice, &stack.plane, plane(&grid, &rho, j));
            // f64 sums of a few hundred terms, and a DFT of 6.
            let e = nrmse(d, &want);
            assert!(e < 1e-12, "{basis:?} slice {j}: {e:e}");
        }
    }
}

#[test]
fn the_batch_of_slices_is_each_slices_2d_problem_side_by_side() {
    // (T + lambda W^H W) on the stack's grid with the slices' Q stacked
    // along z and W without differences between planes, against each
    // plane's own 2-D (T + lambda W^H W): the same values, so the batch
    // poses each slice's equations and no plane reaches another. Q is any
    // array here: the identity is the Toeplitz product's, not Q's.
    let grid = Grid::new([8, 6, 6], [200.0, 150.0, 90.0]).unwrap();
    let traj = stars(7, 8).generate(&grid).unwrap();
    let stack = Stack::detect(&grid, &traj).unwrap();
    let mut rng = Rng::new(82);
    let d = stack.slice.doubled();
    let q = rng.complex(d[0] * d[1]);
    let x = rng.complex(grid.len());
    let be = Cpu::new();
    let lambda = 0.7;
    let apply = |g: &Grid, q: &[Complex<f64>], w: &Stencil, x: &[Complex<f64>]| {
        let mut t = Toeplitz::new(&be, g, q).unwrap();
        let mut a = Regularised::new(&be, &mut t, w, lambda).unwrap();
        let mut out = be.zeros(x.len()).unwrap();
        a.apply(&be, &mut out, &be.upload(x).unwrap()).unwrap();
        let mut host = vec![Complex::default(); x.len()];
        be.download(&mut host, &out).unwrap();
        host
    };
    let batch = apply(
        &grid,
        &batched_q(&stack.slice, stack.len(), &q).unwrap(),
        &Stencil::planes(grid.n),
        &x,
    );
    let uniform = Stencil::uniform(stack.slice.n);
    for j in 0..stack.len() {
        let want = apply(&stack.slice, &q, &uniform, plane(&grid, &x, j));
        // f64 FFTs of 16 x 12 (x 12) points.
        let e = nrmse(plane(&grid, &batch, j), &want);
        assert!(e < 1e-12, "slice {j}: {e:e}");
    }
    assert!(batched_q(&stack.slice, stack.len(), &q[1..]).is_err());
    assert!(batched_q(&grid, 2, &q).is_err());
}

#[test]
fn only_stacks_are_found() {
    let grid = Grid::new([8, 8, 4], [200.0; 3]).unwrap();
    let stack = stars(5, 8).generate(&grid).unwrap();
    // Shuffled within and across partitions' order of acquisition: still
    // a stack, as long as each partition lists the plane in one order.
    let mut interleaved = Vec::new();
    for m in 0..40 {
        for p in 0..4 {
            interleaved.push(stack[p * 40 + m]);
        }
    }
    let found = Stack::detect(&grid, &interleaved).unwrap();
    assert_eq!(found.plane, Stack::detect(&grid, &stack).unwrap().plane);
    // Not stacks: 3-D radial; a missing partition; a partition's plane
    // differing; k_z off the Cartesian partitions; a 2-D grid.
    let radial = Trajectory::Radial {
        spokes: 20,
        samples: 8,
        kmax: 1.0,
    }
    .generate(&grid)
    .unwrap();
    assert!(Stack::detect(&grid, &radial).is_none());
    let three: Vec<[f64; 3]> = stack.iter().filter(|k| k[2] != 1.0).copied().collect();
    assert!(Stack::detect(&grid, &three).is_none());
    let mut moved = stack.clone();
    moved[45][0] += 0.5;
    assert!(Stack::detect(&grid, &moved).is_none());
    let half: Vec<[f64; 3]> = stack.iter().map(|k| [k[0], k[1], k[2] + 0.5]).collect();
    assert!(Stack::detect(&grid, &half).is_none());
    let flat = Grid::new([8, 8, 1], [200.0; 3]).unwrap();
    let plane = stars(5, 8).generate(&flat).unwrap();
    assert!(Stack::detect(&flat, &plane).is_none());
    // The data must hold one value per sample.
    let s = Stack::detect(&grid, &stack).unwrap();
    assert!(s.slices(&vec![Complex::default(); 3]).is_err());
}

/// A synthetic stack-of-stars config on 24 x 24 x 8 with `solver` lines.
fn stack_config(dir: &std::path::Path, trajectory: &str, solver: &str) -> std::path::PathBuf {
    let phantom = common::repo().join("phantoms/shepp-logan.toml");
    let text = format!(
        "[grid]\nmatrix = [24, 24, 8]\nfov_mm = 240.0\n\n[phantom]\nfile = \"{}\"\nsupersample = 2\n\n\
         [trajectory]\n{trajectory}\n\n[engine]\nprecision = \"f64\"\n\n\
         [solver]\niterations = 20\nlambda = 0.01\n{solver}\n\n[output]\ndir = \"out\"\n",
        phantom.display().to_string().replace('\\', "/")
    );
    let path = dir.join("stack.toml");
    std::fs::write(&path, text).unwrap();
    path
}

const STARS: &str = "kind = \"stack-of-stars\"\nspokes = 40\nsamples = 48";

fn report(dir: &std::path::Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("out/report.json")).unwrap()).unwrap()
}

#[test]
fn a_batch_of_slices_solves_like_the_slices_one_by_one() {
    let (slices, batch) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let run = |dir: &std::path::Path, mode: &str| {
        let cfg = stack_config(dir, STARS, &format!("stack = \"{mode}\""));
        let o = recon(&["run", "--config", cfg.to_str().unwrap()], dir);
        assert!(o.status.success(), "{}", stderr(&o));
        o
    };
    let o = run(batch.path(), "batch");
    assert!(
        stderr(&o).contains("together as one batch"),
        "{}",
        stderr(&o)
    );
    let o = run(slices.path(), "slices");
    assert!(stderr(&o).contains("one after the other"), "{}", stderr(&o));
    let (x, y) = (
        common::recon_h5_magnitudes(batch.path(), "recon"),
        common::recon_h5_magnitudes(slices.path(), "recon"),
    );
    let e = relative_error(&x, &y);
    let (b, s) = (report(batch.path()), report(slices.path()));
    let db = |r: &serde_json::Value| r["psnr_db"].as_f64().unwrap();
    println!("batch {:.3} dB, slices {:.3} dB, {e:e}", db(&b), db(&s));
    // The same equations (the test above); CG's step sizes shared over the
    // slices make 20 iterations land elsewhere: measured 9.2e-4 apart,
    // the same PSNR to 0.001 dB.
    assert!(e < 2e-2, "batch against slices: {e:e}");
    assert!((db(&b) - db(&s)).abs() < 0.1);
    assert_eq!(b["gridding_psnr_db"], s["gridding_psnr_db"]);
}

#[test]
fn a_stack_runs_as_slices_and_as_a_volume() {
    let (slices, volume) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let cfg = stack_config(slices.path(), STARS, "");
    let o = recon(&["run", "--config", cfg.to_str().unwrap()], slices.path());
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("solved as 8 2-D slices"),
        "{}",
        stderr(&o)
    );
    let cfg = stack_config(volume.path(), STARS, "stack = \"volume\"");
    let o = recon(&["run", "--config", cfg.to_str().unwrap()], volume.path());
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(!stderr(&o).contains("2-D slices"));
    let (s, v) = (report(slices.path()), report(volume.path()));
    assert_eq!(s["matrix"], serde_json::json!([24, 24, 8]));
    let db = |r: &serde_json::Value, k: &str| r[k].as_f64().unwrap_or(f64::NAN);
    // The slices solve the same model without W's differences along z:
    // measured 23.79 dB against the volume's 23.95 here (0.5 dB below at
    // 32 x 32 x 16); their gridding grids each slice as the 3-D baseline
    // sees it (measured 24.86 dB against 24.94).
    let (is, iv) = (db(&s, "psnr_db"), db(&v, "psnr_db"));
    assert!(
        is > iv - 1.5 && is > 20.0,
        "slices {is:.2} dB, volume {iv:.2} dB"
    );
    let (gs, gv) = (db(&s, "gridding_psnr_db"), db(&v, "gridding_psnr_db"));
    assert!(
        (gs - gv).abs() < 0.3,
        "gridding: slices {gs:.2} dB, volume {gv:.2} dB"
    );
    let nii = std::fs::read(slices.path().join("out/recon.nii")).unwrap();
    let dim: Vec<i16> = (0..4)
        .map(|i| i16::from_le_bytes([nii[40 + 2 * i], nii[41 + 2 * i]]))
        .collect();
    assert_eq!(dim, [3, 24, 24, 8]);
}

#[test]
fn slices_of_what_is_not_a_stack_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let tpi = "kind = \"tpi\"\ncones = 8\nprojections = 150\nsamples = 20";
    let cfg = stack_config(tmp.path(), tpi, "stack = \"slices\"");
    let o = recon(&["run", "--config", cfg.to_str().unwrap()], tmp.path());
    fails_with(&o, &["solver.stack", "not a stack"]);
    assert!(!tmp.path().join("out").exists());
    // Not a stack, `auto`: the 3-D problem, without a word of slices.
    let cfg = stack_config(tmp.path(), tpi, "");
    let o = recon(&["run", "--config", cfg.to_str().unwrap()], tmp.path());
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(!stderr(&o).contains("slices"));
    // A batch takes one coil and the uniform quadratic prior.
    let cfg = coil_stack_config(tmp.path(), "given", "stack = \"batch\"");
    std::fs::remove_dir_all(tmp.path().join("out")).unwrap();
    let o = recon(&["run", "--config", cfg.to_str().unwrap()], tmp.path());
    fails_with(&o, &["solver.stack = \"batch\"", "4 coils", "\"slices\""]);
    assert!(!tmp.path().join("out").exists());
    let cfg = stack_config(tmp.path(), STARS, "stack = \"sometimes\"");
    let o = recon(&["run", "--config", cfg.to_str().unwrap()], tmp.path());
    fails_with(&o, &["stack", "sometimes"]);
}

#[test]
fn a_stack_of_stars_ismrmrd_file_is_solved_as_slices_like_its_scan_file() {
    // tests/fixtures/test-stack.ismrmrd.h5: the ismrmrd package's file
    // (scripts/make-ismrmrd-fixture.py) of `recon simulate` of this
    // config without [engine] and [solver]: Shepp-Logan on 24 x 24 x 8,
    // 24 spokes of 40 samples on every partition (tests/fixtures/README.md).
    let tmp = tempfile::tempdir().unwrap();
    let stars = "kind = \"stack-of-stars\"\nspokes = 24\nsamples = 40";
    let synth = stack_config(tmp.path(), stars, "");
    let scan = tmp.path().join("scan.h5");
    let o = recon(
        &[
            "simulate",
            "--config",
            synth.to_str().unwrap(),
            "--out",
            scan.to_str().unwrap(),
        ],
        tmp.path(),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let fixture = common::repo().join("tests/fixtures/test-stack.ismrmrd.h5");
    let run = |file: &std::path::Path, dir: &std::path::Path| {
        let cfg = common::scan_run_config(dir, file, "");
        let o = recon(&["run", "--config", cfg.to_str().unwrap()], dir);
        assert!(o.status.success(), "{}", stderr(&o));
        assert!(
            stderr(&o).contains("solved as 8 2-D slices"),
            "{}",
            stderr(&o)
        );
    };
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    run(&scan, a.path());
    run(&fixture, b.path());
    let (x, y) = (
        common::recon_h5_magnitudes(a.path(), "recon"),
        common::recon_h5_magnitudes(b.path(), "recon"),
    );
    let e = relative_error(&x, &y);
    // The same samples; the ISMRMRD trajectory is stored normalised in
    // float32 (k / N), so its points differ by float32 rounding.
    assert!(e < 1e-4, "ISMRMRD against scan file: nrmse {e:e}");
}

#[test]
fn the_gridding_of_stacked_data_has_the_truths_mean_inside_the_object() {
    let tmp = tempfile::tempdir().unwrap();
    let cfg = stack_config(tmp.path(), STARS, "");
    let o = recon(&["run", "--config", cfg.to_str().unwrap()], tmp.path());
    assert!(o.status.success(), "{}", stderr(&o));
    let (g, t) = (
        common::recon_h5_magnitudes(tmp.path(), "gridding"),
        common::recon_h5_magnitudes(tmp.path(), "truth"),
    );
    let peak = t.iter().cloned().fold(0.0, f64::max);
    let inside: Vec<usize> = (0..t.len()).filter(|&i| t[i] >= 0.1 * peak).collect();
    let mean = |v: &[f64]| inside.iter().map(|&i| v[i]).sum::<f64>() / inside.len() as f64;
    let (mg, mt) = (mean(&g), mean(&t));
    // The bound: within 5% of the truth inside the object.
    assert!(
        (mg / mt - 1.0).abs() < 0.05,
        "gridding mean {mg:.4} against the truth's {mt:.4}"
    );
}

/// `stack_config` with 4 ring coils and `maps`; `solver` lines as there.
fn coil_stack_config(dir: &std::path::Path, maps: &str, solver: &str) -> std::path::PathBuf {
    let path = stack_config(dir, STARS, solver);
    let text = std::fs::read_to_string(&path).unwrap();
    let coils = format!(
        "[coils]\ncount = 4\narrangement = \"ring\"\nradius = 1.2\n\n[sense]\nmaps = \"{maps}\"\n\n[solver]"
    );
    std::fs::write(&path, text.replacen("[solver]", &coils, 1)).unwrap();
    path
}

#[test]
fn a_stack_with_several_coils_is_solved_as_slices_like_the_volume() {
    // With a delta voxel basis, SENSE's E^H E of a stack is block-diagonal
    // along z (Q has lag 0 only along z) and the volume's F^H D is Nz
    // times the slices' (each slice's data are the inverse DFT along k_z,
    // 1/Nz included): the slices and the volume pose the same equations.
    // Each slice takes its plane of the given maps.
    let (slices, volume) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let run = |dir: &std::path::Path, mode: &str| {
        let cfg = coil_stack_config(dir, "given", &format!("stack = \"{mode}\""));
        let text = std::fs::read_to_string(&cfg).unwrap();
        let text = text
            .replace("lambda = 0.01", "lambda = 0.0")
            .replace("iterations = 20", "iterations = 50")
            .replace(
                "precision = \"f64\"",
                "precision = \"f64\"\nbasis = \"delta\"",
            );
        std::fs::write(&cfg, text).unwrap();
        let o = recon(&["run", "--config", cfg.to_str().unwrap()], dir);
        assert!(o.status.success(), "{}", stderr(&o));
        o
    };
    let o = run(slices.path(), "slices");
    assert!(
        stderr(&o).contains("solved as 8 2-D slices"),
        "{}",
        stderr(&o)
    );
    run(volume.path(), "volume");
    let field = |dir: &std::path::Path, name: &str| {
        no_hdf5_locking();
        let f = recon_io::hdf5::File::open(dir.join("out/recon.h5")).unwrap();
        let v = f.dataset(name).unwrap().read_raw::<Complex<f32>>().unwrap();
        v.iter()
            .map(|c| Complex::new(c.re as f64, c.im as f64))
            .collect::<Vec<_>>()
    };
    let scaled: Vec<_> = field(slices.path(), "fhd")
        .iter()
        .map(|c| c * 8.0)
        .collect();
    let e = nrmse(&scaled, &field(volume.path(), "fhd"));
    // Measured 4.7e-8: float32 rounding of recon.h5.
    assert!(e < 1e-6, "F^H D, 8 x slices against volume: nrmse {e:e}");
    let e = nrmse(
        &field(slices.path(), "recon"),
        &field(volume.path(), "recon"),
    );
    // Measured 1.1e-2: the same equations, but CG on the volume shares its
    // step sizes over the slices, so after 50 iterations its iterate is not
    // the slices' (a wrong map plane or coil split gives tens of percent).
    assert!(e < 5e-2, "slices against volume: nrmse {e:e}");
}

#[test]
fn a_stack_with_estimated_maps_runs_as_slices_and_saves_each_slices_maps() {
    let (tmp, volume) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let cfg = coil_stack_config(tmp.path(), "estimate", "");
    let o = recon(&["run", "--config", cfg.to_str().unwrap()], tmp.path());
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("solved as 8 2-D slices"),
        "{}",
        stderr(&o)
    );
    let cfg = coil_stack_config(volume.path(), "estimate", "stack = \"volume\"");
    let o = recon(&["run", "--config", cfg.to_str().unwrap()], volume.path());
    assert!(o.status.success(), "{}", stderr(&o));
    let (s, v) = (report(tmp.path()), report(volume.path()));
    let db = |r: &serde_json::Value| r["psnr_db"].as_f64().unwrap_or(f64::NAN);
    // Each slice's maps come from its own 2-D data, the volume's from the
    // 3-D data; measured 24.77 dB against 25.13 (the slices' W has no
    // differences along z, as with one coil).
    assert!(
        db(&s) > db(&v) - 1.0,
        "slices {:.2} dB, volume {:.2} dB",
        db(&s),
        db(&v)
    );
    no_hdf5_locking();
    let f = recon_io::hdf5::File::open(tmp.path().join("out/recon.h5")).unwrap();
    let maps = f.dataset("coil_maps").unwrap();
    assert_eq!(maps.shape(), [4, 8, 24, 24]);
    let m = maps.read_raw::<Complex<f32>>().unwrap();
    let n = 8 * 24 * 24;
    // Every slice has its maps: unit root sum of squares wherever the
    // estimate is defined (the maps are 0 where no coil sees signal).
    for j in 0..8 {
        let at = j * 24 * 24 + 12 * 24 + 12;
        let rss: f32 = (0..4).map(|c| m[c * n + at].norm_sqr()).sum::<f32>().sqrt();
        assert!((rss - 1.0).abs() < 1e-3, "slice {j}: rss {rss}");
    }
}

/// `||x - y|| / ||x||` of two magnitude images.
fn relative_error(x: &[f64], y: &[f64]) -> f64 {
    (x.iter().zip(y).map(|(p, q)| (p - q).powi(2)).sum::<f64>()
        / x.iter().map(|p| p * p).sum::<f64>())
    .sqrt()
}

#[test]
fn the_split_scales_white_noise_by_its_noise_gain() {
    // White noise of variance 1 per partition sample, split into slices:
    // each slice sample's variance is sum_p 1 / (Nz r_p)^2 (Stack::noise_gain),
    // what lambda = "auto" takes as a slice's noise level. 20000 samples
    // per slice: the sample variance is within a few percent.
    for basis in [Basis::Box, Basis::Delta] {
        let grid = Grid::new([8, 6, 6], [200.0, 150.0, 90.0])
            .unwrap()
            .with_basis(basis);
        let traj = stars(250, 80).generate(&grid).unwrap();
        let stack = Stack::detect(&grid, &traj).unwrap();
        let mut rng = Rng::new(5);
        // complex noise of variance 1: each part of variance 1/2
        let noise: Vec<Complex<f64>> = rng
            .complex(traj.len())
            .iter()
            // Rng::complex's parts are uniform on [-1, 1], of variance 1/3
            // each: scaled by sqrt(3/2), the complex variance is 1
            .map(|c| *c * 1.5f64.sqrt())
            .collect();
        let slices = stack.slices(&noise).unwrap();
        let gain = stack.noise_gain();
        for (j, s) in slices.iter().enumerate() {
            let var = s.iter().map(|c| c.norm_sqr()).sum::<f64>() / s.len() as f64;
            assert!(
                (var / gain - 1.0).abs() < 0.05,
                "{basis:?} slice {j}: {var} against {gain}"
            );
        }
    }
}

#[test]
fn lambda_auto_chooses_for_a_batch_and_for_slices() {
    // One lambda for a batch of slices (over all its data), one per slice
    // one by one; the stack's noise (SNR 30) passes through the split.
    for mode in ["batch", "slices"] {
        let dir = tempfile::tempdir().unwrap();
        let cfg = stack_config(dir.path(), STARS, &format!("stack = \"{mode}\""));
        let text = std::fs::read_to_string(&cfg)
            .unwrap()
            .replace("lambda = 0.01\n", "")
            + "\n[noise]\nsnr = 30.0\nseed = 2\n";
        std::fs::write(&cfg, text).unwrap();
        let o = recon(&["run", "--config", cfg.to_str().unwrap()], dir.path());
        assert!(o.status.success(), "{mode}: {}", stderr(&o));
        let r = report(dir.path());
        let rule = r["lambda_rule"].as_str().unwrap();
        assert!(rule.contains("from the noise data"), "{mode}: {rule}");
        assert!(r["lambda_unmet"].is_null(), "{mode}: {}", r["lambda_unmet"]);
        // the chosen lambda's misfit met the noise level within 2% (with the
        // noise gain wrong, a slice's target would be off by its factor)
        let lambda = r["lambda"].as_f64().unwrap();
        let tried = r["lambda_tried"].as_array().unwrap();
        let chosen = tried
            .iter()
            .find(|t| t[0].as_f64() == Some(lambda))
            .unwrap();
        assert!(
            (chosen[1].as_f64().unwrap() - 1.0).abs() <= 0.02,
            "{mode}: {chosen}"
        );
    }
}
