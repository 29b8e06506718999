//! The NUFFT on the first GPU, in float32 (kernels in nufft.cu and
//! spread.cuh): a plan takes its kernel, fine grid and corrections from
//! recon-nufft's [`Layout`], so that CPU and GPU plans agree by
//! construction, and sorts its points into bins on the device once
//! (count, scan, place), a tile of bins at a time. Type 1 spreads into
//! shared-memory subproblems of at most [`NufftOptions::maxsub`] points
//! per block (in fixed point at widths up to 7, in float at 8), or
//! straight into the fine grid where a subproblem would not fit in shared
//! memory; type 2 interpolates from a shared-memory copy of each
//! subproblem's bin (brought in by bulk copies), a group of lanes per
//! sorted point reading two rows of its footprint at once, or where the
//! copy would not fit, from the fine grid itself. cuFFT transforms the
//! fine grid in place where the line FFTs have no kernels for its sizes.
//!
//! Spreading adds by atomics, so the order of float additions, and with it
//! the last bits of a result, may differ from run to run (not in fixed
//! point, whose sums are exact, until the copies meet in the fine grid).
//!
//! This file makes plans; execute.rs runs them, coils.rs batches type 1
//! over coils, and kernels.rs holds nufft.cu's kernels.

use crate::device::Device;
use crate::error::{err, Ctx};
use crate::lines::{self, LineKernel, Lines, Map, Pass};
use cudarc::driver::{CudaFunction, CudaSlice, DeviceRepr, LaunchConfig, PushKernelArg};
use recon_core::{Error, Result};
use recon_nufft::Layout;
use std::sync::atomic::AtomicBool;
use std::sync::Mutex;

mod coils;
mod execute;
mod kernels;

#[cfg(test)]
pub(crate) use kernels::FIXED;
pub(crate) use kernels::{Correction, Kernels, Step};

/// Widths the kernels are compiled for: float32 tolerances 1e-1 to 1e-6
/// need 3 to 8 cells.
pub(crate) const WIDTHS: std::ops::RangeInclusive<usize> = 2..=8;

/// The widest kernel Auto spreads in fixed point (`spread_fixed_point` in
/// spread.cuh): its rounding, about 1e-6 of the fine grid, is a tenth of
/// the tolerance 1e-5 a width of 7 serves; width 8 (1e-6) spreads in
/// float, where fixed point is also slower
/// (bench/h100-2026-11-28-sort-tiles/).
const FIXED_WIDEST: usize = 7;

/// The shared-memory spreading kernel that `Spreading::Auto` takes at width `w`.
pub(crate) fn auto_step(w: usize) -> Step {
    if w <= FIXED_WIDEST {
        Step::SpreadFixedPoint
    } else {
        Step::SpreadShared
    }
}

/// The shared memory of a spreading block (`step` SpreadShared or
/// SpreadFixedPoint, spread.cuh) at width `w`, bins `bs` and subproblems
/// of `maxsub` points: the bin and its overhang, complex (the fixed-point
/// copy's rows `pitch` cells long, Geometry's `fp`); per point, its kernel
/// values, strength and place (the fixed-point kernel's values along y in
/// whole 16-byte words); and where afterwards each row of the copy has
/// where it starts in the fine grid.
fn spreading_bytes(
    step: Step,
    w: usize,
    bs: [usize; 3],
    pitch: [usize; 2],
    maxsub: usize,
) -> usize {
    let rows = (bs[1] + w) * (bs[2] + w);
    let (cells, points) = if step == Step::SpreadFixedPoint {
        let per_point = 4 * w.next_multiple_of(4) + 16 + 8 * w;
        (rows * pitch[0].max(pitch[1]), per_point * maxsub + 4)
    } else {
        (
            rows * (bs[0] + w),
            4 * ((maxsub * 3 * w).next_multiple_of(2) + 4 * maxsub),
        )
    };
    8 * cells + points.max(8 * rows)
}

/// Threads per spreading block (one subproblem each): `SPREAD_THREADS` in spread.cuh.
const SPREAD_THREADS: u32 = 256;

/// How type 1 spreads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Spreading {
    /// Shared-memory subproblems where they fit (in fixed point at widths
    /// up to 7, tolerances 1e-5 and above), else straight into the grid.
    Auto,
    /// Shared-memory subproblems; a plan whose subproblem does not fit fails.
    Shared,
    /// Shared-memory subproblems added in fixed point by integer atomics
    /// (`spread_fixed_point` in spread.cuh): each contribution rounded to
    /// about 2^-22 of the subproblem's largest strength (its unit grows
    /// past 476 points a subproblem, so that no sum overflows). A plan
    /// whose subproblem does not fit fails.
    FixedPoint,
    /// Straight into the fine grid, by global atomics.
    Global,
}

/// Threads per block of the shared-memory interpolation: `INTERP_THREADS`
/// in interp.cuh.
const INTERP_THREADS: u32 = 256;

/// How type 2 interpolates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Interpolation {
    /// From shared-memory copies of the bins where they fit, else from
    /// the fine grid.
    Auto,
    /// From shared-memory copies of the bins, a block per subproblem
    /// (`interpolate_shared` in interp.cuh); a plan whose copy does not fit
    /// fails.
    Shared,
    /// From the fine grid in global memory, a group of lanes per point.
    Global,
}

/// Settings of the GPU NUFFT.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NufftOptions {
    pub spreading: Spreading,
    pub interpolation: Interpolation,
    /// Bin edge in fine cells per axis (each clipped to the fine grid).
    pub bins: [usize; 3],
    /// Most points per shared-memory subproblem (each takes 3 w + 4
    /// floats of shared memory).
    pub maxsub: usize,
    /// Bins per tile of the sort order per axis (each clipped to the bins
    /// there are): points are sorted, spread and interpolated a tile of
    /// bins at a time, so that those in flight together touch a compact
    /// block of the fine grid (`bin_key` in nufft.cu).
    pub tiles: [usize; 3],
}

impl Default for NufftOptions {
    fn default() -> Self {
        NufftOptions {
            spreading: Spreading::Auto,
            interpolation: Interpolation::Auto,
            bins: [16, 8, 8],
            maxsub: 128,
            tiles: [4, 8, 8],
        }
    }
}

/// The fine grid and bins; `Geometry` in nufft.cu.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Geometry {
    n: [i32; 3],
    bs: [i32; 3],
    nb: [i32; 3],
    bt: [i32; 3],
    /// spread_fixed_point's row pitch in cells, for a bin's copy whose
    /// first x is even and odd ([`fixed_pitch`]).
    fp: [i32; 2],
}

// SAFETY: a plain #[repr(C)] struct of i32, laid out as in nufft.cu.
unsafe impl DeviceRepr for Geometry {}

// The layout nufft.cu's `Geometry` has, whose size it checks (NVRTC has no
// offsetof, so the offsets are checked here only).
const _: () = assert!(
    std::mem::size_of::<Geometry>() == 56
        && std::mem::offset_of!(Geometry, bs) == 12
        && std::mem::offset_of!(Geometry, nb) == 24
        && std::mem::offset_of!(Geometry, bt) == 36
        && std::mem::offset_of!(Geometry, fp) == 48
);

/// The pairs of cells a row of a bin's copy holds from the even x at or
/// below its first (`BinCopy::pairs` in spread.cuh), for a copy `sx` cells
/// wide whose first x is even or odd.
fn copy_pairs(sx: usize, odd: bool) -> usize {
    (sx + 1 + odd as usize) / 2
}

/// spread_fixed_point's row pitch, in cells, for rows of `pairs` pairs and
/// planes of `sy` rows at width `w`: of the even pitches from 2 pairs to
/// 30 cells more, the least that puts the lanes of one of its atomics on
/// the fewest lanes a bank. An atomic's lanes are groups of G (4 up to
/// width 4, else 8), each on one plane of a point's footprint (so a plane
/// pitch apart), the first min(w, G) of a group on consecutive cells.
/// Default bins: 24 at width 7, as the rows need (planes 8 banks apart);
/// 24 at width 5, where 22 would put three lanes on a bank.
fn fixed_pitch(w: usize, pairs: usize, sy: usize) -> usize {
    let g = if w <= 4 { 4 } else { 8 };
    (0..16)
        .map(|k| 2 * (pairs + k))
        .min_by_key(|&pitch| {
            let mut banks = [0u32; 32];
            for q in 0..(32 / g).min(w) {
                for x in 0..w.min(g) {
                    banks[(q * pitch * sy + x) % 32] += 1;
                }
            }
            banks.into_iter().max()
        })
        .expect("16 pitches")
}

/// How a plan spreads, settled when it is made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Method {
    /// The kernel (SpreadShared or SpreadFixedPoint) and its dynamic shared
    /// memory per block, in bytes.
    Shared(Step, usize),
    Global,
}

/// How a plan interpolates, settled when it is made: from shared memory,
/// with the bytes a block takes and the most the device allows a block,
/// or from the fine grid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Interp {
    Shared { bytes: usize, limit: usize },
    Global,
}

/// A GPU NUFFT plan with its points set.
pub struct CudaNufft {
    layout: Layout,
    geometry: Geometry,
    method: Method,
    interp: Interp,
    /// Whether the shared interpolation kernel has been allowed its shared
    /// memory (on the plan's first type 2, which first loads it).
    interp_allowed: AtomicBool,
    maxsub: usize,
    points: usize,
    /// Sorted points: footprint's first cell and offset per axis, and the
    /// caller's index.
    first: CudaSlice<i32>,
    frac: CudaSlice<f32>,
    perm: CudaSlice<u32>,
    /// Subproblem s: its bin's coordinates and its point count (an `int4`
    /// in nufft.cu), and its first sorted point.
    sub: CudaSlice<i32>,
    sub_first: CudaSlice<i32>,
    subproblems: usize,
    correction: [CudaSlice<f32>; 3],
    /// The fine grid, complex.
    fine: Mutex<CudaSlice<f32>>,
    /// The FFT of the fine grid.
    fft: Fft,
    /// Type 1 over coils: pinned buffers for their values (coils.rs).
    staging: Mutex<Option<coils::Staging>>,
}

/// How a plan transforms its fine grid.
enum Fft {
    /// Our line kernels (lines.rs), where every fine size has one: type 1
    /// transforms x over every row, y only where x is a mode, z only where
    /// x and y are, each keeping only the modes (centred) and multiplying
    /// by that axis's correction; the last pass writes the output. Type 2
    /// runs the same in reverse. No pass of its own for the deconvolution,
    /// and under half the traffic of a full 3-D transform.
    Lines(Box<LinePasses>),
    /// cuFFT on the whole fine grid, then the deconvolution (or before it,
    /// the amplification) as a kernel of its own. The plan's work area
    /// goes with the plan (Q's, on a grid 64 times the image, is freed
    /// after Q).
    Cufft(cudarc::cufft::CudaFft),
}

/// The line FFTs' passes along x (every row), y and z, and z's with a
/// coil map (type 1 summed through SENSE's maps).
struct LinePasses {
    x: Pass,
    y: Pass,
    z: Pass,
    z_coil: Pass,
}

impl CudaNufft {
    /// Whether the fine grid's FFT runs on recon's line kernels (else on
    /// cuFFT, for fine sizes without them).
    pub fn line_fft(&self) -> bool {
        matches!(self.fft, Fft::Lines(_))
    }

    fn modes_len(&self) -> usize {
        self.layout.modes.iter().product()
    }

    /// A block of `threads` per subproblem, with `bytes` of shared memory.
    fn per_subproblem(&self, threads: u32, bytes: usize) -> LaunchConfig {
        LaunchConfig {
            grid_dim: (self.subproblems as u32, 1, 1),
            block_dim: (threads, 1, 1),
            shared_mem_bytes: bytes as u32,
        }
    }

    /// The sorted points' arguments every spreading and interpolation
    /// kernel takes after its output and input: first cells, offsets, order.
    fn point_args<'a>(&'a self, b: &mut cudarc::driver::LaunchArgs<'a>) {
        b.arg(&self.first).arg(&self.frac).arg(&self.perm);
    }

    fn fine_len(&self) -> usize {
        self.layout.fine.iter().product()
    }

    /// Per axis, for the line FFTs: where its lines lie in the fine grid
    /// (all of their points) and where its modes go (centred). x: every
    /// row; y: the lines whose x is a mode; z: those whose x and y are,
    /// their modes into the output (m0 m1 apart).
    fn axes(&self) -> [Axis; 3] {
        let [n0, n1, n2] = self.layout.fine;
        let [m0, m1, m2] = self.layout.modes;
        let plane = n0 * n1;
        [
            Axis {
                grid: Map::rows(n0, n0),
                modes: Map::rows(n0, m0).centred(),
            },
            Axis {
                grid: Map::new(m0, plane, 1, n0, n1),
                modes: Map::new(m0, plane, 1, n0, m1).centred(),
            },
            Axis {
                grid: Map::new(m0, n0, 1, plane, n2),
                modes: Map::new(0, 0, 1, m0 * m1, m2).centred(),
            },
        ]
    }
}

/// One axis of the line FFTs: the lines in the fine grid, and the modes.
struct Axis {
    grid: Map,
    modes: Map,
}

impl Device {
    /// Makes a plan and sorts its points into bins on this device.
    pub(crate) fn nufft_plan(
        &self,
        layout: Layout,
        points: &[[f64; 3]],
        options: &NufftOptions,
    ) -> Result<CudaNufft> {
        let w = layout.kernel.width;
        if !WIDTHS.contains(&w) {
            return Err(Error::Invalid {
                what: "GPU NUFFT tolerance",
                reason: format!(
                    "needs a kernel of {w} cells; the GPU's kernels cover {} to {} (float32, tolerance 1e-6 or more)",
                    WIDTHS.start(),
                    WIDTHS.end()
                ),
            });
        }
        recon_nufft::check_points(points, i32::MAX as usize)?;
        if options.maxsub == 0 || options.bins.contains(&0) || options.tiles.contains(&0) {
            return Err(Error::Invalid {
                what: "GPU NUFFT options",
                reason: format!(
                    "bins {:?}, tiles {:?} and maxsub {} must be positive",
                    options.bins, options.tiles, options.maxsub
                ),
            });
        }
        let n = layout.fine;
        let bs = [0, 1, 2].map(|d| options.bins[d].min(n[d]));
        let nb = [0, 1, 2].map(|d| n[d].div_ceil(bs[d]));
        let geometry = Geometry {
            n: n.map(|v| v as i32),
            bs: bs.map(|v| v as i32),
            nb: nb.map(|v| v as i32),
            bt: [0, 1, 2].map(|d| options.tiles[d].min(nb[d]) as i32),
            fp: [false, true]
                .map(|odd| fixed_pitch(w, copy_pairs(bs[0] + w, odd), bs[1] + w) as i32),
        };
        let bins: usize = nb.iter().product();
        if bins > i32::MAX as usize / 2 {
            return Err(Error::Invalid {
                what: "GPU NUFFT bins",
                reason: format!("{bins} bins of {bs:?} cells are too many"),
            });
        }
        let method = self.spreading_method(w, bs, geometry.fp.map(|p| p as usize), options)?;
        let interp = self.interpolation_method(w, bs, options.interpolation)?;
        let m = points.len();
        let big = |len: usize| len.max(1);

        // Sort: count per bin, scan, place.
        let kernels = self.nufft()?;
        let flat: Vec<f64> = points.iter().flatten().copied().collect();
        let x = self.upload(if flat.is_empty() { &[0.0] } else { &flat[..] })?;
        let mut bin = self.zeros::<i32>(big(m))?;
        let mut rank = self.zeros::<i32>(big(m))?;
        let mut count = self.zeros::<i32>(bins)?;
        let ml = m as i64;
        if m > 0 {
            let mut b = self.stream.launch_builder(&kernels.count);
            b.arg(&mut bin)
                .arg(&mut rank)
                .arg(&mut count)
                .arg(&x)
                .arg(&ml)
                .arg(&geometry);
            unsafe { b.launch(self.cfg(m)) }.at("launch nufft_count")?;
        }
        let mut bin_start = self.zeros::<i32>(bins + 1)?;
        let mut sub_start = self.zeros::<i32>(bins + 1)?;
        let one = LaunchConfig {
            grid_dim: (1, 1, 1),
            block_dim: (1024, 1, 1),
            shared_mem_bytes: 0,
        };
        let (nbins, maxsub) = (bins as i32, options.maxsub.min(i32::MAX as usize) as i32);
        for (out, div) in [(&mut bin_start, 0i32), (&mut sub_start, maxsub)] {
            let mut b = self.stream.launch_builder(&kernels.scan);
            b.arg(out).arg(&count).arg(&nbins).arg(&div);
            unsafe { b.launch(one) }.at("launch nufft_scan")?;
        }
        let mut first = self.zeros::<i32>(big(3 * m))?;
        let mut frac = self.zeros::<f32>(big(3 * m))?;
        let mut perm = self.zeros::<u32>(big(m))?;
        let wi = w as i32;
        if m > 0 {
            let mut b = self.stream.launch_builder(&kernels.place);
            b.arg(&mut first)
                .arg(&mut frac)
                .arg(&mut perm)
                .arg(&x)
                .arg(&bin)
                .arg(&rank)
                .arg(&bin_start)
                .arg(&ml)
                .arg(&wi)
                .arg(&geometry);
            unsafe { b.launch(self.cfg(m)) }.at("launch nufft_place")?;
        }
        let mut ends = [0i32; 2];
        self.stream
            .memcpy_dtoh(&bin_start.slice(bins..bins + 1), &mut ends[..1])
            .at("read the sorted point count")?;
        self.stream
            .memcpy_dtoh(&sub_start.slice(bins..bins + 1), &mut ends[1..])
            .at("read the subproblem count")?;
        self.stream.synchronize().at("synchronize after sorting")?;
        if ends[0] as usize != m {
            return Err(err(
                "sort NUFFT points",
                format!("{} points sorted of {m}", ends[0]),
            ));
        }
        let subproblems = ends[1] as usize;
        let mut sub = self.zeros::<i32>(4 * big(subproblems))?;
        let mut sub_first = self.zeros::<i32>(big(subproblems))?;
        if subproblems > 0 {
            let mut b = self.stream.launch_builder(&kernels.subproblems);
            b.arg(&mut sub)
                .arg(&mut sub_first)
                .arg(&count)
                .arg(&bin_start)
                .arg(&sub_start)
                .arg(&nbins)
                .arg(&maxsub)
                .arg(&geometry);
            unsafe { b.launch(self.cfg(bins)) }.at("launch nufft_subproblems")?;
        }
        // A flat z (one fine plane): every point sits at offset 0 there, so
        // the W-wide footprint along z lands in the one plane with the
        // constant weight S = sum_j K(j - W/2) (kernel_values in nufft.cu
        // computes the same values in float32); dividing the z correction by S
        // makes both types exact, at W times the z work of a 2-D spreader.
        let flat = if layout.fine[2] == 1 {
            let w = layout.kernel.width;
            let s: f64 = (0..w)
                .map(|j| layout.kernel.at(j as f64 - w as f64 / 2.0))
                .sum();
            1.0 / s
        } else {
            1.0
        };
        let correction = [0, 1, 2].map(|d| {
            let scale = if d == 2 { flat } else { 1.0 };
            let c: Vec<f32> = layout.correction[d]
                .iter()
                .map(|&v| (v * scale) as f32)
                .collect();
            self.upload(&c)
        });
        let [cx, cy, cz] = correction;
        let fine = self.zeros::<f32>(2 * n.iter().product::<usize>())?;
        let [m0, m1, _] = layout.modes;
        let fft = if lines::covered(n) {
            Fft::Lines(Box::new(LinePasses {
                x: self.pass(LineKernel::Fft, n[0], n[1] * n[2], Lines::Along)?,
                y: self.pass(LineKernel::Fft, n[1], m0 * n[2], Lines::Across)?,
                z: self.pass(LineKernel::Fft, n[2], m0 * m1, Lines::Across)?,
                z_coil: self.pass(LineKernel::FftCoil, n[2], m0 * m1, Lines::Across)?,
            }))
        } else {
            Fft::Cufft(self.fft_plan(n)?)
        };
        Ok(CudaNufft {
            layout,
            geometry,
            method,
            interp,
            interp_allowed: AtomicBool::new(false),
            maxsub: options.maxsub,
            points: m,
            first,
            frac,
            perm,
            sub,
            sub_first,
            subproblems,
            correction: [cx?, cy?, cz?],
            fine: Mutex::new(fine),
            fft,
            staging: Mutex::new(None),
        })
    }

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
    fn interpolation_method(&self, w: usize, bs: [usize; 3], how: Interpolation) -> Result<Interp> {
        // The copy's rows (bs + w along y and z) of pairs of cells from
        // the even x at or below its first, at most (bs + w + 2) / 2, and
        // the barrier its copies count on.
        let bytes = 16 * (bs[1] + w) * (bs[2] + w) * ((bs[0] + w + 2) / 2) + 16;
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
    fn spreading_method(
        &self,
        w: usize,
        bs: [usize; 3],
        pitch: [usize; 2],
        options: &NufftOptions,
    ) -> Result<Method> {
        let step = match options.spreading {
            Spreading::FixedPoint => Step::SpreadFixedPoint,
            Spreading::Auto => auto_step(w),
            Spreading::Shared | Spreading::Global => Step::SpreadShared,
        };
        let bytes = spreading_bytes(step, w, bs, pitch, options.maxsub);
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
    use super::{copy_pairs, fixed_pitch, NufftOptions, WIDTHS};

    /// The fixed-point copy's row pitch: even, at least its pairs, and on
    /// the default bins the pitches worked out by hand. Width 7: 24 cells
    /// (the rows' 12 pairs), whose planes of 15 rows fall 8 banks apart,
    /// so the four groups' 7 columns take 28 distinct banks. Width 5: 22
    /// cells would put planes 30 banks apart (three lanes on bank 0), 24
    /// puts them 24 apart (none shared). Width 4: 20 cells put planes of 12
    /// rows 16 apart (two lanes a bank), 22 puts them 8 apart. Width 8
    /// (planes of 16 rows, a multiple of 32 banks at any even pitch) keeps
    /// the least, 24.
    #[test]
    fn fixed_point_pitches_spread_an_atomics_lanes_over_the_banks() {
        let bs = NufftOptions::default().bins;
        for w in WIDTHS {
            for odd in [false, true] {
                let pairs = copy_pairs(bs[0] + w, odd);
                let pitch = fixed_pitch(w, pairs, bs[1] + w);
                assert!(
                    pitch % 2 == 0 && (2 * pairs..=2 * pairs + 30).contains(&pitch),
                    "w {w}: {pitch}"
                );
            }
        }
        // Bins 16 cells wide start at x = 16 b - w / 2: odd at widths 2, 3,
        // 6 and 7.
        let want = [
            (2, 20),
            (3, 20),
            (4, 22),
            (5, 24),
            (6, 28),
            (7, 24),
            (8, 24),
        ];
        for (w, pitch) in want {
            let pairs = copy_pairs(bs[0] + w, (w / 2) % 2 == 1);
            assert_eq!(fixed_pitch(w, pairs, bs[1] + w), pitch, "width {w}");
        }
    }

    /// nufft.cu's shared-memory spreadings (float and fixed point) and its
    /// two interpolations (from the fine grid, from shared-memory copies of
    /// the bins) run on the CPU (emulate/) against the same sums taken
    /// point by point in double, at widths 2, 5, 7 and 8 (lanes with no cell of a footprint's
    /// plane, one and two; rows of 2, 3, 4 and 5 pairs; the GPU tests take
    /// every width): the default bins and tiles, bins of 4 on a grid
    /// smaller than a bin's copy with subproblems of 16, bins odd along x
    /// in one tile, a flat z, and tiles cut short along every axis; the
    /// sort key checked a bijection of the bins on each, and a NaN
    /// strength checked to reach every cell of its footprint (the
    /// fraction it left a number must be 0).
    /// Checks the indices, planes and wraps where no GPU is; the GPU tests
    /// check the kernels on the device.
    #[test]
    fn spreading_and_interpolation_emulated_on_the_cpu_match_point_by_point_sums() {
        for w in [2, 5, 7, 8] {
            assert!(WIDTHS.contains(&w));
            let defines = [
                format!("SPREAD_SHARED={w}"),
                r#"NUFFT_CU="../kernels/nufft.cu""#.to_string(),
            ];
            // float32 sums of a few hundred terms a cell round to ~1e-7
            // relative, fixed point's to ~1e-6 at most (half a unit of
            // 2^-22 of the largest strength a term); a wrong cell or
            // weight gives 1e-3 or more, and one cell a NaN missed 1/512
            // of a footprint at least.
            if !crate::emulate::check("nufft.cpp", &defines, &format!("width {w}"), 30, 1e-5) {
                return;
            }
        }
    }
}
