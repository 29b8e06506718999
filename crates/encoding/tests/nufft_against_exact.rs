//! Q, F^H D and F through the NUFFT engine against the exact engine in
//! float64, on every trajectory kind and a non-cubic grid; and the pair's
//! adjointness.

use recon_core::{Complex, CpuBackend, Grid, Real};
use recon_encoding::{Engine, Plan};
use recon_synth::Trajectory;

/// Q, F^H D and F by one plan.
#[allow(clippy::type_complexity)]
fn sums<T: Real>(
    engine: Engine,
    grid: &Grid,
    traj: &[[f64; 3]],
    data: &[Complex<f64>],
    rho: &[Complex<T>],
) -> (Vec<Complex<T>>, Vec<Complex<T>>, Vec<Complex<T>>) {
    let cpu = CpuBackend::<T>::new();
    let plan = Plan::new(&cpu, engine, grid, traj).unwrap();
    let mut q = vec![Complex::default(); grid.doubled().iter().product()];
    plan.q(&mut q, &mut |_, _| {}).unwrap();
    let mut fhd = vec![Complex::default(); grid.len()];
    plan.adjoint(&mut fhd, data, &mut |_, _| {}).unwrap();
    let mut d = vec![Complex::default(); traj.len()];
    plan.forward(&mut d, rho, &mut |_, _| {}).unwrap();
    (q, fhd, d)
}

fn rel_l2(a: &[Complex<f64>], b: &[Complex<f64>]) -> f64 {
    let num: f64 = a.iter().zip(b).map(|(x, y)| (x - y).norm_sqr()).sum();
    let den: f64 = b.iter().map(|y| y.norm_sqr()).sum();
    (num / den).sqrt()
}

#[test]
fn q_fhd_and_forward_match_the_exact_engine() {
    let grid = Grid::new([12, 10, 8], [240.0, 200.0, 160.0]).unwrap();
    let trajectories = [
        Trajectory::Radial {
            spokes: 60,
            samples: 10,
            kmax: 1.0,
        },
        Trajectory::StackOfSpirals {
            interleaves: 3,
            turns: 3.0,
            samples: 30,
            partitions: None,
            kmax: 1.0,
        },
        Trajectory::Tpi {
            cones: 6,
            projections: 40,
            samples: 20,
            p: 0.3,
            kmax: 1.0,
        },
        Trajectory::Cartesian {},
    ];
    for t in &trajectories {
        let traj = t.generate(&grid).unwrap();
        // Smooth data with some structure: a sum of two exponentials.
        let data: Vec<Complex<f64>> = traj
            .iter()
            .map(|k| Complex::new((0.3 * k[0]).cos() + 0.1 * k[2], (0.2 * k[1]).sin()))
            .collect();
        let rho: Vec<Complex<f64>> = (0..grid.len())
            .map(|i| Complex::new((i % 7) as f64, (i % 3) as f64 - 1.0))
            .collect();
        let (q_exact, fhd_exact, d_exact) = sums(Engine::Exact, &grid, &traj, &data, &rho);
        for tol in [1e-2, 1e-3, 1e-6, 1e-9] {
            let (q, fhd, d) = sums(Engine::Nufft { tolerance: tol }, &grid, &traj, &data, &rho);
            // Below the tolerance, as the NUFFT promises for its sums
            // (measured: at most 0.64 of it). One exception: Q of the
            // Cartesian trajectory is a comb of spikes that cancels almost
            // everywhere, so the NUFFT's error, spread evenly, is large
            // against its small norm: 1.37 tol at 1e-9. Bound for Q: 2 tol.
            // The exact engine itself agrees with the NUFFT to 1e-13 at
            // tolerance 1e-13, so it is the reference here, not a source
            // of error.
            for (name, got, want, bound) in [
                ("Q", &q, &q_exact, 2.0 * tol),
                ("F^H D", &fhd, &fhd_exact, tol),
                ("F", &d, &d_exact, tol),
            ] {
                let e = rel_l2(got, want);
                assert!(e < bound, "{t:?}: {name} at tolerance {tol:e}: {e:e}");
            }
        }
    }
}

#[test]
fn float32_plans_meet_their_tolerance_against_float64_exact_sums() {
    let grid = Grid::new([10, 12, 8], [200.0, 240.0, 160.0]).unwrap();
    let traj = Trajectory::Radial {
        spokes: 80,
        samples: 12,
        kmax: 1.0,
    }
    .generate(&grid)
    .unwrap();
    let data: Vec<Complex<f64>> = traj
        .iter()
        .map(|k| Complex::new((0.3 * k[0]).cos(), (0.2 * k[1]).sin() + 0.05 * k[2]))
        .collect();
    let rho64: Vec<Complex<f64>> = (0..grid.len())
        .map(|i| Complex::new((i % 5) as f64, (i % 4) as f64 - 1.5))
        .collect();
    let rho32: Vec<Complex<f32>> = rho64
        .iter()
        .map(|c| Complex::new(c.re as f32, c.im as f32))
        .collect();
    let (q0, f0, d0) = sums(Engine::Exact, &grid, &traj, &data, &rho64);
    let to64 = |v: Vec<Complex<f32>>| -> Vec<Complex<f64>> {
        v.into_iter()
            .map(|c| Complex::new(c.re as f64, c.im as f64))
            .collect()
    };
    for tol in [1e-2, 1e-4, 1e-6] {
        let (q, f, d) = sums(
            Engine::Nufft { tolerance: tol },
            &grid,
            &traj,
            &data,
            &rho32,
        );
        // The kernel's error (below tol, as in float64) plus float32
        // rounding of sums of ~1000 terms (~1e-7): still below tol.
        for (name, got, want) in [
            ("Q", to64(q), &q0),
            ("F^H D", to64(f), &f0),
            ("F", to64(d), &d0),
        ] {
            let e = rel_l2(&got, want);
            assert!(e < tol, "float32 {name} at {tol:e}: {e:e}");
        }
    }
    // float32 cannot reach below 1e-6: the plan is refused.
    let cpu = CpuBackend::<f32>::new();
    let err = Plan::new(&cpu, Engine::Nufft { tolerance: 1e-7 }, &grid, &traj)
        .err()
        .expect("refused");
    assert!(err.to_string().contains("float32"), "{err}");
}

#[test]
fn forward_and_adjoint_are_adjoint_for_both_engines() {
    let grid = Grid::new([8, 6, 10], [160.0, 120.0, 200.0]).unwrap();
    let traj = Trajectory::Tpi {
        cones: 5,
        projections: 30,
        samples: 12,
        p: 0.3,
        kmax: 1.0,
    }
    .generate(&grid)
    .unwrap();
    let cpu = CpuBackend::<f64>::new();
    let x: Vec<Complex<f64>> = (0..grid.len())
        .map(|i| Complex::new(((i * 7) % 11) as f64 - 5.0, ((i * 3) % 5) as f64))
        .collect();
    let y: Vec<Complex<f64>> = (0..traj.len())
        .map(|m| Complex::new(((m * 5) % 7) as f64 - 3.0, ((m * 2) % 9) as f64 - 4.0))
        .collect();
    for engine in [Engine::Exact, Engine::Nufft { tolerance: 1e-6 }] {
        let plan = Plan::new(&cpu, engine, &grid, &traj).unwrap();
        let mut fx = vec![Complex::default(); traj.len()];
        plan.forward(&mut fx, &x, &mut |_, _| {}).unwrap();
        let mut fhy = vec![Complex::default(); grid.len()];
        plan.adjoint(&mut fhy, &y, &mut |_, _| {}).unwrap();
        // <F x, y> = <x, F^H y>: the NUFFT's adjoint is its own
        // transpose step by step, so the pair agrees to f64 rounding
        // whatever the tolerance.
        let lhs: Complex<f64> = fx.iter().zip(&y).map(|(a, b)| a.conj() * b).sum();
        let rhs: Complex<f64> = x.iter().zip(&fhy).map(|(a, b)| a.conj() * b).sum();
        assert!(
            (lhs - rhs).norm() <= 1e-12 * lhs.norm(),
            "{engine:?}: {lhs} vs {rhs}"
        );
    }
}

#[test]
fn the_delta_basis_gives_the_plain_fourier_sums() {
    // With the delta basis phi(k) = V: F^H D = V sum_m D_m exp(i 2pi k_m.x)
    // and Q = V^2 sum_m exp(i 2pi k_m.y), summed here directly in float64.
    // Both engines; the box basis must differ (its sinc weights are far
    // from 1 near the edge of k-space).
    use recon_core::Basis;
    let grid = Grid::new([8, 6, 10], [200.0, 150.0, 250.0])
        .unwrap()
        .with_basis(Basis::Delta);
    let traj = Trajectory::Radial {
        spokes: 30,
        samples: 8,
        kmax: 1.0,
    }
    .generate(&grid)
    .unwrap();
    let data: Vec<Complex<f64>> = traj
        .iter()
        .map(|k| Complex::new((0.3 * k[0]).cos(), (0.2 * k[1]).sin() + 0.1 * k[2]))
        .collect();
    let v = grid.voxel_volume();
    let turns = |k: &[f64; 3], x: [f64; 3]| k[0] * x[0] + k[1] * x[1] + k[2] * x[2];
    let cis = |t: f64| Complex::from_polar(1.0, std::f64::consts::TAU * t);
    let voxels = grid.voxels();
    let fhd_want: Vec<Complex<f64>> = (0..grid.len())
        .map(|i| {
            let x = voxels.point(i);
            v * traj
                .iter()
                .zip(&data)
                .map(|(k, d)| d * cis(turns(k, x)))
                .sum::<Complex<f64>>()
        })
        .collect();
    let lags = grid.displacements();
    let q_want: Vec<Complex<f64>> = (0..lags.len())
        .map(|j| {
            let y = lags.point(j);
            v * v * traj.iter().map(|k| cis(turns(k, y))).sum::<Complex<f64>>()
        })
        .collect();
    let rho = vec![Complex::default(); grid.len()];
    for engine in [Engine::Exact, Engine::Nufft { tolerance: 1e-9 }] {
        let (q, fhd, _) = sums::<f64>(engine, &grid, &traj, &data, &rho);
        // The exact engine differs from these sums by float64 rounding in
        // another order (about 1e-14); the NUFFT at tolerance 1e-9 stays
        // below it (0.64 tol at most in the test above). 1e-8 passes both
        // with room, while a wrong phi (the box's sinc) misses by over 1e-2.
        let (eq, ef) = (rel_l2(&q, &q_want), rel_l2(&fhd, &fhd_want));
        assert!(eq < 1e-8 && ef < 1e-8, "{engine:?}: Q {eq:e}, F^H D {ef:e}");
        let boxed = grid.with_basis(Basis::Box);
        let (q_box, fhd_box, _) = sums::<f64>(engine, &boxed, &traj, &data, &rho);
        assert!(rel_l2(&q_box, &q_want) > 1e-2 && rel_l2(&fhd_box, &fhd_want) > 1e-2);
    }
}
