//! SENSE: the multi-coil operator against its definition and a dense
//! solve, one coil against the single-coil path, maps estimated from
//! synthetic coil data against the true ones, and version 2 scan files
//! (the driver end to end: sense_runs.rs).

use crate::common;

use common::*;
use ndarray::{Array1, Array2};
use ndarray_linalg::Solve;
use recon_cg::{Normal, Params, Problem, Toeplitz};
use recon_core::{metrics::nrmse, Backend, Complex, CpuBackend, Grid, Stencil};

type C = Complex<f64>;

/// Random complex maps, one per coil.
fn random_maps(coils: usize, n: usize, rng: &mut Rng) -> Vec<Vec<C>> {
    (0..coils).map(|_| rng.complex(n)).collect()
}

/// `E^H d = sum_c S_c^H F^H d_c` and `E x = [F (S_c x)]_c` by the exact
/// plan, from their definitions.
fn e_adjoint(grid: &Grid, traj: &[[f64; 3]], maps: &[Vec<C>], d: &[C]) -> Vec<C> {
    let cpu = CpuBackend::<f64>::new();
    let mut out = vec![C::default(); grid.len()];
    for (c, s) in maps.iter().enumerate() {
        let f = common::fhd(&cpu, grid, traj, &d[c * traj.len()..][..traj.len()]);
        for ((o, f), s) in out.iter_mut().zip(&f).zip(s) {
            *o += s.conj() * f;
        }
    }
    out
}

fn e_forward(grid: &Grid, traj: &[[f64; 3]], maps: &[Vec<C>], x: &[C]) -> Vec<C> {
    let cpu = CpuBackend::<f64>::new();
    let plan = exact(&cpu, grid, traj);
    let mut out = Vec::new();
    for s in maps {
        let sx: Vec<C> = s.iter().zip(x).map(|(s, x)| s * x).collect();
        let mut d = vec![C::default(); traj.len()];
        plan.forward(&mut d, &sx, &mut no_progress()).unwrap();
        out.extend(d);
    }
    out
}

#[test]
fn sense_operator_is_adjoint_and_its_normal_is_e_h_e() {
    let grid = Grid::new([6, 4, 4], [150.0; 3]).unwrap();
    let mut rng = Rng::new(41);
    let traj = random_traj(&grid, 70, &mut rng);
    let maps = random_maps(3, grid.len(), &mut rng);
    let x = rng.complex(grid.len());
    let d = rng.complex(3 * traj.len());
    // <E x, d> = <x, E^H d>: both sides are exact sums in float64.
    let lhs = inner(&e_forward(&grid, &traj, &maps, &x), &d);
    let rhs = inner(&x, &e_adjoint(&grid, &traj, &maps, &d));
    assert!((lhs - rhs).norm() < 1e-10 * lhs.norm(), "{lhs} vs {rhs}");

    // SENSE's data term (the Toeplitz product per coil) against E^H E
    // from the plan.
    let cpu = CpuBackend::<f64>::new();
    let q = common::q(&cpu, &grid, &traj);
    let t = Toeplitz::new(&cpu, &grid, &q).unwrap();
    let plan = exact(&cpu, &grid, &traj);
    let mut sense = recon_encoding::SenseTerm::new(&cpu, &plan, t, &maps, None).unwrap();
    assert_eq!(sense.coils(), 3);
    let mut got = cpu.zeros(grid.len()).unwrap();
    sense.apply(&cpu, &mut got, &x).unwrap();
    let want = e_adjoint(&grid, &traj, &maps, &e_forward(&grid, &traj, &maps, &x));
    // The Toeplitz product is exact up to FFT rounding in float64.
    let err = nrmse(&got, &want);
    assert!(err < 1e-10, "SENSE's data term vs E^H E: {err:e}");
}

#[test]
fn sense_cg_matches_dense_solve() {
    let grid = Grid::new([4, 4, 4], [100.0; 3]).unwrap();
    let n = grid.len();
    let mut rng = Rng::new(42);
    let traj = random_traj(&grid, 60, &mut rng);
    let coils = 3;
    let maps = random_maps(coils, n, &mut rng);
    let d = rng.complex(coils * traj.len());
    let cpu = CpuBackend::<f64>::new();

    // Dense: A = E^H E + lambda W^H W, column by column; b = E^H d.
    let q = common::q(&cpu, &grid, &traj);
    let b = e_adjoint(&grid, &traj, &maps, &d);
    let mut problem = sense_problem(&cpu, &grid, &traj, &q, &b, &maps, None).unwrap();
    let lambda_rel = 0.05;
    let lambda = problem.lambda_abs(lambda_rel);
    let peak = (0..n)
        .map(|i| maps.iter().map(|m| m[i].norm_sqr()).sum::<f64>())
        .fold(0.0, f64::max);
    let q_peak = recon_cg::q_peak(&grid, &q).unwrap();
    assert!((lambda - lambda_rel * q_peak * peak).abs() < 1e-12 * lambda);
    let w = Stencil::uniform(grid.n);
    let wd = cpu.upload_weights(&w).unwrap();
    let mut a = Array2::<C>::zeros((n, n));
    for j in 0..n {
        let mut e = vec![C::default(); n];
        e[j] = C::new(1.0, 0.0);
        let mut col = e_adjoint(&grid, &traj, &maps, &e_forward(&grid, &traj, &maps, &e));
        cpu.add_whw(&mut col, lambda, &e, &wd).unwrap();
        for i in 0..n {
            a[[i, j]] = col[i];
        }
    }
    let dense = a.solve(&Array1::from(b.clone())).unwrap();

    let params = Params {
        iterations: 400,
        tolerance: 1e-13,
    };
    let (x, info) = problem
        .solve(&cpu, &w, lambda_rel, &params, &mut |_, _| {})
        .unwrap();
    assert!(info.relative_residual <= 1e-13, "{info:?}");
    // Residual 1e-13 times the condition number (below 1e4 here).
    let err = nrmse(&x, dense.as_slice().unwrap());
    assert!(err < 1e-8, "SENSE CG vs dense: {err:e}");
}

#[test]
fn one_coil_of_sensitivity_one_is_the_single_coil_problem() {
    let grid = Grid::new([6, 6, 4], [200.0; 3]).unwrap();
    let mut rng = Rng::new(43);
    let traj = random_traj(&grid, 200, &mut rng);
    let data = rng.complex(traj.len());
    let cpu = CpuBackend::<f64>::new();
    let q = common::q(&cpu, &grid, &traj);
    let fhd = common::fhd(&cpu, &grid, &traj, &data);
    let ones = vec![vec![C::new(1.0, 0.0); grid.len()]];
    let params = Params {
        iterations: 20,
        tolerance: 0.0,
    };
    let w = Stencil::uniform(grid.n);
    let mut single = Problem::new(&cpu, &grid, &q, &fhd).unwrap();
    let mut multi = sense_problem(&cpu, &grid, &traj, &q, &fhd, &ones, None).unwrap();
    assert_eq!(single.lambda_abs(0.1), multi.lambda_abs(0.1));
    let (x1, i1) = single
        .solve(&cpu, &w, 0.1, &params, &mut |_, _| {})
        .unwrap();
    let (xc, ic) = multi.solve(&cpu, &w, 0.1, &params, &mut |_, _| {}).unwrap();
    // Multiplying by 1 and by conj(1) is exact: the same numbers.
    assert_eq!(i1, ic);
    assert!(x1 == xc, "one coil of sensitivity 1 differs from one coil");
}

#[test]
fn maps_with_bad_shapes_are_refused() {
    let grid = Grid::new([4, 4, 4], [100.0; 3]).unwrap();
    let mut rng = Rng::new(44);
    let traj = random_traj(&grid, 30, &mut rng);
    let cpu = CpuBackend::<f64>::new();
    let q = common::q(&cpu, &grid, &traj);
    let fhd = vec![C::default(); 64];
    let short = vec![vec![C::new(1.0, 0.0); 64], vec![C::new(1.0, 0.0); 63]];
    let e = sense_problem(&cpu, &grid, &traj, &q, &fhd, &short, None)
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.contains("coil map") && e.contains("expected length 64, got 63"),
        "{e}"
    );
    let zero = vec![vec![C::default(); 64]];
    let e = sense_problem(&cpu, &grid, &traj, &q, &fhd, &zero, None)
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("coil maps"), "{e}");
}

#[test]
fn maps_estimated_from_synthetic_coil_data_agree_with_the_true_ones() {
    // Sodium brain on 32^3, 8 coils on a ring: noiseless, then at SNR 30
    // (the flagship's noise) with correlated coil noise.
    let grid = Grid::new([32, 32, 32], [240.0; 3]).unwrap();
    let phantom = recon_synth::Phantom::load(&repo().join("phantoms/sodium-brain.toml")).unwrap();
    let traj: recon_synth::Trajectory =
        toml::from_str("kind = \"tpi\"\ncones = 16\nprojections = 600\nsamples = 60\np = 0.3\n")
            .unwrap();
    let traj = traj.generate(&grid).unwrap();
    let coils = recon_synth::Coils {
        count: 8,
        arrangement: recon_synth::Arrangement::Ring,
        radius: 1.2,
    };
    let clean = coils.kspace(&phantom, &grid, &traj);
    let truth: Vec<Vec<C>> = coils
        .sensitivities()
        .iter()
        .map(|s| s.on_grid(&grid))
        .collect();
    let object = phantom.rasterise(&grid, 2);
    let peak = object.iter().copied().fold(0.0, f64::max);
    // Inside the object: where the phantom has a tenth of its peak.
    let mask: Vec<bool> = object.iter().map(|&v| v > 0.1 * peak).collect();
    let cpu = CpuBackend::<f64>::new();
    let g = recon_gridding::Gridding::new(&cpu, &grid, &traj, &Default::default()).unwrap();
    for noise in [None, Some(30.0)] {
        let mut data = clean.clone();
        if let Some(snr) = noise {
            let n = recon_synth::CoilNoise {
                snr,
                seed: 5,
                correlation: 0.2,
            };
            recon_synth::add_coil_noise(&mut data, 8, n);
        }
        let low: Vec<Vec<C>> = data
            .chunks_exact(traj.len())
            .map(|d| g.image(d, Some(12.0)).unwrap())
            .collect();
        let est = recon_coils::estimate_maps(grid.n, &low, &Default::default()).unwrap();
        let a = recon_coils::agreement(&est, &truth, &mask).unwrap();
        // ESPIRiT, as a run with sense.maps = "espirit" estimates them.
        let esp = recon_pipeline::espirit_from_data(&g, &grid, &data, 8.0).unwrap();
        let e = recon_coils::agreement(&esp, &truth, &mask).unwrap();
        println!("maps at SNR {noise:?}: agreement Inati {a:.4}, ESPIRiT {e:.4}");
        // The bound: normalised correlation inside the object.
        assert!(a >= 0.95, "SNR {noise:?}: agreement {a}");
        assert!(e >= 0.99, "SNR {noise:?}: ESPIRiT's agreement {e}");
    }
}

/// A small version 2 scan: 3 coils, noise samples or covariance, maps.
fn v2_scan(noise: Option<recon_io::scan::CoilNoise>, with_maps: bool) -> recon_io::scan::Scan {
    let grid = Grid::new([8, 8, 8], [200.0; 3]).unwrap();
    let mut rng = Rng::new(45);
    let traj = random_traj(&grid, 100, &mut rng);
    recon_io::scan::Scan {
        grid,
        coils: 3,
        data: rng.complex(300),
        traj,
        noise,
        maps: with_maps.then(|| random_maps(3, grid.len(), &mut rng)),
        truth: None,
        anatomy: None,
        geometry: None,
        parts: Vec::new(),
    }
}

#[test]
fn version_2_scan_files_round_trip_and_version_1_still_reads() {
    use recon_io::scan::{read_scan, write_scan, CoilNoise, Scan};
    let tmp = tempfile::tempdir().unwrap();
    let mut rng = Rng::new(46);
    // float32 on disk: values come back to float32's rounding.
    let close = |a: &[C], b: &[C]| nrmse(a, b) < 1e-6;
    for (i, scan) in [
        v2_scan(Some(CoilNoise::Samples(rng.complex(3 * 40))), true),
        v2_scan(Some(CoilNoise::Covariance(rng.complex(9))), false),
        v2_scan(None, true),
    ]
    .into_iter()
    .enumerate()
    {
        let path = tmp.path().join(format!("v2-{i}.h5"));
        write_scan(&path, &scan).unwrap();
        let back = read_scan(&path, false).unwrap();
        assert_eq!(back.coils, 3);
        assert!(close(&back.data, &scan.data));
        match (&back.noise, &scan.noise) {
            (Some(CoilNoise::Samples(a)), Some(CoilNoise::Samples(b)))
            | (Some(CoilNoise::Covariance(a)), Some(CoilNoise::Covariance(b))) => {
                assert!(close(a, b))
            }
            (None, None) => {}
            other => panic!("noise came back as {other:?}"),
        }
        assert_eq!(back.maps.is_some(), scan.maps.is_some());
        if let (Some(a), Some(b)) = (&back.maps, &scan.maps) {
            assert!(close(&a.concat(), &b.concat()));
        }
        // The child process's encoding carries all of it.
        assert_eq!(Scan::from_bytes(&back.to_bytes()), Some(back));
    }
    // One coil, no noise or maps: a version 1 file, [M, 2].
    let one = Scan {
        coils: 1,
        data: rng.complex(100),
        noise: None,
        maps: None,
        ..v2_scan(None, false)
    };
    let path = tmp.path().join("v1.h5");
    write_scan(&path, &one).unwrap();
    let f = recon_io::hdf5::File::open(&path).unwrap();
    assert_eq!(f.dataset("kspace/data").unwrap().shape(), vec![100, 2]);
    assert_eq!(read_scan(&path, false).unwrap().coils, 1);
}

#[test]
fn version_2_files_whose_parts_disagree_are_refused_naming_the_dataset() {
    use recon_io::hdf5;
    use recon_io::scan::{read_scan, write_scan, CoilNoise};
    let tmp = tempfile::tempdir().unwrap();
    let mut rng = Rng::new(47);
    let base = tmp.path().join("base.h5");
    write_scan(
        &base,
        &v2_scan(Some(CoilNoise::Samples(rng.complex(60))), true),
    )
    .unwrap();
    let replace = |name: &str, shape: &[usize]| {
        let p = tmp.path().join(format!("{}.h5", name.replace('/', "-")));
        std::fs::copy(&base, &p).unwrap();
        let f = hdf5::File::open_rw(&p).unwrap();
        if f.link_exists(name) {
            f.unlink(name).unwrap();
        }
        let n: usize = shape.iter().product();
        f.new_dataset::<f32>()
            .shape(shape.to_vec())
            .create(name)
            .unwrap()
            .write_raw(&vec![0.5f32; n])
            .unwrap();
        f.close().unwrap();
        p
    };
    for (name, shape, expect) in [
        (
            "kspace/noise",
            vec![2, 20, 2],
            "has 2 channels but kspace/data has 3",
        ),
        (
            "coils/maps",
            vec![4, 8, 8, 8, 2],
            "has 4 channels but kspace/data has 3",
        ),
        (
            "coils/maps",
            vec![3, 8, 8, 6, 2],
            "must match /kspace matrix",
        ),
        ("kspace/noise_covariance", vec![3, 3, 2], "both present"),
        ("kspace/data", vec![3, 99, 2], "has 99 samples per coil"),
        ("kspace/data", vec![0, 100, 2], "has 0 coils"),
    ] {
        let p = replace(name, &shape);
        let e = read_scan(&p, false).unwrap_err().to_string();
        assert!(
            e.contains(name) && e.contains(expect),
            "{name} {shape:?}: {e}"
        );
    }
    // A covariance of 3 coils where one has no noise of its own: singular.
    // The run stops at the config, naming the dataset, with nothing written.
    let mut psi = vec![C::default(); 9];
    psi[0] = C::new(1.0, 0.0);
    psi[4] = C::new(1.0, 0.0);
    let file = tmp.path().join("singular.h5");
    write_scan(&file, &v2_scan(Some(CoilNoise::Covariance(psi)), false)).unwrap();
    let cfg = scan_run_config(tmp.path(), &file, "");
    let out = recon(
        &["--config", cfg.to_str().unwrap()],
        &tmp.path().join("cache"),
    );
    fails_with(&out, &["kspace/noise_covariance", "singular"]);
    assert!(!tmp.path().join("out").exists());
    // Maps asked of a file without them.
    let file = tmp.path().join("nomaps.h5");
    write_scan(&file, &v2_scan(None, false)).unwrap();
    let cfg = scan_run_config(tmp.path(), &file, "[sense]\nmaps = \"given\"\n");
    let out = recon(
        &["--config", cfg.to_str().unwrap()],
        &tmp.path().join("cache"),
    );
    fails_with(&out, &["sense.maps", "no /coils/maps"]);
}

#[test]
fn the_library_loads_a_scan_config_in_process() {
    // recon-pipeline's own reader (the binary reads in a child process):
    // the scan comes back as written, to float32's rounding on disk.
    let tmp = tempfile::tempdir().unwrap();
    let scan = v2_scan(None, true);
    let file = tmp.path().join("scan.h5");
    recon_io::scan::write_scan(&file, &scan).unwrap();
    let cfg = scan_run_config(tmp.path(), &file, "[sense]\nmaps = \"given\"");
    let l = recon::config::load(&cfg, None, &recon::pipeline::read_in_process).unwrap();
    let recon::config::Source::Scan(s) = &l.source else {
        panic!("a scan config loads a scan");
    };
    assert_eq!((s.coils, s.traj.len()), (3, 100));
    assert!(nrmse(&s.data, &scan.data) < 1e-6, "data");
    assert!(l.warnings.is_empty(), "{:?}", l.warnings);
    // a missing file is named with its key
    let cfg = scan_run_config(tmp.path(), &tmp.path().join("none.h5"), "");
    let e = recon::config::load(&cfg, None, &recon::pipeline::read_in_process)
        .err()
        .unwrap();
    let chain = format!(
        "{e}: {}",
        std::error::Error::source(&e).map_or(String::new(), |s| s.to_string())
    );
    assert!(chain.contains("scan.file"), "{chain}");
}
