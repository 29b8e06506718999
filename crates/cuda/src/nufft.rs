//! The NUFFT on the first GPU, in float32 (kernels in nufft.cu and
//! spread.cuh): a plan takes its kernel, fine grid and corrections from
//! recon-nufft's [`Layout`], as the CPU's does, on a fine grid 1.5 times
//! the modes at tolerances 1e-5 to 1e-3 ([`Upsampling::Auto`]; the CPU's is
//! twice: with [`Upsampling::Two`] the two plans agree by construction),
//! and sorts its points into bins on the device once (count, scan,
//! place), a tile of bins at a time. Type 1 spreads into shared-memory
//! subproblems of at most [`NufftOptions::maxsub`] points per block (in
//! fixed point from tolerance 1e-5 up, in float below), or straight into
//! the fine grid where a subproblem would not fit in shared memory; type 2
//! interpolates from a shared-memory copy of each subproblem's bin
//! (brought in by bulk copies), a group of lanes per sorted point reading
//! two or three rows of its footprint at once, or where the
//! copy would not fit, from the fine grid itself. cuFFT transforms the
//! fine grid in place where the line FFTs have no kernels for its sizes.
//!
//! Spreading adds by atomics, so the order of float additions, and with it
//! the last bits of a result, may differ from run to run (not in fixed
//! point, whose sums are exact, until the copies meet in the fine grid).
//!
//! This file makes plans; upsampling.rs picks their fine grid, shared.rs
//! settles their use of shared memory, execute.rs runs them, coils.rs
//! batches type 1 over coils, and kernels.rs holds nufft.cu's kernels.

use crate::device::Device;
use crate::error::{err, Ctx};
use crate::lines::{self, LineKernel, Lines, Map, Pass};
use cudarc::driver::{CudaSlice, DeviceRepr, LaunchConfig, PushKernelArg};
use recon_core::{Error, Result};
use recon_nufft::Layout;
use std::sync::atomic::AtomicBool;
use std::sync::Mutex;

mod coils;
mod execute;
mod kernels;
mod shared;
mod upsampling;

#[cfg(test)]
pub(crate) use kernels::FIXED;
pub(crate) use kernels::{Correction, Kernels, Step};
pub(crate) use shared::auto_step;
use shared::{Interp, Method};
use upsampling::default_bins;
pub(crate) use upsampling::layout;
pub use upsampling::Upsampling;

/// Widths the kernels are compiled for: float32 tolerances 1e-1 to 1e-6
/// need 3 to 8 cells.
pub(crate) const WIDTHS: std::ops::RangeInclusive<usize> = 2..=8;

/// Threads per spreading block (one subproblem each): `SPREAD_THREADS` in spread.cuh.
const SPREAD_THREADS: u32 = 256;

/// How type 1 spreads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Spreading {
    /// Shared-memory subproblems where they fit (in fixed point at
    /// tolerances of 1e-5 and above), else straight into the grid.
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
    pub upsampling: Upsampling,
    /// Bin edge in fine cells per axis (each clipped to the fine grid);
    /// `None`: by the fine grid's upsampling (16 x 8 x 8 on a grid of 2,
    /// 14 x 7 x 6 on one of 1.5).
    pub bins: Option<[usize; 3]>,
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
            upsampling: Upsampling::Auto,
            bins: None,
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
}

// SAFETY: a plain #[repr(C)] struct of i32, laid out as in nufft.cu.
unsafe impl DeviceRepr for Geometry {}

// The layout nufft.cu's `Geometry` has, whose size it checks (NVRTC has no
// offsetof, so the offsets are checked here only).
const _: () = assert!(
    std::mem::size_of::<Geometry>() == 48
        && std::mem::offset_of!(Geometry, bs) == 12
        && std::mem::offset_of!(Geometry, nb) == 24
        && std::mem::offset_of!(Geometry, bt) == 36
);

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
        let bins = options.bins.unwrap_or_else(|| default_bins(&layout));
        if options.maxsub == 0 || bins.contains(&0) || options.tiles.contains(&0) {
            return Err(Error::Invalid {
                what: "GPU NUFFT options",
                reason: format!(
                    "bins {bins:?}, tiles {:?} and maxsub {} must be positive",
                    options.tiles, options.maxsub
                ),
            });
        }
        let n = layout.fine;
        let bs = [0, 1, 2].map(|d| bins[d].min(n[d]));
        let nb = [0, 1, 2].map(|d| n[d].div_ceil(bs[d]));
        let geometry = Geometry {
            n: n.map(|v| v as i32),
            bs: bs.map(|v| v as i32),
            nb: nb.map(|v| v as i32),
            bt: [0, 1, 2].map(|d| options.tiles[d].min(nb[d]) as i32),
        };
        let bins: usize = nb.iter().product();
        if bins > i32::MAX as usize / 2 {
            return Err(Error::Invalid {
                what: "GPU NUFFT bins",
                reason: format!("{bins} bins of {bs:?} cells are too many"),
            });
        }
        let method = self.spreading_method(layout.tolerance, w, bs, options)?;
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
}

#[cfg(test)]
mod tests {
    use super::WIDTHS;

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
