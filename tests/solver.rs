//! CG on the Toeplitz normal equations against a dense LAPACK solve.

mod common;

use common::*;
use ndarray::{Array1, Array2};
use ndarray_linalg::Solve;
use recon_cg::{Params, Regularised, Toeplitz};
use recon_core::{metrics::nrmse, Backend, Complex, CpuBackend, Grid, Stencil};

/// Solves `(F^H F + lambda W^H W) x = F^H y` both ways and compares.
fn compare(lambda_rel: f64, seed: u64) {
    let grid = Grid::new([4, 4, 4], [100.0; 3]).unwrap();
    let n = grid.len();
    let mut rng = Rng::new(seed);
    let traj = random_traj(&grid, 160, &mut rng);
    let y = rng.complex(traj.len());
    let be = CpuBackend::<f64>::new();

    // Dense: A = F^H F + lambda W^H W, b = F^H y.
    let f = explicit_f(&grid, &traj);
    let q = common::q(&be, &grid, &traj);
    let lambda = recon_cg::lambda_abs(lambda_rel, &grid, &q).unwrap();
    let w = Stencil::uniform(grid.n);
    let wd = be.upload_weights(&w).unwrap();
    let mut a = Array2::<Complex<f64>>::zeros((n, n));
    for j in 0..n {
        // column j of W^H W, from the stencil applied to e_j
        let mut e = vec![Complex::new(0.0, 0.0); n];
        e[j] = Complex::new(1.0, 0.0);
        let mut col = vec![Complex::new(0.0, 0.0); n];
        be.add_whw(&mut col, lambda, &e, &wd).unwrap();
        for i in 0..n {
            let ff: Complex<f64> = (0..traj.len())
                .map(|m| f[m * n + i].conj() * f[m * n + j])
                .sum();
            a[[i, j]] = ff + col[i];
        }
    }
    let b: Array1<Complex<f64>> = (0..n)
        .map(|i| (0..traj.len()).map(|m| f[m * n + i].conj() * y[m]).sum())
        .collect();
    let dense = a.solve(&b).unwrap();

    // CG with the Toeplitz operator.
    let fhd = common::fhd(&be, &grid, &traj, &y);
    let mut t = Toeplitz::new(&be, &grid, &q).unwrap();
    let mut op = Regularised::new(&be, &mut t, &w, lambda).unwrap();
    let mut x = be.zeros(n).unwrap();
    let params = Params {
        iterations: 400,
        tolerance: 1e-13,
    };
    let mut seen = 0;
    let info = recon_cg::solve(&be, &mut op, &mut x, &fhd, &params, &mut |_, _| seen += 1).unwrap();
    assert_eq!(seen, info.iterations);
    assert_eq!(info.residuals.len(), info.iterations);
    assert!(info.relative_residual <= 1e-13, "{info:?}");
    let err = nrmse(&x, dense.as_slice().unwrap());
    // Residual 1e-13 times the condition number (<1e4 here) bounds the error.
    assert!(
        err < 1e-8,
        "lambda {lambda_rel}: CG vs dense relative error {err:e}"
    );
}

#[test]
fn cg_matches_dense_solve_unregularised() {
    compare(0.0, 11);
}

#[test]
fn cg_matches_dense_solve_regularised() {
    compare(0.05, 12);
}

#[test]
fn cg_of_zero_rhs_is_zero() {
    let grid = Grid::new([4, 4, 4], [100.0; 3]).unwrap();
    let be = CpuBackend::<f64>::new();
    let mut rng = Rng::new(13);
    let traj = random_traj(&grid, 50, &mut rng);
    let q = common::q(&be, &grid, &traj);
    let mut t = Toeplitz::new(&be, &grid, &q).unwrap();
    let b = be.zeros(64).unwrap();
    let mut x = rng.complex(64);
    let info =
        recon_cg::solve(&be, &mut t, &mut x, &b, &Params::default(), &mut |_, _| {}).unwrap();
    assert_eq!(info.iterations, 0);
    assert!(x.iter().all(|v| v.norm() == 0.0));
}
