//! GPU against CPU float64: every summation variant (F^H D, Q, the forward
//! model), the CG primitives, one CG solve, the whole small pipeline, and the
//! memory check. Without a usable GPU each test prints that it was skipped.
//!
//! These binaries also run on the GPU machine, where cargo is absent:
//! `RECON_BIN` and `RECON_REPO` then point at the carried `recon` binary and
//! the checkout (scripts/gpu.sh sets them).

mod common;

use common::*;
use recon_cg::{Normal, Params, Toeplitz};
use recon_core::{
    metrics::nrmse, Backend, CoilOp, Complex, CpuBackend, Direction, Grid, Ratio, Sign, Stencil,
    Targets,
};
use recon_cuda::{CudaBackend, Options, Tuning, Variant};
use std::path::PathBuf;
use std::process::Command;

/// Every variant, and the tuned kernels at each outputs-per-thread count.
fn all_shapes() -> Vec<(Variant, Tuning)> {
    let mut v: Vec<(Variant, Tuning)> = Variant::ALL
        .iter()
        .map(|&v| (v, Tuning::default()))
        .collect();
    for per_thread in [1, 2, 8] {
        v.push((
            Variant::Tuned,
            Tuning {
                per_thread,
                block: 128,
            },
        ));
        v.push((
            Variant::Streamed,
            Tuning {
                per_thread,
                block: 128,
            },
        ));
    }
    v
}

#[test]
fn every_variant_computes_fhd_and_q_like_cpu_f64() {
    let Some(mut b) = gpu(Options::default()) else {
        return;
    };
    // 7000 samples: several constant-memory chunks (3200), shared-memory
    // tiles (256) and partial ones. Nx = 16 takes the row kernels of
    // variants 5 and 6 at every outputs-per-thread count; Nx = 10 sends 4 and
    // 8 per thread to the generic kernels. Neither grid fills whole blocks.
    for n in [[16, 14, 18], [10, 12, 6]] {
        let grid = Grid::new(n, [220.0, 200.0, 240.0]).unwrap();
        let mut rng = Rng::new(31);
        let traj = random_traj(&grid, 7000, &mut rng);
        let data = rng.complex(traj.len());
        let cpu = CpuBackend::<f64>::new();
        let fhd_ref = common::fhd(&cpu, &grid, &traj, &data);
        let q_ref = common::q(&cpu, &grid, &traj);
        for (variant, tuning) in all_shapes() {
            b.options.variant = variant;
            b.options.tuning = tuning;
            let fhd = common::fhd(&b, &grid, &traj, &data);
            let q = common::q(&b, &grid, &traj);
            // float32 phases of up to ~25 turns and 7000-term float32 sums: ~1e-6.
            let (e1, e2) = (nrmse(&up(&fhd), &fhd_ref), nrmse(&up(&q), &q_ref));
            println!("{n:?} {variant:?} {tuning:?}: F^H D error {e1:.2e}, Q error {e2:.2e}");
            assert!(
                e1 < 2e-5,
                "{n:?} {variant:?} {tuning:?}: F^H D error {e1:e}"
            );
            assert!(e2 < 2e-5, "{n:?} {variant:?} {tuning:?}: Q error {e2:e}");
        }
    }
}

#[test]
fn forward_model_on_listed_targets_matches_cpu() {
    let Some(b) = gpu(Options::default()) else {
        return;
    };
    let grid = Grid::new([8, 8, 8], [200.0; 3]).unwrap();
    let mut rng = Rng::new(32);
    let traj = random_traj(&grid, 999, &mut rng);
    let x = rng.complex(grid.len());
    let want = common::forward(&CpuBackend::<f64>::new(), &grid, &traj, &x);
    let got = common::forward(&b, &grid, &traj, &down(&x));
    // float32 over 512-term sums.
    assert!(nrmse(&up(&got), &want) < 2e-5);
}

#[test]
fn primitives_match_cpu() {
    let Some(b) = gpu(Options::default()) else {
        return;
    };
    let cpu = CpuBackend::<f32>::new();
    let n = [6, 10, 4];
    let len = 240;
    let mut rng = Rng::new(33);
    let x = down(&rng.complex(len));
    let y = down(&rng.complex(len));
    let (gx, gy) = (b.upload(&x).unwrap(), b.upload(&y).unwrap());
    let get = |v: &cudarc_vec::V| -> Vec<Complex<f32>> {
        let mut h = vec![Complex::default(); b.len(v)];
        b.download(&mut h, v).unwrap();
        h
    };
    // float32 elementwise and double reductions: rounding only.
    let close = |a: &[Complex<f32>], c: &[Complex<f32>]| nrmse(&up(a), &up(c)) < 1e-6;

    let (mut c1, mut g1) = (x.clone(), b.upload(&x).unwrap());
    cpu.axpy(&mut c1, 0.7, &y).unwrap();
    b.axpy(&mut g1, 0.7, &gy).unwrap();
    assert!(close(&get(&g1), &c1), "axpy");
    // CG's scalars on the device: s = [floor, <x, y>, <y, y>, a negative, 0]
    // and coefficients from them, gated as recon_core::Ratio says.
    let init = [2.0, 0.0, 0.0, -1.0, 0.0];
    let (mut cs, mut gs) = (cpu.scalars(&init).unwrap(), b.scalars(&init).unwrap());
    for (slot, u, v, gu, gv) in [(1, &x, &y, &gx, &gy), (2, &y, &y, &gy, &gy)] {
        cpu.dot_re_to(&mut cs, slot, u, v).unwrap();
        b.dot_re_to(&mut gs, slot, gu, gv).unwrap();
    }
    let mut read = [0.0; 5];
    b.read_scalars(&mut read, &gs).unwrap();
    for i in 0..5 {
        assert!(
            (read[i] - cs[i]).abs() < 1e-9 * cs[i].abs().max(1.0),
            "scalars {read:?} vs {cs:?}"
        );
    }
    let ratio = |num, den| Ratio { num, den, floor: 0 };
    // <y, y> / <y, y> = 1 and <x, y> / <y, y>, each above the floor 2;
    // then over a negative, over 0 and from below the floor: 0.
    for r in [
        ratio(2, 2),
        ratio(1, 2),
        ratio(2, 3),
        ratio(2, 4),
        ratio(0, 2),
    ] {
        cpu.axpy_ratio(&mut c1, -0.6, r, &cs, &y).unwrap();
        b.axpy_ratio(&mut g1, -0.6, r, &gs, &gy).unwrap();
        assert!(close(&get(&g1), &c1), "axpy_ratio {r:?}");
        cpu.xpby_ratio(&mut c1, &x, r, &cs).unwrap();
        b.xpby_ratio(&mut g1, &gx, r, &gs).unwrap();
        assert!(close(&get(&g1), &c1), "xpby_ratio {r:?}");
    }
    assert!(b.axpy_ratio(&mut g1, 1.0, ratio(5, 1), &gs, &gy).is_err());
    cpu.mul(&mut c1, &y).unwrap();
    b.mul(&mut g1, &gy).unwrap();
    assert!(close(&get(&g1), &c1), "mul");
    for op in [CoilOp::Forward, CoilOp::Adjoint, CoilOp::AddAdjoint] {
        cpu.coil(&mut c1, op, &y, &x).unwrap();
        b.coil(&mut g1, op, &gy, &gx).unwrap();
        assert!(close(&get(&g1), &c1), "coil {op:?}");
    }
    let (dc, dg) = (cpu.dot_re(&x, &y).unwrap(), b.dot_re(&gx, &gy).unwrap());
    assert!(
        (dc - dg).abs() < 1e-9 * dc.abs().max(1.0),
        "dot {dc} vs {dg}"
    );

    let mut cp = vec![Complex::default(); 8 * len];
    let mut gp = b.zeros(8 * len).unwrap();
    cpu.pad(&mut cp, &x, n).unwrap();
    b.pad(&mut gp, &gx, n).unwrap();
    assert!(close(&get(&gp), &cp), "pad");
    let d = n.map(|v| 2 * v);
    cpu.fft3(&mut cp, d, Direction::Forward).unwrap();
    b.fft3(&mut gp, d, Direction::Forward).unwrap();
    // cuFFT and rustfft round differently: 1e-5 relative on a 1920-point FFT.
    assert!(nrmse(&up(&get(&gp)), &up(&cp)) < 1e-5, "fft");
    cpu.fft3(&mut cp, d, Direction::Inverse).unwrap();
    b.fft3(&mut gp, d, Direction::Inverse).unwrap();
    assert!(nrmse(&up(&get(&gp)), &up(&cp)) < 1e-5, "inverse fft");
    let mut cc = vec![Complex::default(); len];
    let mut gc = b.zeros(len).unwrap();
    cpu.crop(&mut cc, &cp, n).unwrap();
    b.crop(&mut gc, &gp, n).unwrap();
    assert!(nrmse(&up(&get(&gc)), &up(&cc)) < 1e-5, "crop");

    let w = Stencil::weighted(
        n,
        [0, 1, 2].map(|_| (0..len).map(|_| 0.5 + rng.next_f64()).collect()),
    )
    .unwrap()
    .with_diag((0..len).map(|_| rng.next_f64()).collect())
    .unwrap();
    let (cw, gw) = (
        cpu.upload_weights(&w).unwrap(),
        b.upload_weights(&w).unwrap(),
    );
    let (mut co, mut go) = (y.clone(), b.upload(&y).unwrap());
    cpu.add_whw(&mut co, 0.3, &x, &cw).unwrap();
    b.add_whw(&mut go, 0.3, &gx, &gw).unwrap();
    assert!(close(&get(&go), &co), "W^H W");
}

/// The Vector type, named for the closure above.
mod cudarc_vec {
    pub type V = <recon_cuda::CudaBackend as recon_core::Backend>::Vector;
}

#[test]
fn cg_solve_matches_cpu_f64() {
    let Some(b) = gpu(Options::default()) else {
        return;
    };
    let grid = Grid::new([12, 12, 12], [220.0; 3]).unwrap();
    let mut rng = Rng::new(34);
    let traj = random_traj(&grid, 6000, &mut rng);
    let data = rng.complex(traj.len());
    let params = Params {
        iterations: 15,
        tolerance: 0.0,
    };

    // The same solve on both backends.
    let w = Stencil::uniform(grid.n);
    let cpu = CpuBackend::<f64>::new();
    let q64 = common::q(&cpu, &grid, &traj);
    let fhd64 = common::fhd(&cpu, &grid, &traj, &data);
    let (x64, _) = common::cg(&cpu, &grid, &q64, &fhd64, &w, 0.02, &params);
    let q = common::q(&b, &grid, &traj);
    let fhd = common::fhd(&b, &grid, &traj, &data);
    let (xh, info) = common::cg(&b, &grid, &q, &fhd, &w, 0.02, &params);
    assert_eq!(info.iterations, 15);
    let err = nrmse(&up(&xh), &x64);
    println!("CG (15 iterations) GPU f32 vs CPU f64: {err:.2e}");
    // float32 CG over 15 iterations amplifies rounding by the condition
    // number seen so far; 1e-4 leaves an order of magnitude of margin.
    assert!(err < 1e-4, "CG relative error {err:e}");

    // With a tolerance: the GPU reads its scalars every 10 iterations, and
    // the iterations it queued past the stop leave x as it was, so it stops
    // where the CPU, reading every iteration, does.
    let tol = Params {
        iterations: 60,
        tolerance: 1e-3,
    };
    let (xt64, it64) = common::cg(&cpu, &grid, &q64, &fhd64, &w, 0.02, &tol);
    let (xt, it) = common::cg(&b, &grid, &q, &fhd, &w, 0.02, &tol);
    println!(
        "CG to 1e-3: CPU f64 {} iterations, GPU {}",
        it64.iterations, it.iterations
    );
    assert!(
        it64.iterations < 60 && it64.iterations % 10 != 0,
        "{it64:?}"
    );
    assert_eq!(it.iterations, it64.iterations);
    assert_eq!(it.residuals.len(), it.iterations);
    assert!(nrmse(&up(&xt), &xt64) < 1e-4, "CG to a tolerance");

    // The Toeplitz operator alone, against the CPU's.
    let mut t64 = Toeplitz::new(&cpu, &grid, &q64).unwrap();
    let v = rng.complex(grid.len());
    let mut want = cpu.zeros(grid.len()).unwrap();
    t64.apply(&cpu, &mut want, &v).unwrap();
    let mut t32 = Toeplitz::new(&b, &grid, &q).unwrap();
    let gv = b.upload(&down(&v)).unwrap();
    let mut got = b.zeros(grid.len()).unwrap();
    t32.apply(&b, &mut got, &gv).unwrap();
    let mut gh = vec![Complex::default(); grid.len()];
    b.download(&mut gh, &got).unwrap();
    assert!(nrmse(&up(&gh), &want) < 1e-5, "Toeplitz");
}

#[test]
fn sense_solve_matches_cpu_f64() {
    let Some(b) = gpu(Options::default()) else {
        return;
    };
    let grid = Grid::new([12, 12, 12], [220.0; 3]).unwrap();
    let mut rng = Rng::new(35);
    let traj = random_traj(&grid, 4000, &mut rng);
    let coils = 3;
    let maps: Vec<Vec<Complex<f64>>> = (0..coils).map(|_| rng.complex(grid.len())).collect();
    let data = rng.complex(coils * traj.len());
    let cpu = CpuBackend::<f64>::new();
    let params = Params {
        iterations: 10,
        tolerance: 0.0,
    };
    let w = Stencil::uniform(grid.n);
    // sum_c S_c^H F^H D_c on each device, through the exact plan.
    let q64 = common::q(&cpu, &grid, &traj);
    let plan64 = exact(&cpu, &grid, &traj);
    let maps64: Vec<_> = maps.iter().map(|m| cpu.upload(m).unwrap()).collect();
    let mut fhd64 = cpu.zeros(grid.len()).unwrap();
    plan64
        .adjoint_coils_on_device(&mut fhd64, &data, &maps64, &mut no_progress())
        .unwrap();
    let mut p64 = recon_cg::Problem::with_maps(&cpu, &grid, &q64, &fhd64, &maps).unwrap();
    let (x64, _) = p64.solve(&cpu, &w, 0.05, &params, &mut |_, _| {}).unwrap();

    let q = common::q(&b, &grid, &traj);
    let plan = exact(&b, &grid, &traj);
    let maps32: Vec<Vec<Complex<f32>>> = maps.iter().map(|m| down(m)).collect();
    let dmaps: Vec<_> = maps32.iter().map(|m| b.upload(m).unwrap()).collect();
    let mut fhd = b.zeros(grid.len()).unwrap();
    plan.adjoint_coils_on_device(&mut fhd, &data, &dmaps, &mut no_progress())
        .unwrap();
    let mut fh = vec![Complex::default(); grid.len()];
    b.download(&mut fh, &fhd).unwrap();
    // float32 sums of 4000 samples per coil: rounding only.
    assert!(nrmse(&up(&fh), &fhd64) < 1e-5, "SENSE F^H D");
    let mut p = recon_cg::Problem::with_maps(&b, &grid, &q, &fh, &maps32).unwrap();
    let (x, info) = p.solve(&b, &w, 0.05, &params, &mut |_, _| {}).unwrap();
    assert_eq!(info.iterations, 10);
    let err = nrmse(&up(&x), &x64);
    println!("SENSE CG (3 coils, 10 iterations) GPU f32 vs CPU f64: {err:.2e}");
    // As the single-coil CG test: float32 rounding amplified by 10
    // iterations; 1e-4 leaves an order of magnitude.
    assert!(err < 1e-4, "SENSE CG relative error {err:e}");
}

#[test]
fn toeplitz_product_pruned_and_by_pieces_matches_cpu_f64() {
    // Line lengths 2n with kernels of radices 8 and 2 (16), 8 and 4 (32),
    // 8, 4 and 3 (96), 8, 4 and 5 (160), 8, 8 and 4 (256) and 8, 8 and 8
    // (512), each along x, y and z in turn; non-cubic, so that x, y and z
    // cannot be swapped unseen. Sizes with a doubled length of 20 or 24 in
    // any direction have no kernel and fall back to the pieces. Each
    // operator is applied twice, to catch state left by the first call.
    let shapes = [
        ([8, 48, 80], true),
        ([80, 8, 48], true),
        ([48, 80, 8], true),
        ([128, 16, 8], true),
        ([8, 8, 256], true),
        ([10, 8, 16], false),
        ([16, 12, 8], false),
        ([8, 16, 12], false),
    ];
    let Some(pruned) = gpu(Options::default()) else {
        return;
    };
    let pieces = CudaBackend::new(Options {
        pruned_toeplitz: false,
        ..Default::default()
    })
    .unwrap();
    let cpu = CpuBackend::<f64>::new();
    let apply = |b: &CudaBackend, t: &mut Toeplitz<CudaBackend>, v: &[Complex<f64>]| {
        let gv = b.upload(&down(v)).unwrap();
        let mut got = b.zeros(v.len()).unwrap();
        t.apply(b, &mut got, &gv).unwrap();
        let mut gh = vec![Complex::default(); v.len()];
        b.download(&mut gh, &got).unwrap();
        gh
    };
    for (n, covered) in shapes {
        let grid = Grid::new(n, [200.0; 3]).unwrap();
        let mut rng = Rng::new(7);
        // Any Q will do: the product is linear in it.
        let q64 = rng.complex(8 * grid.len());
        let mut t64 = Toeplitz::new(&cpu, &grid, &q64).unwrap();
        let mut t_pruned = Toeplitz::new(&pruned, &grid, &down(&q64)).unwrap();
        let mut t_pieces = Toeplitz::new(&pieces, &grid, &down(&q64)).unwrap();
        for round in 0..2 {
            let v = rng.complex(grid.len());
            let mut want = cpu.zeros(grid.len()).unwrap();
            t64.apply(&cpu, &mut want, &v).unwrap();
            let by_pruned = apply(&pruned, &mut t_pruned, &v);
            let by_pieces = apply(&pieces, &mut t_pieces, &v);
            for (gh, path) in [(&by_pruned, "pruned"), (&by_pieces, "pieces")] {
                let err = nrmse(&up(gh), &want);
                println!("Toeplitz {n:?} {path} round {round}: {err:.2e}");
                // float32 FFTs of these sizes round to a few 1e-7 relative;
                // a wrong index or twiddle gives order 1.
                assert!(err < 1e-5, "Toeplitz {n:?} {path}: {err:e}");
            }
            // The two paths round differently, so a covered shape that
            // silently took the pieces would give the same bits.
            assert_eq!(
                by_pruned != by_pieces,
                covered,
                "Toeplitz {n:?}: the pruned path ran where it should {}",
                if covered { "have" } else { "not have" }
            );
        }
    }
}

#[test]
fn anatomical_two_pass_solve_matches_cpu_f64() {
    // The anatomical W (edge weights, support diagonal) and its second pass,
    // whose data edges come from the first pass's image on each backend.
    let Some(b) = gpu(Options::default()) else {
        return;
    };
    let PriorFixture {
        grid,
        traj,
        data,
        reference,
        ..
    } = prior_fixture(16, [8, 300, 40], 5);
    let prior = recon_prior::Prior::new(
        &grid,
        &reference,
        &recon_prior::Params {
            support_threshold: Some(0.05),
            ..Default::default()
        },
    )
    .unwrap();
    assert!(prior.info.outside_support > 0 && prior.info.boundary_edges > 0);
    // Weights of 0.1 beside 1 and the support diagonal spread the spectrum:
    // after 20 iterations float32 CG still differs from float64 by 3% (on
    // the CPU too), after 60 by 3.5e-4 (CPU float32 against float64).
    let params = Params {
        iterations: 60,
        tolerance: 0.0,
    };
    let cpu = CpuBackend::<f64>::new();
    let q64 = common::q(&cpu, &grid, &traj);
    let fhd64 = common::fhd(&cpu, &grid, &traj, &data);
    let w = recon::pipeline::Regulariser::Anatomical(Box::new(prior));
    let mut p64 = recon_cg::Problem::new(&cpu, &grid, &q64, &fhd64).unwrap();
    let s64 = recon::pipeline::solve(&cpu, &mut p64, &w, 3.0, &params, &mut |_, _| {}).unwrap();
    let (x64, used64) = (s64.x, s64.prior.unwrap());
    let q = common::q(&b, &grid, &traj);
    let fhd = common::fhd(&b, &grid, &traj, &data);
    let mut p32 = recon_cg::Problem::new(&b, &grid, &q, &fhd).unwrap();
    let s = recon::pipeline::solve(&b, &mut p32, &w, 3.0, &params, &mut |_, _| {}).unwrap();
    let (xh, used) = (s.x, s.prior.unwrap());
    let (n64, n32) = (used64.data_edges.unwrap(), used.data_edges.unwrap());
    let err = nrmse(&up(&xh), &x64);
    println!(
        "anatomical W, 2 x 60 iterations, GPU f32 vs CPU f64: {err:.2e}; data edges {n32} vs {n64}"
    );
    // Data edges are thresholds on an image: float32 may flip an edge that
    // lies at the threshold, but only a handful.
    assert!(
        n64 > 0 && n32.abs_diff(n64) <= n64 / 100 + 2,
        "data edges {n32} vs {n64}"
    );
    // CPU float32 reaches 3.5e-4 here; a flipped data edge moves the image
    // by about as much: 2e-3.
    assert!(err < 2e-3, "relative error {err:e}");
}

#[test]
fn several_gpus_give_the_same_q_as_one() {
    let Some(all) = gpu(Options::default()) else {
        return;
    };
    if all.device_count() < 2 {
        println!("skipped: one GPU here; the split is tested on machines with several");
        return;
    }
    let one = CudaBackend::new(Options {
        devices: Some(vec![0]),
        ..Options::default()
    })
    .unwrap();
    let grid = Grid::new([16, 16, 16], [200.0; 3]).unwrap();
    let mut rng = Rng::new(35);
    let traj = random_traj(&grid, 5000, &mut rng);
    let qa = common::q(&all, &grid, &traj);
    let q1 = common::q(&one, &grid, &traj);
    assert_eq!(qa, q1, "each voxel is computed by the same code on any GPU");
}

#[test]
fn sum_exp_rejects_mismatched_lengths() {
    let Some(b) = gpu(Options::default()) else {
        return;
    };
    let k = [[0.0, 0.0, 0.0]; 4];
    let c = [Complex::new(1.0f32, 0.0); 3];
    let mut out = [Complex::default(); 2];
    let pts = [[0.0; 3]; 2];
    assert!(b
        .sum_exp(
            &mut out,
            Targets::List(&pts),
            &k,
            &c,
            Sign::Plus,
            &mut |_, _| {}
        )
        .is_err());
}

/// Runs the small config with `edit` applied, returning the report.
fn run_small(
    dir: &std::path::Path,
    name: &str,
    edit: impl Fn(String) -> String,
) -> serde_json::Value {
    let text = std::fs::read_to_string(repo().join("configs/test-small.toml")).unwrap();
    let phantom = repo().join("phantoms/shepp-logan.toml");
    let text = edit(text.replace(
        "../phantoms/shepp-logan.toml",
        &phantom.display().to_string(),
    ));
    let cfg = dir.join(format!("{name}.toml"));
    std::fs::write(&cfg, text).unwrap();
    let out = dir.join(name);
    let o = Command::new(recon_bin())
        .args([
            "--config",
            cfg.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ])
        .env("HDF5_USE_FILE_LOCKING", "FALSE") // see common::recon
        .env("RECON_CACHE_DIR", dir.join("cache"))
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "{name}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap()
}

#[test]
fn small_pipeline_psnr_on_gpu_matches_cpu_f64() {
    if gpu(Options::default()).is_none() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let cpu = run_small(tmp.path(), "cpu", |t| {
        t.replace("[engine]", "[engine]\ndevice = \"cpu\"")
    });
    let gpu = run_small(tmp.path(), "gpu", |t| {
        t.replace("precision = \"f64\"", "precision = \"f32\"")
            .replace("[engine]", "[engine]\ndevice = \"cuda\"")
    });
    assert!(
        gpu["device"].as_str().unwrap().starts_with("CUDA"),
        "{}",
        gpu["device"]
    );
    let (c, g) = (
        cpu["psnr_db"].as_f64().unwrap(),
        gpu["psnr_db"].as_f64().unwrap(),
    );
    println!("PSNR: CPU f64 {c:.4} dB, GPU f32 {g:.4} dB");
    // The bound.
    assert!((c - g).abs() <= 0.05, "PSNR CPU {c} vs GPU {g}");
}

#[test]
fn too_large_a_problem_says_what_fits() {
    if gpu(Options::default()).is_none() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(repo().join("configs/test-small.toml")).unwrap();
    let phantom = repo().join("phantoms/shepp-logan.toml");
    let text = text
        .replace(
            "../phantoms/shepp-logan.toml",
            &phantom.display().to_string(),
        )
        .replace("matrix = 16", "matrix = 1024")
        .replace(
            "precision = \"f64\"",
            "precision = \"f32\"\ndevice = \"cuda\"",
        );
    let cfg = tmp.path().join("huge.toml");
    std::fs::write(&cfg, text).unwrap();
    let out = tmp.path().join("out");
    let o = Command::new(recon_bin())
        .args([
            "--config",
            cfg.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ])
        .env("HDF5_USE_FILE_LOCKING", "FALSE") // see common::recon
        .env("RECON_CACHE_DIR", tmp.path().join("cache"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(
        err.contains("not enough GPU memory") && err.contains("largest cubic matrix that fits"),
        "{err}"
    );
    assert!(!out.exists());
}

#[test]
fn parboil_datasets_pass_parboils_rule_on_the_gpu() {
    let Some(b) = gpu(Options::default()) else {
        return;
    };
    let dir = std::env::var_os("RECON_PARBOIL_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join("../shared/parboil/mri-q"));
    if !dir.is_dir() {
        println!(
            "skipped: Parboil mri-q datasets not found at {}",
            dir.display()
        );
        return;
    }
    for name in ["small", "large"] {
        let file = |sub: &str| {
            std::fs::read_dir(dir.join(name).join(sub))
                .unwrap()
                .next()
                .unwrap()
                .unwrap()
                .path()
        };
        let input = recon_parboil::read_input(&file("input"), None).unwrap();
        let q = recon_parboil::compute_q(&b, &input, &mut no_progress()).unwrap();
        let (re, im): (Vec<f32>, Vec<f32>) = (
            q.iter().map(|c| c.re).collect(),
            q.iter().map(|c| c.im).collect(),
        );
        let (rr, ri) =
            recon_parboil::parse_output(&std::fs::read(file("output")).unwrap(), "reference")
                .unwrap();
        let c = recon_parboil::compare((&re, &im), (&rr, &ri)).unwrap();
        println!("parboil {name} on the GPU: {c:?}");
        assert!(c.passed(), "{name}: {c:?}");
    }
}
