//! recon's three sums through the NUFFT, in float64: Q on the doubled grid,
//! F^H D on the image grid (both type 1, sign +) and the forward model F
//! (type 2, sign -). k-space positions in cycles/FOV become the NUFFT's
//! radians as `x_d = 2 pi k_d / N_d`; the voxel offsets `n - N/2` and the
//! displacements `j - N` are then exactly its centred modes.

use crate::Plan;
use recon_core::{Complex, Error, Grid, Result};

/// k in cycles/FOV to NUFFT points in radians for `grid`.
fn points(grid: &Grid, traj: &[[f64; 3]]) -> Vec<[f64; 3]> {
    let s = grid.n.map(|n| 2.0 * std::f64::consts::PI / n as f64);
    traj.iter()
        .map(|k| [k[0] * s[0], k[1] * s[1], k[2] * s[2]])
        .collect()
}

/// `Q[j] = sum_m |phi(k_m)|^2 exp(+i 2 pi k_m . y_j)` on the `(2N)^3`
/// displacement grid (x fastest, displacement 0 at index N), as
/// `recon_q::compute` defines it.
pub fn q(grid: &Grid, traj: &[[f64; 3]], tol: f64) -> Result<Vec<Complex<f64>>> {
    let mut plan = Plan::new(grid.doubled(), tol, 1)?;
    plan.set_points(&points(grid, traj))?;
    let c: Vec<Complex<f64>> = traj
        .iter()
        .map(|k| Complex::new(grid.phi(*k).powi(2), 0.0))
        .collect();
    let mut out = vec![Complex::default(); grid.doubled().iter().product()];
    plan.type1(&mut out, &c)?;
    Ok(out)
}

/// `F^H D` on the image grid, as `recon_fhd::fhd` defines it.
pub fn fhd(
    grid: &Grid,
    traj: &[[f64; 3]],
    data: &[Complex<f64>],
    tol: f64,
) -> Result<Vec<Complex<f64>>> {
    Error::check_len("k-space data (one per sample)", traj.len(), data.len())?;
    let mut plan = Plan::new(grid.n, tol, 1)?;
    plan.set_points(&points(grid, traj))?;
    // Mu_m = conj(phi(k_m)) D_m, phi real
    let mu: Vec<Complex<f64>> = traj
        .iter()
        .zip(data)
        .map(|(k, d)| d * grid.phi(*k))
        .collect();
    let mut out = vec![Complex::default(); grid.len()];
    plan.type1(&mut out, &mu)?;
    Ok(out)
}

/// The forward model `D = F rho`, as `recon_fhd::forward` defines it.
pub fn forward(
    grid: &Grid,
    traj: &[[f64; 3]],
    rho: &[Complex<f64>],
    tol: f64,
) -> Result<Vec<Complex<f64>>> {
    let mut plan = Plan::new(grid.n, tol, -1)?;
    plan.set_points(&points(grid, traj))?;
    let mut out = vec![Complex::default(); traj.len()];
    plan.type2(&mut out, rho)?;
    for (d, k) in out.iter_mut().zip(traj) {
        *d *= grid.phi(*k);
    }
    Ok(out)
}
