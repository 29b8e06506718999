//! How a plan uses shared memory: whether it spreads and interpolates in
//! shared-memory copies of its bins (by the bytes a block needs against
//! what the device allows) or straight in the fine grid, and the strides
//! of those copies, chosen against bank conflicts.

use super::{Interpolation, NufftOptions, Spreading, Step};
use crate::device::Device;
use crate::error::Ctx;
use cudarc::driver::CudaFunction;
use recon_core::{Error, Result};

/// The least tolerance Auto spreads in fixed point at
/// (`spread_fixed_point` in spread.cuh): its rounding, about 1e-6 of the
/// fine grid, is a tenth of it. Below, at 1e-6, it spreads in float, where
/// fixed point was also slower at width 8 on an H100
/// (bench/h100-2026-11-28-sort-tiles/).
pub(super) const FIXED_TOLERANCE: f64 = 1e-5;

/// The shared-memory spreading kernel that `Spreading::Auto` takes at
/// tolerance `tol`.
pub(crate) fn auto_step(tol: f64) -> Step {
    if tol >= FIXED_TOLERANCE {
        Step::SpreadFixedPoint
    } else {
        Step::SpreadShared
    }
}

/// The shared memory of a spreading block (`step` SpreadShared or
/// SpreadFixedPoint, spread.cuh) at width `w`, bins `bs` and subproblems
/// of `maxsub` points: the bin and its overhang, complex (the fixed-point
/// copy's rows as long as their pairs, the most where the first x is odd,
/// its planes [`fixed_plane`] cells); per point, its kernel values,
/// strength and place (`FixedPoint::point_bytes` in spread.cuh for the
/// fixed-point kernel); and where afterwards each row of the copy has
/// where it starts in the fine grid.
fn spreading_bytes(step: Step, w: usize, bs: [usize; 3], maxsub: usize) -> usize {
    let rows = (bs[1] + w) * (bs[2] + w);
    let (cells, points) = if step == Step::SpreadFixedPoint {
        // The strides of the values along y and along x and z (KS, XZ).
        let (ks, xz) = if w == 8 {
            (12, 17)
        } else {
            (w.next_multiple_of(4), 2 * w)
        };
        let per_point = 4 * ks + 16 + 4 * xz;
        let plane = fixed_plane(w, 2 * copy_pairs(bs[0] + w, true) * (bs[1] + w));
        ((bs[2] + w) * plane, per_point * maxsub + 4)
    } else {
        (
            rows * (bs[0] + w),
            4 * ((maxsub * 3 * w).next_multiple_of(2) + 4 * maxsub),
        )
    };
    8 * cells + points.max(8 * rows)
}

/// The pairs of cells a row of a bin's copy holds from the even x at or
/// below its first (`BinCopy::pairs` in spread.cuh), for a copy `sx` cells
/// wide whose first x is even or odd.
fn copy_pairs(sx: usize, odd: bool) -> usize {
    (sx + 1 + odd as usize) / 2
}

/// interpolate_shared's row pitch, in pairs of cells, for rows of
/// `pairs` pairs at width `w` (`interpolate_pitch` in interp.cuh): the
/// least of at least `pairs` that is `(w + 2) / 2`, a point's pairs a row,
/// modulo 8.
fn interp_pitch(w: usize, pairs: usize) -> usize {
    pairs + ((w + 2) / 2 + 8 - pairs % 8) % 8
}

/// spread_fixed_point's plane stride at width `w` for planes of `cells`
/// cells (`fixed_plane` in spread.cuh): the least of at least `cells`
/// that is 8 modulo 16 (4 modulo 8 up to width 4, where a group is 4
/// lanes), so that the planes a warp's atomic adds to at once, a group of
/// lanes on consecutive cells of each, fall on distinct banks.
fn fixed_plane(w: usize, cells: usize) -> usize {
    if w <= 4 {
        cells + (12 - cells % 8) % 8
    } else {
        cells + (24 - cells % 16) % 16
    }
}

/// How a plan spreads, settled when it is made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Method {
    /// The kernel (SpreadShared or SpreadFixedPoint) and its dynamic shared
    /// memory per block, in bytes.
    Shared(Step, usize),
    Global,
}

/// How a plan interpolates, settled when it is made: from shared memory,
/// with the bytes a block takes and the most the device allows a block,
/// or from the fine grid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Interp {
    Shared { bytes: usize, limit: usize },
    Global,
}

impl Device {
    /// Lets `f` launch with up to `limit` bytes of dynamic shared memory,
    /// the device's most (as [`Self::shared_limit`] reads it) rather than
    /// one plan's need: the setting is the kernel's, which every plan of
    /// its width shares, so a plan of a smaller grid must not lower it
    /// under a larger one's.
    pub(super) fn allow_shared(&self, f: &CudaFunction, limit: usize, what: &str) -> Result<()> {
        use cudarc::driver::sys::CUfunction_attribute_enum as F;
        f.set_attribute(
            F::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
            limit as i32,
        )
        .at(&format!("allow the {what} kernel its shared memory"))
    }

    /// The device's shared memory per block, opting in beyond 48 KiB.
    fn shared_limit(&self) -> Result<usize> {
        use cudarc::driver::sys::CUdevice_attribute as A;
        Ok(self
            .ctx
            .attribute(A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)
            .at("shared memory per block")? as usize)
    }

    /// Shared-memory copies of the bins where one fits in a block's shared
    /// memory, else the fine grid. The kernel is compiled only when type
    /// 2 first runs (execute.rs), so that a plan for type 1 alone does
    /// not compile it.
    pub(super) fn interpolation_method(
        &self,
        w: usize,
        bs: [usize; 3],
        how: Interpolation,
    ) -> Result<Interp> {
        // The copy's rows (bs + w along y and z) of pairs of cells from
        // the even x at or below its first (the most where that first is
        // odd), and the barrier its copies count on.
        let bytes =
            16 * (bs[1] + w) * (bs[2] + w) * interp_pitch(w, copy_pairs(bs[0] + w, true)) + 16;
        let limit = self.shared_limit()?;
        match (how, bytes <= limit) {
            (Interpolation::Global, _) | (Interpolation::Auto, false) => Ok(Interp::Global),
            (Interpolation::Shared, false) => Err(Error::Invalid {
                what: "GPU NUFFT interpolation",
                reason: format!(
                    "a copy of bins {bs:?} with width {w} needs {bytes} bytes of shared memory; the device has {limit}"
                ),
            }),
            (_, true) => Ok(Interp::Shared { bytes, limit }),
        }
    }

    /// Shared-memory subproblems where the bin and its overhang fit in a
    /// block's shared memory (opting in beyond 48 KiB), else global atomics.
    pub(super) fn spreading_method(
        &self,
        tol: f64,
        w: usize,
        bs: [usize; 3],
        options: &NufftOptions,
    ) -> Result<Method> {
        let step = match options.spreading {
            Spreading::FixedPoint => Step::SpreadFixedPoint,
            Spreading::Auto => auto_step(tol),
            Spreading::Shared | Spreading::Global => Step::SpreadShared,
        };
        let bytes = spreading_bytes(step, w, bs, options.maxsub);
        let limit = self.shared_limit()?;
        let fits = bytes <= limit;
        match (options.spreading, fits) {
            (Spreading::Global, _) | (Spreading::Auto, false) => Ok(Method::Global),
            (Spreading::Shared | Spreading::FixedPoint, false) => Err(Error::Invalid {
                what: "GPU NUFFT spreading",
                reason: format!(
                    "a subproblem of bins {bs:?} with width {w} needs {bytes} bytes of shared memory; the device has {limit}"
                ),
            }),
            (_, true) => {
                self.allow_shared(&self.nufft_kernel(step, w)?, limit, "spreading")?;
                Ok(Method::Shared(step, bytes))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{copy_pairs, fixed_plane, interp_pitch};
    use crate::nufft::WIDTHS;

    /// interpolate_shared's row pitch: at least the row's pairs, less than
    /// 8 more, and such that each 8 lanes of a point's group in a row
    /// (lane l reading pair l % P of row l / P, P = (w + 2) / 2 pairs a
    /// row, H = G / P rows) read 8 distinct 16-byte bank groups.
    #[test]
    fn interpolation_pitches_put_a_points_lanes_on_distinct_banks() {
        for w in WIDTHS {
            let p = (w + 2) / 2;
            let g = if p <= 2 {
                4
            } else if p <= 4 {
                8
            } else {
                16
            };
            for pairs in p..64 {
                let pitch = interp_pitch(w, pairs);
                assert!(
                    (pairs..pairs + 8).contains(&pitch),
                    "w {w} pairs {pairs}: {pitch}"
                );
                let group: Vec<usize> = (0..(g / p) * p)
                    .map(|l| (l / p * pitch + l % p) % 8)
                    .collect();
                for lanes in group.chunks(8) {
                    let mut seen = [false; 8];
                    for &b in lanes {
                        assert!(!seen[b], "w {w} pairs {pairs} pitch {pitch}: {group:?}");
                        seen[b] = true;
                    }
                }
            }
        }
    }

    /// The fixed-point copy's planes: at least their rows, less than 16
    /// cells more, and such that the lanes of one atomic (groups of G = 8,
    /// or 4 up to width 4, on the planes q of 32 / G, the first min(w, G)
    /// lanes of a group on consecutive cells) fall on distinct banks, for
    /// planes of any number of cells. With the default bins at width 7:
    /// rows of 24 cells, planes of 15 rows, 360 cells as they are.
    #[test]
    fn fixed_point_planes_put_an_atomics_lanes_on_distinct_banks() {
        for w in WIDTHS {
            let g = if w <= 4 { 4 } else { 8 };
            for cells in (2..2000).step_by(2) {
                let plane = fixed_plane(w, cells);
                assert!(
                    (cells..cells + 16).contains(&plane),
                    "w {w} cells {cells}: {plane}"
                );
                for base in 0..32 {
                    let mut banks = [false; 32];
                    for q in 0..(32 / g).min(w) {
                        for x in 0..w.min(g) {
                            let b = (base + q * plane + x) % 32;
                            assert!(!banks[b], "w {w} cells {cells}: plane {plane}");
                            banks[b] = true;
                        }
                    }
                }
            }
        }
        // Rows of 12 pairs whatever the first x's parity, planes of 15 rows.
        for odd in [false, true] {
            assert_eq!(2 * copy_pairs(16 + 7, odd), 24);
        }
        assert_eq!(fixed_plane(7, 24 * (8 + 7)), 360);
    }
}
