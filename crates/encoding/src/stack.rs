//! Stacks: one 2-D trajectory repeated on the Cartesian k_z partitions of a
//! 3-D grid (stack of stars, stack of spirals), split into one 2-D problem
//! per slice.
//!
//! On partition `k_z = p - Nz/2` (`p = 0 .. Nz`) the 3-D model is
//! `D_p(m) = r_p sum_j exp(-i 2pi k_z z_j) G_j(m)`, with `z_j = (j - Nz/2)
//! / Nz` the slices' centres in FOV units, `G_j = F_2D rho_j` slice j's 2-D
//! encoding on the slice grid (`[Nx, Ny, 1]`, `FOV_z / Nz` thick) and
//! `r_p` the voxel basis's factor along z (`sinc(k_z / Nz)` for the box, 1
//! for the delta). The partitions are a full DFT of length Nz, so
//! `G_j(m) = 1/Nz sum_p exp(+i 2pi k_z z_j) D_p(m) / r_p` exactly: each
//! slice is a 2-D problem of its own ([`Stack::slices`]), and a scan that
//! is a stack reconstructs as a batch of 2-D problems that share one
//! trajectory (and so one plan and one Q).

use rayon::prelude::*;
use recon_core::{Complex, Error, Grid, Result};

/// A 3-D trajectory found to be a stack: its plane and partitions.
#[derive(Debug, Clone, PartialEq)]
pub struct Stack {
    /// The 3-D grid.
    pub grid: Grid,
    /// One slice's grid: `[Nx, Ny, 1]`, `FOV_z / Nz` thick, same basis.
    pub slice: Grid,
    /// The 2-D trajectory every partition repeats, at k_z = 0.
    pub plane: Vec<[f64; 3]>,
    /// `order[p][m]`: the index in the 3-D trajectory of sample m of
    /// partition p (`k_z = p - Nz/2`).
    order: Vec<Vec<usize>>,
}

impl Stack {
    /// The stack `traj` is on `grid`, if it is one: every sample's k_z one
    /// of the Nz Cartesian partitions `p - Nz/2`, each partition present,
    /// and each holding the same in-plane positions in the same order.
    /// `None` otherwise (or on a 2-D grid, which is one plane already).
    pub fn detect(grid: &Grid, traj: &[[f64; 3]]) -> Option<Stack> {
        let nz = grid.n[2];
        if grid.is_2d() || traj.is_empty() || !traj.len().is_multiple_of(nz) {
            return None;
        }
        let mut order = vec![Vec::with_capacity(traj.len() / nz); nz];
        for (i, k) in traj.iter().enumerate() {
            let p = k[2] + (nz / 2) as f64;
            if p != p.round() || p < 0.0 || p >= nz as f64 {
                return None;
            }
            order[p as usize].push(i);
        }
        let first = &order[0];
        let same = order.iter().all(|o| {
            o.len() == first.len()
                && o.iter()
                    .zip(first)
                    .all(|(&a, &b)| traj[a][..2] == traj[b][..2])
        });
        if !same {
            return None;
        }
        let plane = first
            .iter()
            .map(|&i| [traj[i][0], traj[i][1], 0.0])
            .collect();
        let thick = grid.fov_mm[2] / nz as f64;
        let slice = Grid::new(
            [grid.n[0], grid.n[1], 1],
            [grid.fov_mm[0], grid.fov_mm[1], thick],
        )
        .ok()?
        .with_basis(grid.basis);
        Some(Stack {
            grid: *grid,
            slice,
            plane,
            order,
        })
    }

    /// Slices (partitions).
    pub fn len(&self) -> usize {
        self.order.len()
    }

    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    /// The basis's factor along z on partition `p`: `phi_3D / phi_slice`.
    fn factor(&self, p: usize) -> f64 {
        let kz = p as f64 - (self.len() / 2) as f64;
        self.grid.phi([0.0, 0.0, kz]) / self.slice.phi([0.0; 3])
    }

    /// Each slice's 2-D data, `[Nz][M_2D]`, from the 3-D data (one value per
    /// sample of the 3-D trajectory): the inverse DFT along k_z of the
    /// partitions, each divided by its basis factor (module docs), so that
    /// slice j's data are exactly `F_2D rho_j` of the 3-D model.
    pub fn slices(&self, data: &[Complex<f64>]) -> Result<Vec<Vec<Complex<f64>>>> {
        self.split(data, true)
    }

    /// The factor by which [`Stack::slices`] multiplies the noise variance
    /// of the data: each slice's sample is `sum_p D_p w_p` with
    /// `|w_p| = 1 / (Nz r_p)`, so white noise of variance sigma^2 on the
    /// partitions has variance `sigma^2 sum_p 1 / (Nz r_p)^2` in a slice.
    pub fn noise_gain(&self) -> f64 {
        let nz = self.len() as f64;
        (0..self.len())
            .map(|p| (nz * self.factor(p)).powi(-2))
            .sum()
    }

    /// The inverse DFT along k_z alone, without the basis factor: what the
    /// 3-D gridding baseline, which does not model the voxel basis, sees of
    /// each slice.
    pub fn slices_unweighted(&self, data: &[Complex<f64>]) -> Result<Vec<Vec<Complex<f64>>>> {
        self.split(data, false)
    }

    fn split(&self, data: &[Complex<f64>], basis: bool) -> Result<Vec<Vec<Complex<f64>>>> {
        let nz = self.len();
        let m = self.plane.len();
        Error::check_len("stack data (one value per sample)", nz * m, data.len())?;
        // G_j = sum_p a_p exp(+i 2pi (p - c)(j - c) / Nz), c = Nz/2 and
        // a_p = D_p / (Nz r_p), is pre_p, an inverse FFT of length Nz, and
        // post_j: exp(i 2pi (p - c)(j - c) / Nz) = exp(i 2pi p j / Nz)
        // exp(-i 2pi p c / Nz) exp(i 2pi c (c - j) / Nz).
        let c = (nz / 2) as f64;
        let turn = |x: f64| Complex::from_polar(1.0, std::f64::consts::TAU * x / nz as f64);
        let pre: Vec<_> = (0..nz)
            .map(|p| {
                let r = if basis { self.factor(p) } else { 1.0 };
                turn(-(p as f64) * c) / (nz as f64 * r)
            })
            .collect();
        let post: Vec<_> = (0..nz).map(|j| turn(c * (c - j as f64))).collect();
        let fft = rustfft::FftPlanner::new().plan_fft_inverse(nz);
        // Blocks of samples, each task writing its block of every slice.
        const SAMPLES: usize = 1024;
        let mut out: Vec<Vec<Complex<f64>>> =
            (0..nz).map(|_| vec![Complex::default(); m]).collect();
        let mut blocks: Vec<Vec<&mut [Complex<f64>]>> = (0..m.div_ceil(SAMPLES))
            .map(|_| Vec::with_capacity(nz))
            .collect();
        for slice in out.iter_mut() {
            for (b, block) in slice.chunks_mut(SAMPLES).enumerate() {
                blocks[b].push(block);
            }
        }
        blocks
            .into_par_iter()
            .enumerate()
            .for_each(|(b, mut slices)| {
                let mut g = vec![Complex::default(); nz];
                let mut scratch = vec![Complex::default(); fft.get_inplace_scratch_len()];
                for k in 0..slices[0].len() {
                    let i = b * SAMPLES + k;
                    for (p, g) in g.iter_mut().enumerate() {
                        *g = data[self.order[p][i]] * pre[p];
                    }
                    fft.process_with_scratch(&mut g, &mut scratch);
                    for (j, slice) in slices.iter_mut().enumerate() {
                        slice[k] = g[j] * post[j];
                    }
                }
            });
        Ok(out)
    }
}

/// Q of `planes` 2-D problems that share Q (a stack's slices, or the
/// slices and contrasts of a multi-slice scan) solved together as one 3-D
/// problem on `[Nx, Ny, planes]`: the 2-D Q (on the `[2Nx, 2Ny, 1]`
/// lattice of `slice`) on the plane of displacement 0 along z, 0 elsewhere
/// on the `[2Nx, 2Ny, 2 planes]` lattice. Its Toeplitz product is then each
/// plane's 2-D product side by side: no plane reaches another.
pub fn batched_q<T: Copy + Default>(slice: &Grid, planes: usize, q: &[T]) -> Result<Vec<T>> {
    let [dx, dy, dz] = slice.doubled();
    if dz != 1 {
        return Err(Error::Invalid {
            what: "batched Q",
            reason: format!("the problems must be 2-D, got matrix {:?}", slice.n),
        });
    }
    Error::check_len("the slice's Q (2Nx x 2Ny)", dx * dy, q.len())?;
    let mut out = vec![T::default(); dx * dy * 2 * planes];
    // displacement 0 along z: index `planes` (Grid::lag_zero)
    out[planes * dx * dy..(planes + 1) * dx * dy].copy_from_slice(q);
    Ok(out)
}

/// Plane `j` of an `[Nz, Ny, Nx]` volume (x fastest).
pub fn plane<'v, T: Copy>(grid: &Grid, volume: &'v [T], j: usize) -> &'v [T] {
    let len = grid.n[0] * grid.n[1];
    &volume[j * len..(j + 1) * len]
}
