//! Coil processing on the host: noise prewhitening, coil compression,
//! sensitivity maps estimated from the data, the root sum of squares, and
//! how well two sets of maps agree.
//!
//! Prewhitening and compression are both a [`Mix`]: a K x C matrix applied
//! to every sample's coil vector (and to maps given with the data), so they
//! compose, and the rest of the pipeline only ever sees coils whose noise
//! is white and equal.
//!
//! Users rarely have calibration scans for non-Cartesian data, so the maps
//! come from the scan itself: low-resolution coil images (the k-space
//! centre, gridded) go through Inati's iteration (Inati, Hansen and Kellman
//! 2014), a power iteration on the coils' locally smoothed covariance that
//! never forms the C x C matrix per voxel:
//!
//! ```text
//! rho = sum_c conj(u_c) I_c            u: the coils' dominant direction
//! repeat: A_c = smooth(I_c conj(rho)); S_c = A_c / ||A||; rho = sum_c conj(S_c) I_c
//! ```
//!
//! The images hold no detail finer than the calibration radius, so on
//! large grids the iteration runs on cells of several voxels
//! ([`MapParams::cell`], [`cell_for`]), and only its last numerators come
//! back to the voxels, to be divided there.
//!
//! Key decision: maps have unit norm over the coils where the object is,
//! and fade to 0 where it is not (`||A||` below a floor of its peak), so
//! regions without signal never divide noise by noise. With unit-norm maps
//! the SENSE operator's diagonal is still Q(0) inside the object, so lambda
//! keeps its meaning.
//!
//! Images are `[C][N]`: one vector per coil, x fastest; k-space data are
//! `[C, M]`, coil after coil. Everything is f64. The C x C algebra is
//! nalgebra's (pure Rust: the binary links no BLAS).

mod cells;
mod compress;
mod espirit;
mod maps;
mod noise;

pub use compress::{compression, Keep};
pub use espirit::{calibration, espirit_maps, EspiritParams, MAX_COLUMNS as ESPIRIT_MAX_COLUMNS};
pub use maps::{agreement, cell_means, estimate_maps, estimate_maps_from_cells};
pub use noise::{
    check_noise_samples, condition, covariance, whitening, GOOD_NOISE_PER_COIL, MAX_CONDITION,
    MIN_NOISE_PER_COIL,
};

use rayon::prelude::*;
use recon_core::{Complex, Error, Result};

type C64 = Complex<f64>;

/// A K x C matrix mixing C coils into K (virtual) coils: `out_k = sum_c
/// m[k][c] in_c` for every sample or voxel.
#[derive(Debug, Clone, PartialEq)]
pub struct Mix {
    /// K
    pub rows: usize,
    /// C
    pub cols: usize,
    /// Row-major.
    pub m: Vec<C64>,
}

impl Mix {
    /// `self` after `first`: `self . first`.
    pub fn after(&self, first: &Mix) -> Result<Mix> {
        Error::check_len("coil mix", self.cols, first.rows)?;
        let mut m = vec![C64::default(); self.rows * first.cols];
        for r in 0..self.rows {
            for c in 0..first.cols {
                m[r * first.cols + c] = (0..self.cols)
                    .map(|j| self.m[r * self.cols + j] * first.m[j * first.cols + c])
                    .sum();
            }
        }
        Ok(Mix {
            rows: self.rows,
            cols: first.cols,
            m,
        })
    }

    /// Mixes `[C, M]` data (coil after coil) into `[K, M]`.
    pub fn data(&self, data: &[C64]) -> Result<Vec<C64>> {
        if self.cols == 0 || !data.len().is_multiple_of(self.cols) {
            return Err(Error::Invalid {
                what: "coil mix",
                reason: format!(
                    "{} values are not {} coils of samples",
                    data.len(),
                    self.cols
                ),
            });
        }
        let m = data.len() / self.cols;
        let mut out = vec![C64::default(); self.rows * m];
        out.par_chunks_mut(m).enumerate().for_each(|(r, o)| {
            for c in 0..self.cols {
                let w = self.m[r * self.cols + c];
                if w != C64::default() {
                    for (o, d) in o.iter_mut().zip(&data[c * m..][..m]) {
                        *o += w * d;
                    }
                }
            }
        });
        Ok(out)
    }

    /// Mixes maps (or images), one per coil.
    pub fn maps(&self, maps: &[Vec<C64>]) -> Result<Vec<Vec<C64>>> {
        Error::check_len("coil maps (one per coil)", self.cols, maps.len())?;
        let flat: Vec<C64> = maps.concat();
        let n = maps.first().map_or(0, |m| m.len());
        Ok(self
            .data(&flat)?
            .chunks_exact(n.max(1))
            .map(|c| c.to_vec())
            .collect())
    }
}

/// Settings of [`estimate_maps`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MapParams {
    /// Width of the box that smooths `I_c conj(rho)`, in voxels (odd).
    pub smoothing: usize,
    /// Inati iterations.
    pub iterations: usize,
    /// Signal amplitude, as a fraction of its peak, below which the maps
    /// fade to 0.
    pub floor: f64,
    /// Voxels per axis of the cells the iteration runs on (1: every
    /// voxel). The coil images are of low resolution, so their averages
    /// over small cells lose nothing the maps need, and the iteration's
    /// cost falls with the cell's volume. The box is then `smoothing /
    /// cell` cells wide (odd, at least 1), and the last numerators `A_c`
    /// are interpolated back to the voxels before the division, so the
    /// maps keep unit norm wherever there is signal: `A_c` is close to
    /// `S_c` times a weight common to all coils, and the division removes
    /// that weight. [`cell_for`] picks the cell for a calibration radius.
    pub cell: usize,
}

/// The largest cell (voxels per axis) that still samples coil images of
/// calibration radius `kc` cycles/FOV at 3 cells per cycle on every axis
/// of the grid `n`: the images hold no detail the cells would lose.
pub fn cell_for(n: [usize; 3], kc: f64) -> usize {
    let n_min = *n.iter().min().expect("three axes") as f64;
    if kc.is_finite() && kc > 0.0 {
        ((n_min / (3.0 * kc)).floor() as usize).max(1)
    } else {
        1
    }
}

impl Default for MapParams {
    fn default() -> Self {
        MapParams {
            smoothing: 5,
            iterations: 5,
            floor: 0.05,
            cell: 1,
        }
    }
}

/// Checks that every image has `n` voxels, and that there is at least one.
fn check(what: &'static str, images: &[Vec<C64>], n: usize) -> Result<()> {
    if images.is_empty() {
        return Err(Error::Invalid {
            what,
            reason: "no coils".into(),
        });
    }
    for im in images {
        Error::check_len(what, n, im.len())?;
    }
    Ok(())
}

/// Maps divided by their root sum of squares: unit norm over the coils at
/// every voxel where they are not all 0.
pub fn unit_norm(maps: &[Vec<C64>]) -> Vec<Vec<C64>> {
    let r = rss(maps);
    maps.iter()
        .map(|m| m.iter().zip(&r).map(|(s, r)| s / r.max(1e-30)).collect())
        .collect()
}

/// `sqrt(sum_c |I_c|^2)` per voxel.
pub fn rss(images: &[Vec<C64>]) -> Vec<f64> {
    let n = images.first().map_or(0, |i| i.len());
    (0..n)
        .into_par_iter()
        .map(|i| images.iter().map(|im| im[i].norm_sqr()).sum::<f64>().sqrt())
        .collect()
}
