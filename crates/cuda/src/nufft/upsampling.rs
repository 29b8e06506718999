//! The fine grid a GPU plan takes: twice the modes, or 1.5 times where a
//! line FFT has the length (smaller grids to zero and transform, for a
//! kernel one cell wider), and the bins that suit each.

use super::shared;
use recon_core::Result;
use recon_nufft::Layout;

/// The fine grid a GPU plan takes (`recon_nufft::Upsampling`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Upsampling {
    /// 1.5 times the modes at tolerances 1e-5 to 1e-3 (AUTO_RANGE), twice
    /// elsewhere. On an H200, 10^7 random points on 256^3
    /// (bench/h200-2026-11-28-upsampling): type 1 16 to 17% faster, type
    /// 2 19 to 22% faster at 1e-4 and 1e-3 but 16% slower at 1e-5, and a
    /// fine grid of 27/64 the memory.
    Auto,
    /// Twice the modes along each axis.
    Two,
    /// 1.5 times the modes where a line FFT has such a length (lines.rs),
    /// else twice; the kernel one cell wider. Below 1e-5 its kernel is
    /// wider than the GPU's 8 cells, and a plan fails.
    ThreeHalves,
}

/// The tolerances at which [`Upsampling::Auto`] takes 1.5: those measured
/// faster there. Its lower end is the fixed-point spreading's: the grid of
/// 1.5 pays for its wider kernel only by integer atomics (spreading width
/// 8 in float, type 1 at 1e-5 took 6.4 ms on 256^3 against 3.3 in fixed
/// point, bench/h200-2026-11-28-upsampling), and below 1e-5 the kernel would
/// be wider than the GPU's 8 cells anyway; above 1e-3 nothing was measured, and the gridding baseline's
/// density compensation (1e-2, recon-gridding's DCF_TOLERANCE) keeps the
/// grid its kernel was chosen for, four cells of a grid twice the image's.
pub(crate) const AUTO_RANGE: std::ops::RangeInclusive<f64> = shared::FIXED_TOLERANCE..=1e-3;

/// The layout of a GPU plan for `modes` at tolerance `tol` and `sign`,
/// in float32, on the fine grid `how` picks.
pub(crate) fn layout(modes: [usize; 3], tol: f64, sign: i32, how: Upsampling) -> Result<Layout> {
    let three_halves = match how {
        Upsampling::Auto => AUTO_RANGE.contains(&tol),
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

#[cfg(test)]
mod tests {
    use super::{layout, Upsampling};

    /// Auto's grid: 1.5 times the modes at 1e-5 to 1e-3 where a line FFT
    /// has the length (384 for 256, none between 72 and 96 for 48), twice
    /// at 1e-6 and at the density compensation's 1e-2; Two and
    /// ThreeHalves as asked, and ThreeHalves at 1e-6 refused by the plan
    /// (a kernel of 10 cells).
    #[test]
    fn auto_takes_the_smaller_grid_where_it_was_measured_faster() {
        let fine = |m: usize, tol: f64, how| layout([m, m, 16], tol, 1, how).unwrap().fine;
        for tol in [1e-5, 1e-4, 1e-3] {
            assert_eq!(fine(256, tol, Upsampling::Auto), [384, 384, 32], "{tol:e}");
            assert_eq!(fine(48, tol, Upsampling::Auto), [96, 96, 32], "{tol:e}");
            assert_eq!(fine(256, tol, Upsampling::Two), [512, 512, 32], "{tol:e}");
        }
        for tol in [1e-6, 1e-2] {
            assert_eq!(fine(256, tol, Upsampling::Auto), [512, 512, 32], "{tol:e}");
        }
        assert_eq!(fine(256, 1e-2, Upsampling::ThreeHalves), [384, 384, 32]);
        let wide = layout([256; 3], 1e-6, 1, Upsampling::ThreeHalves).unwrap();
        assert_eq!(wide.kernel.width, 10);
        assert_eq!(
            layout([256; 3], 1e-5, 1, Upsampling::Auto)
                .unwrap()
                .kernel
                .width,
            8
        );
    }
}
