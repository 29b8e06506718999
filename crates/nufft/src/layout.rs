//! What a mode shape, tolerance, sign and upsampling decide on every
//! device: the kernel, the fine grid and the deconvolution factors.

use crate::Kernel;
use recon_core::{Error, Result};

/// How much finer than the modes a fine grid is: its upsampling factor
/// sigma. A smaller grid (sigma 1.5 has 27/64 of sigma 2's cells in 3-D)
/// costs less to zero and transform but needs a wider kernel (one cell
/// more at 1e-5 to 1e-3), so which is faster depends on the device and
/// the points; each device's plan picks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Upsampling<'a> {
    /// Twice the modes along each axis (FINUFFT's default).
    Two,
    /// Along each axis the least of `lengths` (the FFT lengths the device
    /// transforms fast) of at least 1.5 and below 2 times the modes; twice
    /// the modes where none is. The kernel is chosen for the least ratio
    /// over the axes ([`Kernel::for_upsampling`]).
    ThreeHalves(&'a [usize]),
}

/// What a mode shape, tolerance, sign and upsampling decide, on every
/// device: the kernel, the fine grid, and the deconvolution factors. The
/// CPU [`crate::Plan`] and the GPU's plan (recon-cuda) are both made from
/// it.
#[derive(Debug, Clone)]
pub struct Layout {
    /// Modes per axis, x y z.
    pub modes: [usize; 3],
    /// The upsampled grid per axis (even, at least 1.5 times the modes and
    /// twice the kernel's width), or one plane along z where there is one
    /// mode.
    pub fine: [usize; 3],
    pub kernel: Kernel,
    /// +1 or -1: the sign of the exponent.
    pub sign: i32,
    /// The tolerance asked for.
    pub tolerance: f64,
    /// `1 / K^(k / fine)` per axis, for modes `-M/2 .. M/2` in order (1
    /// along a flat z).
    pub correction: [Vec<f64>; 3],
}

impl Layout {
    /// For `modes` (each at least 1) at tolerance `tol`, in a precision of
    /// `real_bytes` (float32 cannot reach below 1e-6), on a fine grid of
    /// `upsampling`.
    pub fn new(
        modes: [usize; 3],
        tol: f64,
        sign: i32,
        real_bytes: usize,
        upsampling: Upsampling,
    ) -> Result<Layout> {
        if modes.contains(&0) {
            return Err(Error::Invalid {
                what: "NUFFT modes",
                reason: format!("every axis needs at least one mode, got {modes:?}"),
            });
        }
        if sign != 1 && sign != -1 {
            return Err(Error::Invalid {
                what: "NUFFT sign",
                reason: format!("must be +1 or -1, got {sign}"),
            });
        }
        if real_bytes == 4 && tol < 1e-6 {
            return Err(Error::Invalid {
                what: "NUFFT tolerance",
                reason: format!("{tol:e} is below what float32 reaches (1e-6)"),
            });
        }
        let (target, sigma) = match upsampling {
            Upsampling::Two => (modes.map(|m| 2 * m), 2.0),
            Upsampling::ThreeHalves(lengths) => (
                modes.map(|m| {
                    let fits = |l: &usize| 2 * l >= 3 * m && *l < 2 * m;
                    lengths.iter().copied().filter(fits).min().unwrap_or(2 * m)
                }),
                1.5,
            ),
        };
        // The kernel for the upsampling asked for, then (where the grid
        // came out finer: a length above 1.5 times the modes, or twice the
        // kernel's width on a small grid) for the least ratio there is.
        let wide = Kernel::for_upsampling(tol, sigma)?;
        let mut fine = [0, 1, 2].map(|d| target[d].max(2 * wide.width).next_multiple_of(2));
        if modes[2] == 1 {
            // One mode along z (a 2-D grid): exp(i 0 z) = 1 whatever z, so
            // the fine grid has one plane and the kernel nothing along z.
            fine[2] = 1;
        }
        let kernel = Kernel::for_upsampling(tol, least_ratio(modes, fine).clamp(sigma, 2.0))?;
        let correction = [0, 1, 2].map(|d| {
            if fine[d] == 1 {
                return vec![1.0];
            }
            let (m, n) = (modes[d] as i64, fine[d] as f64);
            let xis: Vec<f64> = (-m / 2..m - m / 2).map(|k| k as f64 / n).collect();
            kernel
                .transform(&xis)
                .into_iter()
                .map(|v| 1.0 / v)
                .collect()
        });
        Ok(Layout {
            modes,
            fine,
            kernel,
            sign,
            tolerance: tol,
            correction,
        })
    }

    /// The upsampling: the least ratio of fine cells to modes over the
    /// axes (a flat z left out).
    pub fn sigma(&self) -> f64 {
        least_ratio(self.modes, self.fine)
    }
}

/// The least ratio of `fine` cells to `modes` over the axes, a flat z
/// (one fine plane) left out.
fn least_ratio(modes: [usize; 3], fine: [usize; 3]) -> f64 {
    (0..3)
        .filter(|&d| fine[d] > 1)
        .map(|d| fine[d] as f64 / modes[d] as f64)
        .fold(f64::INFINITY, f64::min)
}
