//! The fine grid a GPU plan takes: twice the modes, or 1.5 times where a
//! line FFT has the length (smaller grids to zero and transform, for a
//! kernel one cell wider), and the bins that suit each.

use super::shared;
use recon_core::Result;
use recon_nufft::Layout;

/// The fine grid a GPU plan takes (`recon_nufft::Upsampling`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Upsampling {
    /// 1.5 times the modes at tolerances of 1e-5 and above (kernels of at
    /// most 8 cells), twice below. On an H200, 10^7 random points on 256^3
    /// (bench/h200-2026-11-28-upsampling): type 1 16% (1e-5) to 27% (1e-3)
    /// faster, type 2 17% (1e-4) to 29% faster but 16% slower at 1e-5,
    /// and a fine grid of 3/8 the memory.
    Auto,
    /// Twice the modes along each axis.
    Two,
    /// 1.5 times the modes where a line FFT has such a length (lines.rs),
    /// else twice; the kernel one cell wider. Below 1e-5 its kernel is
    /// wider than the GPU's 8 cells, and a plan fails.
    ThreeHalves,
}

/// The layout of a GPU plan for `modes` at tolerance `tol` and `sign`,
/// in float32, on the fine grid `how` picks.
pub(crate) fn layout(modes: [usize; 3], tol: f64, sign: i32, how: Upsampling) -> Result<Layout> {
    let three_halves = match how {
        Upsampling::Auto => tol >= shared::FIXED_TOLERANCE,
        Upsampling::Two => false,
        Upsampling::ThreeHalves => true,
    };
    let up = if three_halves {
        recon_nufft::Upsampling::ThreeHalves(&crate::lines::LENGTHS)
    } else {
        recon_nufft::Upsampling::Two
    };
    Layout::new(modes, tol, sign, 4, up)
}

/// Bins where [`NufftOptions::bins`] is `None`: 16 x 8 x 8 fine cells on
/// a grid twice the modes, 14 x 7 x 6 on one of 1.5 times (the fastest of
/// those tried on an H200 at 1e-5 to 1e-3, bench/h200-2026-11-28-upsampling).
pub(super) fn default_bins(layout: &Layout) -> [usize; 3] {
    if layout.sigma() < 2.0 {
        [14, 7, 6]
    } else {
        [16, 8, 8]
    }
}
