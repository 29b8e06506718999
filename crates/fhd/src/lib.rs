//! The encoding operator F and its adjoint, by direct summation.
//!
//! `F[m, n] = phi(k_m) exp(-i 2pi k_m . x_n)` maps voxel coefficients to
//! k-space samples. Its adjoint applied to the data,
//! `F^H D[n] = sum_m conj(phi(k_m)) D_m exp(+i 2pi k_m . x_n)`, is computed
//! per scan as in the book: first `Mu_m = conj(phi(k_m)) D_m` (the "Mu"
//! loop, O(M)), then a gather over all samples for each voxel through the
//! backend's summation engine, so no two threads write the same output.
//! The forward model F uses the same engine with the roles of samples and
//! voxels swapped; the pipeline needs it only for tests and calibration.

use recon_core::{Backend, Complex, Error, Grid, Progress, Real, Result, Sign, Targets};

/// `Mu_m = conj(phi(k_m)) D_m`, in the backend's precision.
pub fn mu<T: Real>(grid: &Grid, traj: &[[f64; 3]], data: &[Complex<f64>]) -> Vec<Complex<T>> {
    traj.iter()
        .zip(data)
        .map(|(k, d)| {
            let m = d * grid.phi(*k); // phi is real: conj(phi) = phi
            Complex::new(T::of(m.re), T::of(m.im))
        })
        .collect()
}

/// `F^H D` on the image grid (x fastest).
pub fn fhd<B: Backend>(
    backend: &B,
    grid: &Grid,
    traj: &[[f64; 3]],
    data: &[Complex<f64>],
    progress: Progress<'_>,
) -> Result<Vec<Complex<B::Real>>> {
    Error::check_len(
        "k-space data (one value per trajectory point)",
        traj.len(),
        data.len(),
    )?;
    let mu = mu::<B::Real>(grid, traj, data);
    let mut out = vec![Complex::default(); grid.len()];
    backend.sum_exp(
        &mut out,
        Targets::Lattice(grid.voxels()),
        traj,
        &mu,
        Sign::Plus,
        progress,
    )?;
    Ok(out)
}

/// The forward model `D = F rho`.
pub fn forward<B: Backend>(
    backend: &B,
    grid: &Grid,
    traj: &[[f64; 3]],
    rho: &[Complex<B::Real>],
    progress: Progress<'_>,
) -> Result<Vec<Complex<B::Real>>> {
    Error::check_len("image (one value per voxel)", grid.len(), rho.len())?;
    let vox = grid.voxels();
    let positions: Vec<[f64; 3]> = (0..vox.len()).map(|i| vox.point(i)).collect();
    let mut out = vec![Complex::default(); traj.len()];
    backend.sum_exp(
        &mut out,
        Targets::List(traj),
        &positions,
        rho,
        Sign::Minus,
        progress,
    )?;
    for (d, k) in out.iter_mut().zip(traj) {
        *d = *d * B::Real::of(grid.phi(*k));
    }
    Ok(out)
}
