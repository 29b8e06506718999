//! The GPU NUFFT (recon-cuda, float32) against direct sums in float64, against
//! the CPU NUFFT at the same tolerance, its adjoint, both spreading methods,
//! type 1 over coils through their maps, and the encoding plan's Q, F^H D
//! and F against the exact engine on the CPU in float64. Without a usable
//! GPU each test prints that it was skipped.

use crate::common;

use common::*;
use recon_core::{metrics::nrmse, Backend, Complex, CpuBackend, Grid};
use recon_cuda::{
    CudaBackend, CudaNufft, Interpolation, NufftOptions, Options, Spreading, Upsampling,
};
use recon_encoding::{Engine, NufftBackend, Plan};

/// The GPU backend with these NUFFT settings, or `None` (skipped).
fn gpu_with(nufft: NufftOptions) -> Option<CudaBackend> {
    gpu(Options {
        nufft,
        ..Options::default()
    })
}

/// The modes `-M/2 .. M/2` per axis, x fastest.
fn modes_of(m: [usize; 3]) -> Vec<[f64; 3]> {
    let c = |i: usize, d: usize| i as f64 - (m[d] / 2) as f64;
    let mut v = Vec::new();
    for z in 0..m[2] {
        for y in 0..m[1] {
            for x in 0..m[0] {
                v.push([c(x, 0), c(y, 1), c(z, 2)]);
            }
        }
    }
    v
}

/// `out[i] = sum_j c[j] exp(sign i a[i] . b[j])`, in float64.
fn direct(a: &[[f64; 3]], b: &[[f64; 3]], c: &[Complex<f64>], sign: f64) -> Vec<Complex<f64>> {
    a.iter()
        .map(|p| {
            b.iter()
                .zip(c)
                .map(|(q, v)| {
                    let ph = sign * (p[0] * q[0] + p[1] * q[1] + p[2] * q[2]);
                    v * Complex::new(ph.cos(), ph.sin())
                })
                .sum()
        })
        .collect()
}

/// Type 1 and its adjoint on the GPU.
fn gpu_pair(
    b: &CudaBackend,
    m: [usize; 3],
    tol: f64,
    x: &[[f64; 3]],
    c: &[Complex<f64>],
    f: &[Complex<f64>],
) -> (Vec<Complex<f64>>, Vec<Complex<f64>>) {
    pair_on(b, &b.nufft_plan(m, tol, 1, x).unwrap(), c, f)
}

/// Type 1 of `c` (one value a point) and the adjoint of `f` (one a mode)
/// on plan `p`.
fn pair_on(
    b: &CudaBackend,
    p: &CudaNufft,
    c: &[Complex<f64>],
    f: &[Complex<f64>],
) -> (Vec<Complex<f64>>, Vec<Complex<f64>>) {
    let mut modes = b.zeros(f.len()).unwrap();
    b.nufft_type1(p, &mut modes, &b.upload(&down(c)).unwrap())
        .unwrap();
    let mut points = b.zeros(c.len()).unwrap();
    b.nufft_type1_adjoint(p, &mut points, &b.upload(&down(f)).unwrap())
        .unwrap();
    let mut h1 = vec![Complex::default(); f.len()];
    let mut h2 = vec![Complex::default(); c.len()];
    b.download(&mut h1, &modes).unwrap();
    b.download(&mut h2, &points).unwrap();
    (up(&h1), up(&h2))
}

/// The tolerance plus float32's floor: rounding alone leaves 6e-7 to
/// 1.3e-6 (measured on an H100: points summed into one cell by atomics,
/// and float32 kernel values), and fixed-point spreading up to 1.2e-6 more
/// (2.1e-6 at tolerance 1e-6 on clustered points:
/// bench/h100-2026-11-28-sort-tiles/8-final).
fn allowed(tol: f64) -> f64 {
    tol + 2e-6
}

#[test]
fn type1_and_adjoint_meet_the_tolerance_with_every_spreading_and_interpolation() {
    // Each spreading, and each interpolation (the adjoint) at least once.
    for (spreading, interpolation) in [
        (Spreading::Shared, Interpolation::Global),
        (Spreading::FixedPoint, Interpolation::Shared),
        (Spreading::Global, Interpolation::Shared),
    ] {
        let Some(b) = gpu_with(NufftOptions {
            spreading,
            interpolation,
            ..NufftOptions::default()
        }) else {
            return;
        };
        // An even and a non-cubic odd shape (cuFFT on the fine grid), one
        // whose fine sizes 32, 16 and 96 have line FFTs, and one whose fine
        // grid is 1.5 times its modes along x (96) at 1e-5 to 1e-3
        // (Upsampling::Auto; 16 and 24 along y and z), and one whose x
        // lines are 384 long there (radices 8, 8 and 6; 512 at the other
        // tolerances); points anywhere in [-3pi, 3pi) (periodic, so any
        // real value is a point).
        for (seed, m) in [
            (1, [16, 14, 18]),
            (2, [10, 12, 7]),
            (3, [16, 8, 48]),
            (4, [64, 10, 12]),
            (5, [256, 8, 8]),
        ] {
            let mut rng = Rng::new(seed);
            let x: Vec<[f64; 3]> = (0..2000)
                .map(|_| [0, 1, 2].map(|_| 3.0 * std::f64::consts::PI * rng.sym()))
                .collect();
            let c = rng.complex(x.len());
            let ks = modes_of(m);
            let f = rng.complex(ks.len());
            let want1 = direct(&ks, &x, &c, 1.0);
            let want2 = direct(&x, &ks, &f, -1.0);
            for tol in [1e-2, 1e-3, 1e-4, 1e-5, 1e-6] {
                let (got1, got2) = gpu_pair(&b, m, tol, &x, &c, &f);
                let (e1, e2) = (nrmse(&got1, &want1), nrmse(&got2, &want2));
                println!(
                    "{spreading:?}, {interpolation:?} {m:?} tol {tol:e}: type 1 {e1:.2e}, adjoint {e2:.2e}"
                );
                assert!(
                    e1 < allowed(tol),
                    "{spreading:?} {m:?} tol {tol:e}: type 1 {e1:e}"
                );
                assert!(
                    e2 < allowed(tol),
                    "{interpolation:?} {m:?} tol {tol:e}: adjoint {e2:e}"
                );
            }
        }
    }
}

#[test]
fn clustered_points_split_into_many_subproblems() {
    // Small bins and subproblems of 16 points: the cluster's bins hold
    // hundreds of points each, split over many blocks, and its footprints
    // wrap around the periodic edge; the sort order's tiles are cut short
    // at the grid's end.
    for (spreading, interpolation) in [
        (Spreading::Shared, Interpolation::Global),
        (Spreading::FixedPoint, Interpolation::Shared),
    ] {
        clustered(spreading, interpolation);
    }
}

fn clustered(spreading: Spreading, interpolation: Interpolation) {
    let Some(b) = gpu_with(NufftOptions {
        spreading,
        interpolation,
        bins: Some([4, 4, 4]),
        maxsub: 16,
        tiles: [3, 2, 3],
        ..NufftOptions::default()
    }) else {
        return;
    };
    let m = [12, 16, 10];
    let mut rng = Rng::new(3);
    let x: Vec<[f64; 3]> = (0..3000)
        .map(|_| [0, 1, 2].map(|_| std::f64::consts::PI - 0.2 * rng.next_f64()))
        .collect();
    let c = rng.complex(x.len());
    let ks = modes_of(m);
    let f = rng.complex(ks.len());
    let want1 = direct(&ks, &x, &c, 1.0);
    let want2 = direct(&x, &ks, &f, -1.0);
    for tol in [1e-3, 1e-6] {
        let (got1, got2) = gpu_pair(&b, m, tol, &x, &c, &f);
        let (e1, e2) = (nrmse(&got1, &want1), nrmse(&got2, &want2));
        println!(
            "clustered, {spreading:?}, {interpolation:?}, tol {tol:e}: type 1 {e1:.2e}, adjoint {e2:.2e}"
        );
        assert!(e1 < allowed(tol), "tol {tol:e}: type 1 {e1:e}");
        assert!(e2 < allowed(tol), "tol {tol:e}: adjoint {e2:e}");
    }
}

#[test]
fn gpu_nufft_matches_the_cpu_nufft_and_is_adjoint() {
    // The CPU's fine grid, twice the modes (Auto takes 1.5 times at 1e-3,
    // with another kernel: type1_and_adjoint_meet_the_tolerance_... checks
    // that grid against direct sums).
    let Some(b) = gpu_with(NufftOptions {
        upsampling: Upsampling::Two,
        ..NufftOptions::default()
    }) else {
        return;
    };
    let cpu = CpuBackend::<f64>::new();
    // Fine sizes 40, 36, 32 (cuFFT) and 64, 16, 160 (line FFTs).
    for (m, lines) in [([20, 18, 16], false), ([32, 8, 80], true)] {
        matches_the_cpu_nufft(&b, &cpu, m, lines);
    }
}

fn matches_the_cpu_nufft(b: &CudaBackend, cpu: &CpuBackend<f64>, m: [usize; 3], lines: bool) {
    let mut rng = Rng::new(4);
    let x: Vec<[f64; 3]> = (0..20_000)
        .map(|_| [0, 1, 2].map(|_| std::f64::consts::PI * rng.sym()))
        .collect();
    let c = rng.complex(x.len());
    let f = rng.complex(m.iter().product());
    for tol in [1e-3, 1e-6] {
        let pc = cpu.nufft_plan(m, tol, 1, &x).unwrap();
        let mut want1 = vec![Complex::default(); f.len()];
        let mut want2 = vec![Complex::default(); x.len()];
        let mut want3 = vec![Complex::default(); x.len()];
        cpu.nufft_type1(&pc, &mut want1, &c).unwrap();
        cpu.nufft_type1_adjoint(&pc, &mut want2, &f).unwrap();
        cpu.nufft_convolve(&pc, &mut want3, &c).unwrap();
        let (got1, got2) = gpu_pair(b, m, tol, &x, &c, &f);
        let pg = b.nufft_plan(m, tol, 1, &x).unwrap();
        assert_eq!(pg.line_fft(), lines, "{m:?}: which FFT");
        let mut conv = b.zeros(x.len()).unwrap();
        b.nufft_convolve(&pg, &mut conv, &b.upload(&down(&c)).unwrap())
            .unwrap();
        let mut got3 = vec![Complex::default(); x.len()];
        b.download(&mut got3, &conv).unwrap();
        let got3 = up(&got3);
        // The same kernel, grid and sums: only float32 rounding differs.
        let (e1, e2, e3) = (
            nrmse(&got1, &want1),
            nrmse(&got2, &want2),
            nrmse(&got3, &want3),
        );
        println!(
            "{m:?} tol {tol:e}, GPU against CPU: type 1 {e1:.2e}, adjoint {e2:.2e}, convolve {e3:.2e}"
        );
        for (what, e) in [("type 1", e1), ("adjoint", e2), ("convolve", e3)] {
            assert!(e < 1e-5, "{m:?} tol {tol:e}: {what} differs by {e:e}");
        }
        // <type1 c, f> = <c, type1^H f>, to float32 rounding.
        let lhs = inner(&got1, &f);
        let rhs = inner(&c, &got2);
        assert!(
            (lhs - rhs).norm() < 1e-5 * lhs.norm(),
            "{m:?} tol {tol:e}: {lhs} vs {rhs}"
        );
    }
}

#[test]
fn type1_over_coils_matches_the_cpu_coil_by_coil_on_both_ffts() {
    let Some(b) = gpu_with(NufftOptions::default()) else {
        return;
    };
    let cpu = CpuBackend::<f64>::new();
    let mut rng = Rng::new(6);
    let x: Vec<[f64; 3]> = (0..20_000)
        .map(|_| [0, 1, 2].map(|_| std::f64::consts::PI * rng.sym()))
        .collect();
    let w: Vec<f64> = (0..x.len()).map(|i| 0.5 + (i % 11) as f64 / 11.0).collect();
    // Five coils: each pinned buffer is written again after its copy.
    let coils = 5;
    let d = rng.complex(coils * x.len());
    // Fine sizes 40, 36, 32 (cuFFT) and 64, 16, 160 (line FFTs: the map
    // rides on the last pass).
    for (m, lines) in [([20, 18, 16], false), ([32, 8, 80], true)] {
        let len: usize = m.iter().product();
        let maps: Vec<Vec<Complex<f64>>> = (0..coils).map(|_| rng.complex(len)).collect();
        let pc = cpu.nufft_plan(m, 1e-6, 1, &x).unwrap();
        let mut want = vec![Complex::default(); len];
        let maps: Vec<&Vec<Complex<f64>>> = maps.iter().collect();
        recon_encoding::type1_coils_by_pieces(&cpu, &pc, &mut want, &w, &d, &maps, &mut |_, _| {})
            .unwrap();
        let pg = b.nufft_plan(m, 1e-6, 1, &x).unwrap();
        assert_eq!(pg.line_fft(), lines, "{m:?}: which FFT");
        let gmaps: Vec<_> = maps.iter().map(|s| b.upload(&down(s)).unwrap()).collect();
        let gmaps: Vec<&_> = gmaps.iter().collect();
        let mut ticks = 0;
        // Twice through the plan: the second run reuses its buffers.
        for run in 0..2 {
            let mut out = b.zeros(len).unwrap();
            b.nufft_type1_coils(&pg, &mut out, &w, &d, &gmaps, &mut |_, _| ticks += 1)
                .unwrap();
            let mut got = vec![Complex::default(); len];
            b.download(&mut got, &out).unwrap();
            let e = nrmse(&up(&got), &want);
            println!("{m:?} run {run}: type 1 over {coils} coils, GPU against CPU f64 {e:.2e}");
            // The same kernel and sums as the CPU at 1e-6: float32 rounding.
            assert!(e < 1e-5, "{m:?} run {run}: {e:e}");
        }
        assert_eq!(ticks, 2 * coils, "progress once per coil");
        // Lengths that disagree are refused.
        let mut out = b.zeros(len).unwrap();
        assert!(b
            .nufft_type1_coils(
                &pg,
                &mut out,
                &w[1..],
                &d[..coils * (x.len() - 1)],
                &gmaps,
                &mut |_, _| {}
            )
            .is_err());
        assert!(b
            .nufft_type1_coils(&pg, &mut out, &w, &d[1..], &gmaps, &mut |_, _| {})
            .is_err());
    }
}

#[test]
fn encoding_plan_on_the_gpu_matches_the_exact_engine_in_f64() {
    let Some(b) = gpu_with(NufftOptions::default()) else {
        return;
    };
    let cpu = CpuBackend::<f64>::new();
    let grid = Grid::new([16, 12, 14], [220.0, 200.0, 240.0]).unwrap();
    let mut rng = Rng::new(5);
    let traj = random_traj(&grid, 5000, &mut rng);
    let data = rng.complex(traj.len());
    let rho = rng.complex(grid.len());
    let q_ref = q(&cpu, &grid, &traj);
    let fhd_ref = fhd(&cpu, &grid, &traj, &data);
    let fwd_ref = forward(&cpu, &grid, &traj, &rho);
    for tol in [1e-3, 1e-5] {
        let plan = Plan::new(&b, Engine::Nufft { tolerance: tol }, &grid, &traj).unwrap();
        let q_gpu = recon_q::compute(&plan, &mut no_progress()).unwrap();
        let mut fhd_gpu = vec![Complex::default(); grid.len()];
        plan.adjoint(&mut fhd_gpu, &data, &mut no_progress())
            .unwrap();
        let mut fwd_gpu = vec![Complex::default(); traj.len()];
        plan.forward(&mut fwd_gpu, &down(&rho), &mut no_progress())
            .unwrap();
        let (eq, ef, ed) = (
            nrmse(&up(&q_gpu), &q_ref),
            nrmse(&up(&fhd_gpu), &fhd_ref),
            nrmse(&up(&fwd_gpu), &fwd_ref),
        );
        println!("plan, tol {tol:e}: Q {eq:.2e}, F^H D {ef:.2e}, F {ed:.2e}");
        assert!(eq < allowed(tol), "tol {tol:e}: Q {eq:e}");
        assert!(ef < allowed(tol), "tol {tol:e}: F^H D {ef:e}");
        assert!(ed < allowed(tol), "tol {tol:e}: F {ed:e}");
    }
}

#[test]
fn a_nan_strength_reaches_type_1_with_either_shared_spreading() {
    // Fixed point scales a subproblem by its largest strength: a NaN there
    // must make the result NaN, as float spreading does, not vanish.
    for spreading in [Spreading::Shared, Spreading::FixedPoint] {
        let Some(b) = gpu_with(NufftOptions {
            spreading,
            ..NufftOptions::default()
        }) else {
            return;
        };
        let m = [16, 16, 16];
        let mut rng = Rng::new(8);
        let x: Vec<[f64; 3]> = (0..500)
            .map(|_| [0, 1, 2].map(|_| std::f64::consts::PI * rng.sym()))
            .collect();
        let mut c = rng.complex(x.len());
        c[17] = Complex::new(f64::NAN, 0.0);
        // tolerance 1e-5: width 7, where Auto would spread in fixed point
        let f = rng.complex(m.iter().product());
        let (h, _) = gpu_pair(&b, m, 1e-5, &x, &c, &f);
        let nan = h.iter().filter(|v| v.re.is_nan() || v.im.is_nan()).count();
        println!("{spreading:?}: {nan} of {} modes NaN", h.len());
        assert!(nan > 0, "{spreading:?}: a NaN strength left no NaN");
    }
}

#[test]
fn bad_plans_and_lengths_are_refused() {
    let Some(b) = gpu_with(NufftOptions::default()) else {
        return;
    };
    // float32 cannot reach 1e-7; a NaN is not a point.
    assert!(b.nufft_plan([8, 8, 8], 1e-7, 1, &[[0.0; 3]]).is_err());
    assert!(b
        .nufft_plan([8, 8, 8], 1e-3, 1, &[[f64::NAN, 0.0, 0.0]])
        .is_err());
    assert!(b.nufft_plan([0, 8, 8], 1e-3, 1, &[[0.0; 3]]).is_err());
    let p = b
        .nufft_plan([8, 8, 8], 1e-3, 1, &[[0.1, 0.2, 0.3]])
        .unwrap();
    let mut out = b.zeros(511).unwrap();
    assert!(b.nufft_type1(&p, &mut out, &b.zeros(1).unwrap()).is_err());
    let mut out = b.zeros(512).unwrap();
    assert!(b.nufft_type1(&p, &mut out, &b.zeros(2).unwrap()).is_err());
    // A bin's copy past the shared memory a block may have: the shared
    // interpolation is refused, Auto takes the fine grid.
    let big = |interpolation| {
        gpu_with(NufftOptions {
            interpolation,
            bins: Some([256, 256, 256]),
            ..NufftOptions::default()
        })
        .unwrap()
        .nufft_plan([64, 64, 64], 1e-3, 1, &[[0.1, 0.2, 0.3]])
        .map(drop)
    };
    let refused = big(Interpolation::Shared).unwrap_err().to_string();
    assert!(refused.contains("interpolation"), "{refused}");
    // Auto's plan interpolates (a copy this large would fail to launch).
    let b = gpu_with(NufftOptions {
        bins: Some([256, 256, 256]),
        ..NufftOptions::default()
    })
    .unwrap();
    let p = b
        .nufft_plan([64, 64, 64], 1e-3, 1, &[[0.1, 0.2, 0.3]])
        .unwrap();
    let mut out = b.zeros(1).unwrap();
    b.nufft_type1_adjoint(&p, &mut out, &b.zeros(64 * 64 * 64).unwrap())
        .unwrap();
}

#[test]
fn plans_of_different_grids_share_their_kernels() {
    // Two plans of one width on different grids ask different shared
    // memory of the same spreading and interpolation kernels: the smaller
    // plan, made last, must leave the larger one able to launch.
    let Some(b) = gpu_with(NufftOptions::default()) else {
        return;
    };
    let mut rng = Rng::new(12);
    let x: Vec<[f64; 3]> = (0..300)
        .map(|_| [0, 1, 2].map(|_| std::f64::consts::PI * rng.sym()))
        .collect();
    let c = rng.complex(x.len());
    // tolerance 1e-5: width 7; fine grids 64^3 (bins of 16x8x8) and 14^3
    // (bins clipped to 14 along x)
    let (large, small) = ([32, 32, 32], [4, 4, 4]);
    let pl = b.nufft_plan(large, 1e-5, 1, &x).unwrap();
    let ps = b.nufft_plan(small, 1e-5, 1, &x).unwrap();
    for (p, m) in [(&ps, small), (&pl, large), (&ps, small)] {
        let ks = modes_of(m);
        let f = rng.complex(ks.len());
        let (want1, want2) = (direct(&ks, &x, &c, 1.0), direct(&x, &ks, &f, -1.0));
        let (got1, got2) = pair_on(&b, p, &c, &f);
        let (e1, e2) = (nrmse(&got1, &want1), nrmse(&got2, &want2));
        println!("{m:?}: type 1 {e1:.2e}, adjoint {e2:.2e}");
        assert!(e1 < allowed(1e-5), "{m:?}: type 1 {e1:e}");
        assert!(e2 < allowed(1e-5), "{m:?}: adjoint {e2:e}");
    }
}

#[test]
fn gridding_on_the_gpu_matches_the_cpu_f64_baseline() {
    let Some(b) = gpu_with(NufftOptions::default()) else {
        return;
    };
    let grid = Grid::new([16, 16, 12], [220.0, 220.0, 180.0]).unwrap();
    let mut rng = Rng::new(6);
    let traj = random_traj(&grid, 6000, &mut rng);
    let data = rng.complex(traj.len());
    let p = recon_gridding::Params::default();
    let want =
        recon_gridding::reconstruct(&CpuBackend::<f64>::new(), &grid, &traj, &data, &p).unwrap();
    let got = recon_gridding::reconstruct(&b, &grid, &traj, &data, &p).unwrap();
    // float32 weights after ten Pipe-Menon passes, and a float32 type 1 at
    // 1e-6: rounding only.
    let e = nrmse(&got, &want);
    println!("gridding, GPU against CPU f64: {e:.2e}");
    assert!(e < 1e-5, "{e:e}");
}

#[test]
fn flat_z_nufft_and_toeplitz_on_the_gpu_match_the_cpu_f64() {
    // A 2-D grid (one z mode): both spreading methods against direct sums
    // (points at z = 0, as a 2-D trajectory's); then the encoding plan's Q
    // and F^H D and the Toeplitz product on a [24, 20, 1] grid against the
    // exact engine on the CPU in float64.
    for (spreading, interpolation) in [
        (Spreading::Shared, Interpolation::Shared),
        (Spreading::Global, Interpolation::Global),
    ] {
        let Some(b) = gpu_with(NufftOptions {
            spreading,
            interpolation,
            ..NufftOptions::default()
        }) else {
            return;
        };
        let m = [24, 18, 1];
        let mut rng = Rng::new(9);
        let x: Vec<[f64; 3]> = (0..3000)
            .map(|_| {
                [
                    3.0 * std::f64::consts::PI * rng.sym(),
                    3.0 * std::f64::consts::PI * rng.sym(),
                    0.0,
                ]
            })
            .collect();
        let c = rng.complex(x.len());
        let ks = modes_of(m);
        let f = rng.complex(ks.len());
        let (want1, want2) = (direct(&ks, &x, &c, 1.0), direct(&x, &ks, &f, -1.0));
        for tol in [1e-3, 1e-6] {
            let (got1, got2) = gpu_pair(&b, m, tol, &x, &c, &f);
            let (e1, e2) = (nrmse(&got1, &want1), nrmse(&got2, &want2));
            println!("flat {spreading:?} tol {tol:e}: type 1 {e1:.2e}, adjoint {e2:.2e}");
            assert!(
                e1 < allowed(tol),
                "flat {spreading:?} tol {tol:e}: type 1 {e1:e}"
            );
            assert!(
                e2 < allowed(tol),
                "flat {spreading:?} tol {tol:e}: adjoint {e2:e}"
            );
        }
    }
    let Some(b) = gpu(Options::default()) else {
        return;
    };
    let grid = Grid::new([24, 20, 1], [240.0, 200.0, 5.0]).unwrap();
    let mut rng = Rng::new(10);
    let traj = random_traj(&grid, 1500, &mut rng);
    let cpu = CpuBackend::<f64>::new();
    let q64 = common::q(&cpu, &grid, &traj);
    let plan = Plan::new(&b, Engine::Nufft { tolerance: 1e-6 }, &grid, &traj).unwrap();
    let q32 = recon_q::compute(&plan, &mut no_progress()).unwrap();
    let eq = nrmse(&up(&q32), &q64);
    let d = rng.complex(traj.len());
    let mut fhd = vec![Complex::default(); grid.len()];
    plan.adjoint(&mut fhd, &d, &mut no_progress()).unwrap();
    let ef = nrmse(&up(&fhd), &common::fhd(&cpu, &grid, &traj, &d));
    let x = rng.complex(grid.len());
    let mut t32 = recon_cg::Toeplitz::new(&b, &grid, &q32).unwrap();
    let mut t64 = recon_cg::Toeplitz::new(&cpu, &grid, &q64).unwrap();
    let (mut o32, mut o64) = (b.zeros(grid.len()).unwrap(), cpu.zeros(grid.len()).unwrap());
    use recon_cg::Normal;
    t32.apply(&b, &mut o32, &b.upload(&down(&x)).unwrap())
        .unwrap();
    t64.apply(&cpu, &mut o64, &cpu.upload(&x).unwrap()).unwrap();
    let mut h = vec![Complex::default(); grid.len()];
    b.download(&mut h, &o32).unwrap();
    let et = nrmse(&up(&h), &o64);
    println!("flat [24, 20, 1] on the GPU: Q {eq:.2e}, F^H D {ef:.2e}, Toeplitz {et:.2e}");
    // The NUFFT's tolerance and float32 (as the 3-D test of the plan).
    assert!(
        eq < 1e-5 && ef < 1e-5 && et < 1e-5,
        "Q {eq:e}, F^H D {ef:e}, Toeplitz {et:e}"
    );
}
