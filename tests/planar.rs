//! 2-D grids (matrix z = 1, samples at k_z = 0) through the 3-D machinery
//! with a flat z: the encoding against its explicit matrix, the Toeplitz
//! product against explicit F^H F, the NUFFT against the exact engine,
//! the priors' operators, the gridding baseline's scale, and runs of a
//! 2-D config and of a scan file with a [M, 2] trajectory.

use crate::common;

use common::*;
use recon_cg::{Normal, Toeplitz};
use recon_core::{metrics::nrmse, Backend, Complex, CpuBackend, Grid};
use recon_encoding::{Engine, Plan};
use recon_ops::testing::{adjoint_error, normal_error};
use recon_ops::{Gradient, LinearOp, Wavelet};

type Cpu = CpuBackend<f64>;

fn flat_grid() -> Grid {
    Grid::new([10, 8, 1], [200.0, 160.0, 5.0]).unwrap()
}

#[test]
fn flat_encoding_and_toeplitz_match_the_explicit_matrix() {
    let grid = flat_grid();
    assert_eq!(grid.doubled(), [20, 16, 1]);
    let mut rng = Rng::new(71);
    let traj = random_traj(&grid, 200, &mut rng);
    let x = rng.complex(grid.len());
    let n = grid.len();
    let (fx, want) = explicit_normal(&explicit_f(&grid, &traj), n, &x);
    let be = Cpu::new();
    // The exact engine's F against the matrix: f64 sums of 80 terms.
    assert!(nrmse(&common::forward(&be, &grid, &traj, &x), &fx) < 1e-12);
    // F^H F by Q (exact, and by the NUFFT at 1e-10) and FFTs of the
    // (2N_x, 2N_y, 1) grid: the 3-D test's bound, f64.
    let q_exact = common::q(&be, &grid, &traj);
    let nufft = Plan::new(&be, Engine::Nufft { tolerance: 1e-10 }, &grid, &traj).unwrap();
    let q_nufft = recon_q::compute(&nufft, &mut no_progress()).unwrap();
    // The NUFFT's Q against the exact one: within its tolerance.
    assert!(nrmse(&q_nufft, &q_exact) < 1e-9);
    for q in [&q_exact, &q_nufft] {
        let mut t = Toeplitz::new(&be, &grid, q).unwrap();
        let mut out = be.zeros(n).unwrap();
        t.apply(&be, &mut out, &be.upload(&x).unwrap()).unwrap();
        let err = nrmse(&out, &want);
        assert!(err < 1e-8, "flat Toeplitz against explicit F^H F: {err:e}");
    }
    // F^H D and F by the NUFFT against the exact engine.
    let d = rng.complex(traj.len());
    let mut fhd = vec![Complex::default(); n];
    nufft.adjoint(&mut fhd, &d, &mut no_progress()).unwrap();
    assert!(nrmse(&fhd, &common::fhd(&be, &grid, &traj, &d)) < 1e-9);
    let mut fwd = vec![Complex::default(); traj.len()];
    nufft.forward(&mut fwd, &x, &mut no_progress()).unwrap();
    assert!(nrmse(&fwd, &fx) < 1e-9);
}

#[test]
fn samples_off_the_plane_are_refused() {
    let grid = flat_grid();
    let traj = vec![[1.0, 2.0, 0.0], [0.5, -1.0, 0.25]];
    let be = Cpu::new();
    let err = Plan::new(&be, Engine::Exact, &grid, &traj)
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("k_z = 0") && err.contains("sample 1"), "{err}");
}

#[test]
fn prior_operators_on_a_flat_grid_are_adjoint() {
    let be = Cpu::new();
    let n = [16, 12, 1];
    let mut ops: Vec<(&str, Box<dyn LinearOp<Cpu>>)> = vec![
        ("gradient", Box::new(Gradient::new(&be, n).unwrap())),
        ("wavelet", Box::new(Wavelet::new(&be, n).unwrap())),
    ];
    for (name, op) in &mut ops {
        // f64 inner products of a few hundred terms.
        let a = adjoint_error(&be, op.as_mut(), 5).unwrap();
        let b = normal_error(&be, op.as_mut(), 6).unwrap();
        assert!(a < 1e-12 && b < 1e-12, "{name}: {a:e} {b:e}");
    }
}

#[test]
fn gridding_mean_on_a_flat_grid_matches_the_truth() {
    // Shepp-Logan's projection along z through a 240 mm slab, on 2-D
    // golden-angle radial (stack of stars, one partition).
    use recon_synth::{Phantom, Trajectory};
    let grid = Grid::new([48, 48, 1], [240.0; 3]).unwrap();
    let phantom = Phantom::load(&common::repo().join("phantoms/shepp-logan.toml")).unwrap();
    let traj = Trajectory::StackOfStars {
        spokes: 80,
        samples: 96,
        partitions: None,
        kmax: 1.0,
    }
    .generate(&grid)
    .unwrap();
    let data = phantom.kspace(&grid, &traj);
    let img = recon_gridding::reconstruct(
        &Cpu::new(),
        &grid,
        &traj,
        &data,
        &recon_gridding::Params::default(),
    )
    .unwrap();
    let truth = phantom.rasterise(&grid, 4);
    let peak = truth.iter().cloned().fold(0.0, f64::max);
    let inside: Vec<usize> = (0..truth.len())
        .filter(|&i| truth[i] >= 0.1 * peak)
        .collect();
    let mean =
        |v: &dyn Fn(usize) -> f64| inside.iter().map(|&i| v(i)).sum::<f64>() / inside.len() as f64;
    let (g, t) = (mean(&|i| img[i].norm()), mean(&|i| truth[i]));
    // The bound: within 5% of the truth inside the object
    // (measured: 1.003 of it).
    assert!(
        (g / t - 1.0).abs() < 0.05,
        "gridding mean {g:.4} against the truth's {t:.4}"
    );
}

/// A 2-D synthetic config: Shepp-Logan's projection on 2-D golden-angle
/// radial, 32 x 32.
fn flat_config(dir: &std::path::Path, trajectory: &str, device: &str) -> std::path::PathBuf {
    let phantom = common::repo().join("phantoms/shepp-logan.toml");
    let precision = if device == "cuda" { "f32" } else { "f64" };
    let text = format!(
        "[grid]\nmatrix = [32, 32, 1]\nfov_mm = 240.0\n\n[phantom]\nfile = \"{}\"\nsupersample = 3\n\n\
         [trajectory]\n{trajectory}\n\n[engine]\nprecision = \"{precision}\"\ndevice = \"{device}\"\n\n\
         [solver]\niterations = 20\nlambda = 0.01\n\n[output]\ndir = \"out\"\n",
        phantom.display().to_string().replace('\\', "/")
    );
    let path = dir.join("flat.toml");
    std::fs::write(&path, text).unwrap();
    path
}

const STARS: &str = "kind = \"stack-of-stars\"\nspokes = 60\nsamples = 64";

#[test]
fn a_2d_config_runs_and_writes_one_plane() {
    let tmp = tempfile::tempdir().unwrap();
    let cfg = flat_config(tmp.path(), STARS, "auto");
    let o = recon(&["run", "--config", cfg.to_str().unwrap()], tmp.path());
    assert!(o.status.success(), "{}", stderr(&o));
    let out = tmp.path().join("out");
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
    let psnr = |k: &str| report[k].as_f64().unwrap_or(f64::NAN);
    // Measured 28.1 dB (iterative) and 30.6 dB (gridding, whose taper hides
    // the ringing at the skull's edge) against the projection's truth; an
    // image off by a factor of 2 would lose more than 6 dB.
    assert!(
        psnr("psnr_db") > 24.0 && psnr("gridding_psnr_db") > 24.0,
        "{report}"
    );
    assert_eq!(report["matrix"], serde_json::json!([32, 32, 1]));
    // NIfTI: three dimensions, [32, 32, 1], the plane at z = 0.
    let nii = std::fs::read(out.join("recon.nii")).unwrap();
    let dim: Vec<i16> = (0..4)
        .map(|i| i16::from_le_bytes([nii[40 + 2 * i], nii[41 + 2 * i]]))
        .collect();
    assert_eq!(dim, [3, 32, 32, 1]);
    let qz = f32::from_le_bytes(nii[276..280].try_into().unwrap());
    assert_eq!(qz, 0.0);
}

#[test]
fn sparse_priors_run_on_a_2d_grid() {
    // ADMM with the circulant preconditioner (TV) and the wavelet prior:
    // Q's lag 0 and the wavelet's passes on a flat z.
    for kind in ["tv", "wavelet"] {
        let tmp = tempfile::tempdir().unwrap();
        let cfg = flat_config(tmp.path(), STARS, "cpu");
        let text = std::fs::read_to_string(&cfg)
            .unwrap()
            .replace("lambda = 0.01\n", "")
            + &format!("\n[prior]\nkind = \"{kind}\"\n");
        std::fs::write(&cfg, text).unwrap();
        let o = recon(&["run", "--config", cfg.to_str().unwrap()], tmp.path());
        assert!(o.status.success(), "{kind}: {}", stderr(&o));
        let report: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(tmp.path().join("out/report.json")).unwrap(),
        )
        .unwrap();
        // As the quadratic prior's run above (measured 25.9 and 25.8 dB at the
        // default lambda, untuned).
        let psnr = report["psnr_db"].as_f64().unwrap_or(f64::NAN);
        assert!(psnr > 24.0, "{kind}: {psnr}");
    }
}

#[test]
fn a_2d_grid_refuses_3d_trajectories() {
    let tmp = tempfile::tempdir().unwrap();
    let radial = "kind = \"radial\"\nspokes = 50\nsamples = 16";
    let cfg = flat_config(tmp.path(), radial, "cpu");
    let o = recon(&["run", "--config", cfg.to_str().unwrap()], tmp.path());
    fails_with(&o, &["trajectory.kind", "2-D"]);
    assert!(!tmp.path().join("out").exists());
}

/// A scan file on `matrix` with trajectory `traj` stored as `[M, width]`.
fn write_flat_scan(
    path: &std::path::Path,
    matrix: [i64; 3],
    traj: &[[f64; 3]],
    width: usize,
    data: &[Complex<f64>],
) {
    let ks = kspace_group(path, matrix);
    let t: Vec<f32> = traj
        .iter()
        .flat_map(|k| k[..width].iter().map(|v| *v as f32).collect::<Vec<_>>())
        .collect();
    ks.new_dataset::<f32>()
        .shape([traj.len(), width])
        .create("trajectory")
        .unwrap()
        .write_raw(&t)
        .unwrap();
    let d: Vec<f32> = data
        .iter()
        .flat_map(|c| [c.re as f32, c.im as f32])
        .collect();
    ks.new_dataset::<f32>()
        .shape([data.len(), 2])
        .create("data")
        .unwrap()
        .write_raw(&d)
        .unwrap();
}

#[test]
fn a_scan_file_with_a_2d_trajectory_reconstructs() {
    use recon_synth::{Phantom, Trajectory};
    no_hdf5_locking();
    let tmp = tempfile::tempdir().unwrap();
    let grid = Grid::new([32, 32, 1], [240.0; 3]).unwrap();
    let phantom = Phantom::load(&common::repo().join("phantoms/shepp-logan.toml")).unwrap();
    let traj = Trajectory::StackOfStars {
        spokes: 60,
        samples: 64,
        partitions: None,
        kmax: 1.0,
    }
    .generate(&grid)
    .unwrap();
    let data = phantom.kspace(&grid, &traj);
    let file = tmp.path().join("flat.h5");
    write_flat_scan(&file, [32, 32, 1], &traj, 2, &data);
    let cfg = scan_run_config(tmp.path(), &file, "");
    let o = recon(&["run", "--config", cfg.to_str().unwrap()], tmp.path());
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(tmp.path().join("out/recon.nii").exists());
    // [M, 2] on a 3-D matrix, and k_z off the plane on a 2-D one: refused,
    // by name, nothing written.
    for (i, (matrix, width, traj, expect)) in [
        (
            [32, 32, 4],
            2,
            traj.clone(),
            ["kspace/trajectory", "[M, 2]"],
        ),
        (
            [32, 32, 1],
            3,
            traj.iter().map(|k| [k[0], k[1], 0.25]).collect(),
            ["k_z = 0", "sample 0"],
        ),
    ]
    .into_iter()
    .enumerate()
    {
        let dir = tmp.path().join(format!("bad{i}"));
        std::fs::create_dir(&dir).unwrap();
        let file = dir.join("bad.h5");
        write_flat_scan(&file, matrix, &traj, width, &data);
        let cfg = scan_run_config(&dir, &file, "");
        let o = recon(&["run", "--config", cfg.to_str().unwrap()], &dir);
        fails_with(&o, &expect);
        assert!(!dir.join("out").exists());
    }
}

#[test]
fn a_2d_ismrmrd_file_reads_its_2d_trajectories() {
    // tests/fixtures/test-flat.ismrmrd.h5: the ismrmrd package's file
    // (trajectory_dimensions = 2) of `recon simulate` of Shepp-Logan's
    // projection, 32 x 32 x 1, stack of stars of 40 spokes of 40 samples
    // (tests/fixtures/README.md).
    use recon_synth::{Phantom, Trajectory};
    let fixture = common::repo().join("tests/fixtures/test-flat.ismrmrd.h5");
    let s = recon_io::ismrmrd::read_ismrmrd(&fixture, recon_io::ismrmrd::Units::Normalized, false)
        .unwrap();
    assert_eq!(s.grid.n, [32, 32, 1]);
    let traj = Trajectory::StackOfStars {
        spokes: 40,
        samples: 40,
        partitions: None,
        kmax: 1.0,
    }
    .generate(&s.grid)
    .unwrap();
    assert_eq!(s.traj.len(), traj.len());
    // float32 in the file; normalised k times 32 is exact in float32.
    for (a, b) in s.traj.iter().zip(&traj) {
        assert!(
            a[2] == 0.0 && (a[0] - b[0]).abs() < 1e-5 && (a[1] - b[1]).abs() < 1e-5,
            "{a:?} {b:?}"
        );
    }
    let phantom = Phantom::load(&common::repo().join("phantoms/shepp-logan.toml")).unwrap();
    let want = phantom.kspace(&s.grid, &traj);
    // The data, float32 and normalised by `recon simulate` by a power of
    // two: the same up to that scale and float32 rounding.
    let scale = s.data[0].norm() / want[0].norm();
    let e = nrmse(&s.data, &want.iter().map(|v| v * scale).collect::<Vec<_>>());
    assert!(e < 1e-6, "{e:e}");
}

#[test]
fn both_map_estimators_find_a_2d_scenes_coils_and_its_runs_reconstruct() {
    // Shepp-Logan's projection on 64 x 64, 8 synthetic coils on a ring
    // (in 2-D: each coil's profile at z = 0 times the projection), golden-
    // angle radial, SNR 30 with correlated coil noise.
    use recon_synth::{Coils, Phantom, Trajectory};
    let grid = Grid::new([64, 64, 1], [240.0; 3]).unwrap();
    let phantom = Phantom::load(&common::repo().join("phantoms/shepp-logan.toml")).unwrap();
    let traj = Trajectory::StackOfStars {
        spokes: 64,
        samples: 128,
        partitions: None,
        kmax: 1.0,
    }
    .generate(&grid)
    .unwrap();
    let coils = Coils {
        count: 8,
        arrangement: recon_synth::Arrangement::Ring,
        radius: 1.2,
    };
    let mut data = coils.kspace(&phantom, &grid, &traj);
    let noise = recon_synth::CoilNoise {
        snr: 30.0,
        seed: 3,
        correlation: 0.2,
    };
    recon_synth::add_coil_noise(&mut data, 8, noise);
    let truth: Vec<Vec<Complex<f64>>> = coils
        .sensitivities()
        .iter()
        .map(|s| s.on_grid(&grid))
        .collect();
    let object = phantom.rasterise(&grid, 2);
    let peak = object.iter().copied().fold(0.0, f64::max);
    let mask: Vec<bool> = object.iter().map(|&v| v > 0.1 * peak).collect();
    let cpu = Cpu::new();
    let g = recon_gridding::Gridding::new(&cpu, &grid, &traj, &Default::default()).unwrap();
    let sense = recon_pipeline::config::SenseCfg::default();
    let inati = recon_pipeline::maps_from_data(&g, &grid, &data, &sense).unwrap();
    let espirit = recon_pipeline::espirit_from_data(&g, &grid, &data, 12.0).unwrap();
    let (a, e) = (
        recon_coils::agreement(&inati, &truth, &mask).unwrap(),
        recon_coils::agreement(&espirit, &truth, &mask).unwrap(),
    );
    println!("2-D maps: agreement Inati {a:.4}, ESPIRiT {e:.4}");
    // The bound for synthetic maps.
    assert!(a >= 0.99 && e >= 0.99, "Inati {a}, ESPIRiT {e}");

    // Runs with each estimator and with the true maps.
    let phantom_file = common::repo().join("phantoms/shepp-logan.toml");
    for maps in ["estimate", "espirit", "given"] {
        let tmp = tempfile::tempdir().unwrap();
        let cfg = tmp.path().join("coils.toml");
        std::fs::write(
            &cfg,
            format!(
                "[grid]\nmatrix = [64, 64, 1]\nfov_mm = 240.0\n[phantom]\nfile = \"{}\"\nsupersample = 2\n\
                 [trajectory]\nkind = \"stack-of-stars\"\nspokes = 64\nsamples = 128\n[noise]\nsnr = 30.0\nseed = 3\n\
                 [coils]\ncount = 8\narrangement = \"ring\"\nradius = 1.2\nnoise_correlation = 0.2\n\
                 [sense]\nmaps = \"{maps}\"\n[engine]\nprecision = \"f64\"\n[solver]\niterations = 30\nlambda = 0.01\n\
                 [output]\ndir = \"out\"\n",
                phantom_file.display()
            ),
        )
        .unwrap();
        let o = recon(&["run", "--config", cfg.to_str().unwrap()], tmp.path());
        assert!(o.status.success(), "{}", stderr(&o));
        let r: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(tmp.path().join("out/report.json")).unwrap(),
        )
        .unwrap();
        let (it, gr) = (
            r["psnr_db"].as_f64().unwrap(),
            r["gridding_psnr_db"].as_f64().unwrap(),
        );
        println!("2-D, 8 coils, maps {maps}: iterative {it:.2} dB, gridding {gr:.2} dB");
        // A consistent 2-D coil model: SENSE well above the root sum of
        // squares (measured at 128 x 128: 33.2, 32.6 and 30.3 dB against 27.6).
        assert!(it > gr + 1.0 && it > 25.0, "{maps}: {it:.2} vs {gr:.2}");
    }
}
