//! GPU against CPU float64, the solvers: a CG solve (to a fixed count and
//! to a tolerance), a SENSE solve on one GPU and on all of the host's,
//! SENSE's coil terms folded into the Toeplitz passes, the Toeplitz
//! product on both of its paths, and the anatomical prior's two passes.
//! Without a usable GPU each test prints that it was skipped.

use crate::common;

use common::*;
use recon_cg::{DataTerm, Normal, Params, Toeplitz};
use recon_core::{metrics::nrmse, Backend, Complex, CpuBackend, Grid, Stencil};
use recon_cuda::{CudaBackend, Options};
use recon_encoding::SenseTerm;

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
    let maps64: Vec<&_> = maps64.iter().collect();
    let mut fhd64 = cpu.zeros(grid.len()).unwrap();
    plan64
        .adjoint_coils_on_device(&mut fhd64, &data, &maps64, &mut no_progress())
        .unwrap();
    let mut p64 = sense_problem(&cpu, &grid, &traj, &q64, &fhd64, &maps, None).unwrap();
    let (x64, _) = p64.solve(&cpu, &w, 0.05, &params, &mut |_, _| {}).unwrap();

    let q = common::q(&b, &grid, &traj);
    let plan = exact(&b, &grid, &traj);
    let maps32: Vec<Vec<Complex<f32>>> = maps.iter().map(|m| down(m)).collect();
    let dmaps: Vec<_> = maps32.iter().map(|m| b.upload(m).unwrap()).collect();
    let dmaps: Vec<&_> = dmaps.iter().collect();
    let mut fhd = b.zeros(grid.len()).unwrap();
    plan.adjoint_coils_on_device(&mut fhd, &data, &dmaps, &mut no_progress())
        .unwrap();
    let mut fh = vec![Complex::default(); grid.len()];
    b.download(&mut fh, &fhd).unwrap();
    // float32 sums of 4000 samples per coil: rounding only.
    assert!(nrmse(&up(&fh), &fhd64) < 1e-5, "SENSE F^H D");
    let mut p = sense_problem(&b, &grid, &traj, &q, &fh, &maps32, None).unwrap();
    let (x, info) = p.solve(&b, &w, 0.05, &params, &mut |_, _| {}).unwrap();
    assert_eq!(info.iterations, 10);
    let err = nrmse(&up(&x), &x64);
    println!("SENSE CG (3 coils, 10 iterations) GPU f32 vs CPU f64: {err:.2e}");
    // As the single-coil CG test: float32 rounding amplified by 10
    // iterations; 1e-4 leaves an order of magnitude.
    assert!(err < 1e-4, "SENSE CG relative error {err:e}");
}

#[test]
fn sense_shared_among_gpus_matches_one_gpu_and_cpu_f64() {
    let Some(b) = gpu(Options::default()) else {
        return;
    };
    let gpus = b.shards();
    if gpus < 2 {
        println!("skipped: one GPU here; sharing the coils needs two or more");
        return;
    }
    // Doubled lengths 32, 16 and 96 have line kernels: each GPU runs the
    // coil terms folded into the pruned product.
    let grid = Grid::new([16, 8, 48], [220.0; 3]).unwrap();
    let mut rng = Rng::new(36);
    let traj = random_traj(&grid, 4000, &mut rng);
    let coils = 2 * gpus + 1;
    let maps: Vec<Vec<Complex<f64>>> = (0..coils).map(|_| rng.complex(grid.len())).collect();
    let maps32: Vec<Vec<Complex<f32>>> = maps.iter().map(|m| down(m)).collect();
    let data = rng.complex(coils * traj.len());
    let x = rng.complex(grid.len());
    let cpu = CpuBackend::<f64>::new();
    let (q64, q) = (common::q(&cpu, &grid, &traj), common::q(&b, &grid, &traj));

    // The CPU's float64 operator and right-hand side, on one device.
    let t64 = Toeplitz::new(&cpu, &grid, &q64).unwrap();
    let plan64 = exact(&cpu, &grid, &traj);
    let mut s64 = SenseTerm::new(&cpu, &plan64, t64, &maps, None).unwrap();
    let mut want = cpu.zeros(grid.len()).unwrap();
    s64.apply(&cpu, &mut want, &x).unwrap();
    let rhs64 = s64.rhs(&cpu, &plan64, &data, &mut no_progress()).unwrap();

    // The GPU's on one device and on all of them.
    let plan = exact(&b, &grid, &traj);
    let gx = b.upload(&down(&x)).unwrap();
    let mut results = Vec::new();
    for parts in [1, gpus] {
        let t = Toeplitz::new(&b, &grid, &q).unwrap();
        let mut s = SenseTerm::new(&b, &plan, t, &maps32, Some(parts)).unwrap();
        assert_eq!(s.devices(), parts);
        let mut got = b.zeros(grid.len()).unwrap();
        // Twice: the second reuses the other GPUs' buffers.
        for _ in 0..2 {
            s.apply(&b, &mut got, &gx).unwrap();
        }
        let rhs = s.rhs(&b, &plan, &data, &mut no_progress()).unwrap();
        let mut h = vec![Complex::default(); grid.len()];
        b.download(&mut h, &got).unwrap();
        let mut r = vec![Complex::default(); grid.len()];
        b.download(&mut r, &rhs).unwrap();
        let (e_op, e_rhs) = (nrmse(&up(&h), &want), nrmse(&up(&r), &rhs64));
        println!("SENSE on {parts} GPU(s), {coils} coils, vs CPU f64: operator {e_op:.2e}, F^H D {e_rhs:.2e}");
        // float32 rounding of FFTs and of sums over 4000 samples.
        assert!(e_op < 1e-5 && e_rhs < 1e-5, "{parts} GPU(s)");
        let w = Stencil::uniform(grid.n);
        let params = Params {
            iterations: 10,
            tolerance: 0.0,
        };
        let peak = recon_cg::q_peak(&grid, &q).unwrap();
        let mut p = recon_cg::Problem::on_device(&b, &grid, peak, Box::new(s), rhs).unwrap();
        let (xs, info) = p.solve(&b, &w, 0.05, &params, &mut |_, _| {}).unwrap();
        assert_eq!(info.iterations, 10);
        results.push(up(&xs));
    }
    // The same float32 products summed in other groups: rounding only,
    // amplified by 10 CG iterations.
    let err = nrmse(&results[1], &results[0]);
    println!("SENSE CG on {gpus} GPUs vs one: {err:.2e}");
    assert!(err < 1e-5, "{err:e}");
}

#[test]
fn chained_launches_compute_the_bits_of_plain_ones() {
    // Kernels chained by programmatic dependent launch wait at their start
    // for the kernel before (launch.rs), so a CG solve takes the same bits
    // as with plain launches: on a grid the pruned product covers (every
    // pass chained; 96 x 64 x 128 doubled, hundreds of blocks a pass), with
    // the uniform prior folded into the product and without.
    let Some(chained) = gpu(Options::default()) else {
        return;
    };
    let plain = CudaBackend::new(Options {
        chained_launches: false,
        ..Default::default()
    })
    .unwrap();
    assert!(!plain.chained_launches());
    if !chained.chained_launches() {
        println!("this GPU has no programmatic dependent launch: both solves launch plainly");
    }
    let grid = Grid::new([48, 32, 64], [220.0; 3]).unwrap();
    let mut rng = Rng::new(43);
    let traj = random_traj(&grid, 3000, &mut rng);
    let data = rng.complex(traj.len());
    let q = common::q(&plain, &grid, &traj);
    let fhd = common::fhd(&plain, &grid, &traj, &data);
    let w = Stencil::uniform(grid.n);
    let params = Params {
        iterations: 30,
        tolerance: 0.0,
    };
    for lambda in [0.0, 0.05] {
        let (xc, ic) = common::cg(&chained, &grid, &q, &fhd, &w, lambda, &params);
        let (xp, ip) = common::cg(&plain, &grid, &q, &fhd, &w, lambda, &params);
        assert_eq!(ic.iterations, 30);
        assert_eq!(ic.residuals, ip.residuals, "lambda {lambda}");
        let differ = xc.iter().zip(&xp).filter(|(a, b)| a != b).count();
        println!("lambda {lambda}: {differ} of {} values differ", xc.len());
        assert_eq!(differ, 0, "lambda {lambda}");
    }
}

/// The default GPU backend, and one that always composes the Toeplitz
/// product from its pieces; `None` (skipped) without a GPU.
fn pruned_and_pieces() -> Option<(CudaBackend, CudaBackend)> {
    let pruned = gpu(Options::default())?;
    let pieces = CudaBackend::new(Options {
        pruned_toeplitz: false,
        ..Default::default()
    })
    .unwrap();
    Some((pruned, pieces))
}

/// The Hermitian part `(q(r) + conj q(-r)) / 2` of a Q on the doubled grid
/// `d` (lag 0 at index n per axis; lag -r of index i at (2n - i) mod 2n).
pub(crate) fn hermitian(q: &[Complex<f64>], d: [usize; 3]) -> Vec<Complex<f64>> {
    let mirror = |i: usize, l: usize| (l - i) % l;
    let at = |x: usize, y: usize, z: usize| (z * d[1] + y) * d[0] + x;
    let mut h = q.to_vec();
    for z in 0..d[2] {
        for y in 0..d[1] {
            for x in 0..d[0] {
                let m = at(mirror(x, d[0]), mirror(y, d[1]), mirror(z, d[2]));
                h[at(x, y, z)] = (q[at(x, y, z)] + q[m].conj()) * 0.5;
            }
        }
    }
    h
}

#[test]
fn hermitian_q_is_hermitian() {
    // The helper above: q(-r) = conj q(r) wherever -r is on the grid.
    let d = [16, 8, 4];
    let h = hermitian(&Rng::new(3).complex(16 * 8 * 4), d);
    let at = |x: usize, y: usize, z: usize| (z * d[1] + y) * d[0] + x;
    for (x, y, z) in [(1, 2, 3), (8, 4, 2), (15, 7, 1), (9, 1, 0)] {
        let m = at((16 - x) % 16, (8 - y) % 8, (4 - z) % 4);
        assert!((h[m] - h[at(x, y, z)].conj()).norm() < 1e-15);
    }
}

#[test]
fn toeplitz_product_pruned_and_by_pieces_matches_cpu_f64() {
    // Line lengths 2n with kernels of radices 8 and 2 (16), 8 and 4 (32),
    // 8, 4 and 3 (96), 8, 4 and 5 (160), 8, 8 and 4 (256) and 8, 8 and 8
    // (512), each along x, y and z in turn; along z at 256 the columns
    // kernel's 16 points a thread (radices 16 x 16), its product with
    // FFT(Q) in registers there and at 512; non-cubic, so that x, y and z
    // cannot be swapped unseen. Sizes with a doubled length of 20 or 24 in
    // any direction have no kernel and fall back to the pieces. Each
    // operator is applied twice, to catch state left by the first call.
    let shapes = [
        ([8, 48, 80], true),
        ([80, 8, 48], true),
        ([48, 80, 8], true),
        ([128, 16, 8], true),
        ([8, 8, 256], true),
        ([16, 8, 128], true),
        ([10, 8, 16], false),
        ([16, 12, 8], false),
        ([8, 16, 12], false),
    ];
    let Some((pruned, pieces)) = pruned_and_pieces() else {
        return;
    };
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
        // Any Hermitian Q will do (as every Q of real weights is, and as
        // the fused product's real FFT(Q) needs): the product is linear in
        // it.
        let q64 = hermitian(&rng.complex(8 * grid.len()), grid.doubled());
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
fn sense_terms_folded_into_the_toeplitz_passes_match_cpu_f64() {
    // SENSE's operator with the maps folded into the pruned product's first
    // read and last write (covered shapes), and by the pieces (an uncovered
    // shape, and the pieces backend), against the CPU in float64. Three
    // coils: the first sets out, the others add to it; applied twice.
    let Some((pruned, pieces)) = pruned_and_pieces() else {
        return;
    };
    let cpu = CpuBackend::<f64>::new();
    for (n, covered) in [
        ([8, 16, 48], true),
        ([48, 8, 16], true),
        ([10, 8, 16], false),
    ] {
        let grid = Grid::new(n, [200.0; 3]).unwrap();
        let mut rng = Rng::new(8);
        let q64 = hermitian(&rng.complex(8 * grid.len()), grid.doubled());
        let maps: Vec<Vec<Complex<f64>>> = (0..3).map(|_| rng.complex(grid.len())).collect();
        let maps32: Vec<Vec<Complex<f32>>> = maps.iter().map(|m| down(m)).collect();
        // The data term's normal map uses only FFT(Q) (here random) and
        // the maps; the trajectory only sizes the stack.
        let traj = random_traj(&grid, 10, &mut rng);
        let t64 = Toeplitz::new(&cpu, &grid, &q64).unwrap();
        let plan64 = exact(&cpu, &grid, &traj);
        let mut s64 = SenseTerm::new(&cpu, &plan64, t64, &maps, Some(1)).unwrap();
        let mut got = Vec::new();
        for b in [&pruned, &pieces] {
            let t = Toeplitz::new(b, &grid, &down(&q64)).unwrap();
            let mut s = SenseTerm::new(b, &exact(b, &grid, &traj), t, &maps32, Some(1)).unwrap();
            let mut rounds = Vec::new();
            for round in 0..2 {
                let v = Rng::new(9 + round).complex(grid.len());
                let mut want = cpu.zeros(grid.len()).unwrap();
                s64.apply(&cpu, &mut want, &v).unwrap();
                let gv = b.upload(&down(&v)).unwrap();
                let mut out = b.zeros(grid.len()).unwrap();
                s.apply(b, &mut out, &gv).unwrap();
                let mut h = vec![Complex::default(); grid.len()];
                b.download(&mut h, &out).unwrap();
                let err = nrmse(&up(&h), &want);
                println!("SENSE terms {n:?} round {round}: {err:.2e}");
                // float32 FFTs and products round to a few 1e-7; a wrong
                // index, a missing conjugate or a lost sum give order 1.
                assert!(err < 1e-5, "SENSE terms {n:?}: {err:e}");
                rounds.push(h);
            }
            got.push(rounds);
        }
        // Folded and composed round differently: a covered shape that
        // silently took the pieces would give the same bits.
        assert_eq!(
            got[0] != got[1],
            covered,
            "SENSE terms {n:?}: which path ran"
        );
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
    let s64 =
        recon::pipeline::solve(&cpu, &mut p64, &w, 3.0, &params, &mut |_, _| {}, &|_| {}).unwrap();
    let (x64, used64) = (s64.x, s64.prior.unwrap());
    let q = common::q(&b, &grid, &traj);
    let fhd = common::fhd(&b, &grid, &traj, &data);
    let mut p32 = recon_cg::Problem::new(&b, &grid, &q, &fhd).unwrap();
    let s =
        recon::pipeline::solve(&b, &mut p32, &w, 3.0, &params, &mut |_, _| {}, &|_| {}).unwrap();
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
fn lambda_auto_and_gcv_on_the_gpu_choose_as_the_cpu_f64() {
    // The rules' misfit (Problem::misfit) and GCV's probe (Problem::normal,
    // solve_on) on the GPU in float32, against the CPU in float64, on
    // noisy data: each candidate's misfit and df differ by float32
    // rounding, so the searches take the same steps and choose lambdas
    // within their resolution (the discrepancy principle's target is met
    // to 2%, its lambda held here to 10%; GCV's golden section resolves
    // 0.1 decade).
    if gpu(Options::default()).is_none() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    for rule in ["auto", "gcv"] {
        let edit = |t: String| {
            t.replace("lambda = 0.01", &format!("lambda = \"{rule}\""))
                + "\n[noise]\nsnr = 30.0\nseed = 4\n"
        };
        let cpu = run_small(tmp.path(), &format!("cpu-{rule}"), |t| {
            edit(t).replace("[engine]", "[engine]\ndevice = \"cpu\"")
        });
        let gpu = run_small(tmp.path(), &format!("gpu-{rule}"), |t| {
            edit(t)
                .replace("precision = \"f64\"", "precision = \"f32\"")
                .replace("[engine]", "[engine]\ndevice = \"cuda\"")
        });
        let (c, g) = (
            cpu["lambda"].as_f64().unwrap(),
            gpu["lambda"].as_f64().unwrap(),
        );
        let (pc, pg) = (
            cpu["psnr_db"].as_f64().unwrap(),
            gpu["psnr_db"].as_f64().unwrap(),
        );
        println!("lambda {rule}: CPU f64 {c:.4e} ({pc:.3} dB), GPU f32 {g:.4e} ({pg:.3} dB)");
        assert_eq!(cpu["lambda_rule"], gpu["lambda_rule"]);
        // Within the searches' resolution: 2% on the misfit for the
        // discrepancy principle; a tenth of a decade for GCV, whose V is
        // flat near its least (on one H100 the GPU's spreading, summed in
        // no fixed order, chose 1.0e-2 once and 8.8e-3, the CPU's choice,
        // five times), at 0.07 dB apart.
        let (bound, db) = match rule {
            "gcv" => (0.1f64, 0.1),
            _ => (0.1 / std::f64::consts::LN_10, 0.05),
        };
        assert!(
            (g / c).log10().abs() <= bound,
            "{rule}: lambda CPU {c} vs GPU {g}"
        );
        assert!((pc - pg).abs() <= db, "{rule}: PSNR CPU {pc} vs GPU {pg}");
    }
}
