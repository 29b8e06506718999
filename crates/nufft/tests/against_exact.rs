//! Q, F^H D and F through the NUFFT against the exact engine in float64, on
//! every trajectory kind and a non-cubic grid.

use recon_core::{Complex, CpuBackend, Grid};
use recon_synth::Trajectory;

fn rel_l2(a: &[Complex<f64>], b: &[Complex<f64>]) -> f64 {
    let num: f64 = a.iter().zip(b).map(|(x, y)| (x - y).norm_sqr()).sum();
    let den: f64 = b.iter().map(|y| y.norm_sqr()).sum();
    (num / den).sqrt()
}

#[test]
fn q_fhd_and_forward_match_the_exact_engine() {
    let grid = Grid::new([12, 10, 8], [240.0, 200.0, 160.0]).unwrap();
    let cpu = CpuBackend::<f64>::new();
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
        let q_exact = recon_q::compute(&cpu, &grid, &traj, &mut |_, _| {}).unwrap();
        let fhd_exact = recon_fhd::fhd(&cpu, &grid, &traj, &data, &mut |_, _| {}).unwrap();
        let rho: Vec<Complex<f64>> = (0..grid.len())
            .map(|i| Complex::new((i % 7) as f64, (i % 3) as f64 - 1.0))
            .collect();
        let d_exact = recon_fhd::forward(&cpu, &grid, &traj, &rho, &mut |_, _| {}).unwrap();
        for tol in [1e-3, 1e-6, 1e-9] {
            let q = recon_nufft::mri::q(&grid, &traj, tol).unwrap();
            let fhd = recon_nufft::mri::fhd(&grid, &traj, &data, tol).unwrap();
            let d = recon_nufft::mri::forward(&grid, &traj, &rho, tol).unwrap();
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
