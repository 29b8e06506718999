//! The exact engine: each sum evaluated directly by the backend's
//! summation kernel, as in the book. F^H D gathers over all samples for
//! each voxel (the "Mu" loop first, O(M), then O(N^3 M)), so no two threads
//! write the same output; the forward model swaps the roles of samples and
//! voxels. Every sum is split over the backend's shards (the GPUs of a
//! host) as slabs of its targets.

use recon_core::{Backend, Complex, Grid, Lattice, Progress, Result, Sign, Targets};

/// `out[n] = sum_m coef[m] exp(+i 2pi k_m . y_n)` on a lattice: Q on the
/// displacements with `coef = |phi(k_m)|^2`, F^H D on the voxels with
/// `coef = Mu_m = phi(k_m) D_m`.
pub(crate) fn lattice_sum<B: Backend>(
    backend: &B,
    out: &mut [Complex<B::Real>],
    lattice: Lattice,
    traj: &[[f64; 3]],
    coef: &[Complex<B::Real>],
    progress: Progress<'_>,
) -> Result<()> {
    recon_ops::sum_exp_on_shards(
        backend,
        out,
        Targets::Lattice(lattice),
        traj,
        coef,
        Sign::Plus,
        progress,
    )
}

/// `out[m] = sum_n rho[n] exp(-i 2pi k_m . x_n)` (the caller applies phi).
pub(crate) fn forward<B: Backend>(
    backend: &B,
    out: &mut [Complex<B::Real>],
    grid: &Grid,
    traj: &[[f64; 3]],
    rho: &[Complex<B::Real>],
    progress: Progress<'_>,
) -> Result<()> {
    let vox = grid.voxels();
    let positions: Vec<[f64; 3]> = (0..vox.len()).map(|i| vox.point(i)).collect();
    recon_ops::sum_exp_on_shards(
        backend,
        out,
        Targets::List(traj),
        &positions,
        rho,
        Sign::Minus,
        progress,
    )
}
