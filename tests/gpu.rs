//! GPU against CPU float64: every summation variant (F^H D, Q, the forward
//! model), the CG primitives, the whole small pipeline, and the memory check
//! (the solves are in gpu_solver.rs). Without a usable GPU each test prints that it was skipped.
//!
//! These binaries also run on the GPU machine, where cargo is absent:
//! `RECON_BIN` and `RECON_REPO` then point at the carried `recon` binary and
//! the checkout (scripts/gpu.sh sets them).

use crate::common;

use common::*;
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
    let (cplan, gplan) = (cpu.fft_plan(d).unwrap(), b.fft_plan(d).unwrap());
    cpu.fft3(&cplan, &mut cp, Direction::Forward).unwrap();
    b.fft3(&gplan, &mut gp, Direction::Forward).unwrap();
    // cuFFT and rustfft round differently: 1e-5 relative on a 1920-point FFT.
    assert!(nrmse(&up(&get(&gp)), &up(&cp)) < 1e-5, "fft");
    cpu.fft3(&cplan, &mut cp, Direction::Inverse).unwrap();
    b.fft3(&gplan, &mut gp, Direction::Inverse).unwrap();
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

/// What a split over GPUs rests on, on one: a slab of the targets by
/// `first` is the same slice of the whole sum, for every variant's
/// kernels. Slabs of whole rows (the split's slabs are whole planes) give
/// the same values to the bit; a slab that cuts rows sends variants 5 and
/// 6 from their row kernels to the per-target kernels, which round
/// differently.
#[test]
fn a_slab_of_a_sum_is_the_same_slice_of_the_whole() {
    let Some(b) = gpu(Options::default()) else {
        return;
    };
    let grid = Grid::new([16, 16, 16], [200.0; 3]).unwrap();
    let mut rng = Rng::new(36);
    let traj = random_traj(&grid, 5000, &mut rng);
    let coef: Vec<Complex<f32>> = rng
        .complex(traj.len())
        .iter()
        .map(|c| Complex::new(c.re as f32, c.im as f32))
        .collect();
    let lattice = grid.displacements();
    let plane = lattice.n[0] * lattice.n[1];
    let row = lattice.n[0];
    for variant in Variant::ALL {
        let mut b = b.shard(0).unwrap();
        b.options.variant = variant;
        let sum = |first: usize, len: usize| {
            let mut out = vec![Complex::default(); len];
            b.sum_exp(
                &mut out,
                Targets::Lattice(lattice),
                first,
                &traj,
                &coef,
                Sign::Plus,
                &mut |_, _| {},
            )
            .unwrap();
            out
        };
        let whole = sum(0, lattice.len());
        for (first, len) in [
            (5 * plane, 7 * plane),
            (3 * row, 5 * row),
            (plane + 3, 2 * plane - 5),
        ] {
            let slab = sum(first, len);
            let slice = &whole[first..first + len];
            let cuts_rows = first % row != 0 || len % row != 0;
            if cuts_rows && matches!(variant, Variant::Tuned | Variant::Streamed) {
                let peak = slice.iter().map(|c| c.norm()).fold(0.0f32, f32::max);
                let err = slab
                    .iter()
                    .zip(slice)
                    .map(|(a, b)| (a - b).norm())
                    .fold(0.0f32, f32::max)
                    / peak;
                // Two float32 evaluations of 5000 terms (the bench's max
                // errors of these kernels are about 1e-7 of the peak).
                assert!(err < 1e-5, "{variant:?} at {first}: {err:e}");
            } else {
                assert_eq!(slab, slice, "{variant:?} at {first}");
            }
        }
    }
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
            0,
            &k,
            &c,
            Sign::Plus,
            &mut |_, _| {}
        )
        .is_err());
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
fn small_sparse_pipelines_on_gpu_match_cpu_f64() {
    if gpu(Options::default()).is_none() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    for (kind, lambda, algorithm) in [
        ("tv", 0.002, "admm"),
        ("tv", 0.002, "pdhg"),
        ("wavelet", 0.0002, "admm"),
    ] {
        let prior = |t: String| {
            t.replace("lambda = 0.01", &format!("algorithm = \"{algorithm}\""))
                + &format!("\n[prior]\nkind = \"{kind}\"\nlambda = {lambda}\n")
        };
        let cpu = run_small(tmp.path(), &format!("cpu-{kind}-{algorithm}"), |t| {
            prior(t).replace("[engine]", "[engine]\ndevice = \"cpu\"")
        });
        let gpu = run_small(tmp.path(), &format!("gpu-{kind}-{algorithm}"), |t| {
            prior(t)
                .replace("precision = \"f64\"", "precision = \"f32\"")
                .replace("[engine]", "[engine]\ndevice = \"cuda\"")
        });
        assert_eq!(gpu["prior_kind"], kind);
        let (c, g) = (
            cpu["psnr_db"].as_f64().unwrap(),
            gpu["psnr_db"].as_f64().unwrap(),
        );
        println!("{kind} by {algorithm}: PSNR CPU f64 {c:.4} dB, GPU f32 {g:.4} dB");
        // As for the quadratic prior.
        assert!((c - g).abs() <= 0.05, "PSNR CPU {c} vs GPU {g}");
    }
}

#[test]
fn a_series_of_slices_and_contrasts_on_the_gpu_matches_the_cpu_f64() {
    // The multi-slice, two-contrast, two-coil ISMRMRD fixture in one run:
    // contrast 1 of each slice reuses contrast 0's plan, Q and maps (SENSE's
    // right-hand side by the batched adjoint with the built maps), with
    // each estimator of the maps.
    if gpu(Options::default()).is_none() {
        return;
    }
    let fixture = repo().join("tests/fixtures/multislice-2contrasts.ismrmrd.h5");
    for maps in ["estimate", "espirit"] {
        let tmp = tempfile::tempdir().unwrap();
        let mut images = Vec::new();
        for (device, precision) in [("cpu", "f64"), ("cuda", "f32")] {
            let cfg = tmp.path().join(format!("{device}.toml"));
            std::fs::write(
                &cfg,
                format!(
                    "[scan]\nfile = \"{}\"\n[sense]\nmaps = \"{maps}\"\n[engine]\ndevice = \"{device}\"\nprecision = \"{precision}\"\n\
                     [solver]\niterations = 20\nlambda = 0.01\n[output]\ndir = \"{device}\"\n",
                    fixture.display()
                ),
            )
            .unwrap();
            let o = Command::new(recon_bin())
                .args(["--config", cfg.to_str().unwrap()])
                .current_dir(tmp.path())
                .env("HDF5_USE_FILE_LOCKING", "FALSE")
                .env("RECON_CACHE_DIR", tmp.path().join("cache"))
                .output()
                .unwrap();
            assert!(
                o.status.success(),
                "{maps} on {device}: {}",
                String::from_utf8_lossy(&o.stderr)
            );
            let stdout = String::from_utf8_lossy(&o.stdout);
            assert_eq!(stdout.matches("plan and Q shared").count(), 3, "{stdout}");
            common::no_hdf5_locking();
            let f = recon_io::hdf5::File::open(tmp.path().join(device).join("recon.h5")).unwrap();
            let v: Vec<Complex<f32>> = f.dataset("recon").unwrap().read_raw().unwrap();
            images.push(
                v.iter()
                    .map(|c| Complex::new(c.re as f64, c.im as f64))
                    .collect::<Vec<_>>(),
            );
        }
        let e = nrmse(&images[1], &images[0]);
        println!("series, maps {maps}: GPU f32 against CPU f64, nrmse {e:.2e}");
        // The float32 chain (gridding for the maps, NUFFT, 20 CG
        // iterations) against float64: the CPU's own f32 run is 5.5e-3
        // (Inati) and 2.3e-3 (ESPIRiT) from its f64 one on this fixture.
        assert!(e < 2e-2, "{maps}: nrmse {e:e}");
        // Each slice's contrast 1 (on contrast 0's shared problem) is half
        // its contrast 0, as the data are, on the GPU too: to float32's
        // reductions over 20 CG iterations (measured 8.4e-5 on the H100;
        // the image before's right-hand side would be 1).
        let n = 32 * 32;
        for s in 0..3 {
            let c0: Vec<_> = images[1][2 * s * n..(2 * s + 1) * n]
                .iter()
                .map(|v| v * 0.5)
                .collect();
            let e = nrmse(&images[1][(2 * s + 1) * n..(2 * s + 2) * n], &c0);
            assert!(
                e < 1e-3,
                "{maps}, slice {s}: contrast 1 against half contrast 0: {e:e}"
            );
        }
    }
}

#[test]
fn freed_memory_is_kept_counted_as_free_and_given_back() {
    let Some(b) = gpu(Options::default()) else {
        return;
    };
    b.release_unused_memory().unwrap();
    let free = b.memory_available().unwrap();
    // A vector of half the free memory (8-byte values), freed.
    let half = (free / 2 / 8) as usize;
    drop(b.zeros(half).unwrap());
    b.synchronize().unwrap();
    let kept = b.pool_unused_bytes().unwrap();
    assert!(kept >= 8 * half as u64, "kept {kept} of {}", 8 * half);
    // Still free for the pipeline's checks. The slack: the driver's own
    // bookkeeping moves by a few MB between queries.
    let slack = 64 << 20;
    let now = b.memory_available().unwrap();
    assert!(now + slack >= free, "free {free}, then {now}");
    // Seven tenths of the free memory: more than the driver has beside
    // the half the pool keeps, so that half goes back to the driver first
    // (Device::ensure_fits).
    let most = (free / 10 * 7 / 8) as usize;
    drop(b.zeros(most).unwrap());
    b.release_unused_memory().unwrap();
    let left = b.pool_unused_bytes().unwrap();
    assert!(left < slack, "{left} bytes still kept after the release");
    let after = b.memory_available().unwrap();
    assert!(after + slack >= free, "free {free}, after {after}");
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
