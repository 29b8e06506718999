//! FFTs along lines of a 3-D grid (kernels/lines.cu), the building block of
//! the pruned Toeplitz product (toeplitz.rs) and of the NUFFT's FFT
//! (nufft.rs): a [`Pass`] transforms many lines of one length, each read
//! through one [`Map`] and written through another, so that zero padding,
//! cropping, picking modes and per-axis factors ride along with the
//! transform instead of costing passes over memory of their own.
//! [`Device::lines`] launches a pass; CG's x lines, which take more than
//! the lines (its dot, its updates), have launchers of their own in
//! cg_lines.rs.

use crate::device::Device;
use crate::error::Ctx;
use cudarc::driver::{CudaFunction, CudaSlice, DevicePtr, DeviceRepr, LaunchConfig};
use recon_core::{Error, Result};

/// The line lengths with kernels (`fft_lines_L`, `toeplitz_columns_L`),
/// as in lines.cu: multiples of 8 from 16 to 1024 with no prime factor
/// above 5.
pub(crate) const LENGTHS: [usize; 14] = [
    16, 32, 64, 96, 128, 160, 192, 256, 320, 384, 512, 640, 768, 1024,
];

/// The kernel families of lines.cu, each compiled for a length of
/// [`LENGTHS`] when a pass first needs it, in one of three modules per
/// length ([`LineKernel::module`]): the plain FFTs, the Toeplitz product's,
/// and CG's x lines.
/// `Fft`, `FftCoil`, `Pad` and `Crop` come in both widths;
/// `ToeplitzColumns` (lines along z) is always wide.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LineKernel {
    /// `fft_lines_L`: an FFT along each line.
    Fft,
    /// `fft_lines_coil_L`: the same, through a coil map.
    FftCoil,
    /// `fft_lines_pad_L`: lines read through a plain map of L/2 points,
    /// the upper half zero, whose first pass leaves the zeros out: the
    /// Toeplitz product's forward x and y lines (with no coil map).
    Pad,
    /// `fft_lines_crop_L`: lines written through a plain map of L/2
    /// points, whose last pass computes only those: the Toeplitz
    /// product's inverse x and y lines.
    Crop,
    /// `fft_lines_crop_dot_L`: `Crop` along x into the image, each value
    /// less `a b x` at the grid's faces and CG's `Re <x, out>` summed by
    /// block (toeplitz.rs). Narrow only.
    CropDot,
    /// `fft_lines_pad_update_L`: `Pad` along x from the image p, each
    /// point read first taking CG's updates `x = x + c p`, `p = r + d p`
    /// (vector.cu's `cg_update`), both written back (toeplitz.rs). Narrow
    /// only.
    PadUpdate,
    /// `toeplitz_columns_L`: the Toeplitz product's last axis.
    ToeplitzColumns,
}

/// How a pass's lines lie in memory, which sets how many a block takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Lines {
    /// Along x: a line's points are adjacent (narrow blocks, about 256
    /// threads, or 2 lines from 256 points on).
    Along,
    /// Along y or z: adjacent lines are adjacent in memory, a line's points
    /// a row apart (wide blocks, up to 512 threads, the `_wide` kernels):
    /// at least 64 bytes of each row read at once.
    Across,
}

impl LineKernel {
    #[cfg(test)]
    const ALL: [(LineKernel, Lines); 11] = [
        (LineKernel::Fft, Lines::Along),
        (LineKernel::Fft, Lines::Across),
        (LineKernel::FftCoil, Lines::Along),
        (LineKernel::FftCoil, Lines::Across),
        (LineKernel::Pad, Lines::Along),
        (LineKernel::Pad, Lines::Across),
        (LineKernel::Crop, Lines::Along),
        (LineKernel::Crop, Lines::Across),
        (LineKernel::CropDot, Lines::Along),
        (LineKernel::PadUpdate, Lines::Along),
        (LineKernel::ToeplitzColumns, Lines::Across),
    ];

    /// Its module for length `l`: lines.cu compiled with `-DLENGTH=l`
    /// (plain FFTs) or `-DTOEPLITZ=l` (the Toeplitz product's kernels).
    pub(crate) fn module(self, l: usize) -> crate::kernels::Module {
        match self {
            LineKernel::Fft | LineKernel::FftCoil => module(l),
            LineKernel::CropDot | LineKernel::PadUpdate => toeplitz_dot_module(l),
            _ => toeplitz_module(l),
        }
    }

    /// Whether its blocks are wide.
    fn wide(self, lines: Lines) -> bool {
        self == LineKernel::ToeplitzColumns || lines == Lines::Across
    }

    fn name(self, l: usize, lines: Lines) -> String {
        let wide = match (self, lines) {
            (LineKernel::ToeplitzColumns, _) | (_, Lines::Along) => "",
            _ if has_wide(l) => "_wide",
            _ => "",
        };
        match self {
            LineKernel::Fft => format!("fft_lines_{l}{wide}"),
            LineKernel::FftCoil => format!("fft_lines_coil_{l}{wide}"),
            LineKernel::Pad => format!("fft_lines_pad_{l}{wide}"),
            LineKernel::Crop => format!("fft_lines_crop_{l}{wide}"),
            LineKernel::CropDot => format!("fft_lines_crop_dot_{l}"),
            LineKernel::PadUpdate => format!("fft_lines_pad_update_{l}"),
            LineKernel::ToeplitzColumns => format!("toeplitz_columns_{l}"),
        }
    }
}

/// lines.cu's module of plain FFTs for length `l`: the file compiled with
/// `-DLENGTH=l`.
pub(crate) fn module(l: usize) -> crate::kernels::Module {
    crate::kernels::Module::instance(crate::kernels::LINES, "LENGTH", l)
}

/// lines.cu's module of the Toeplitz product's kernels for length `l`
/// (`-DTOEPLITZ=l`).
pub(crate) fn toeplitz_module(l: usize) -> crate::kernels::Module {
    crate::kernels::Module::instance(crate::kernels::LINES, "TOEPLITZ", l)
}

/// lines.cu's module of CG's x lines for length `l` (`-DTOEPLITZ_DOT=l`:
/// the cropped inverse with its dot, the padded forward with its
/// updates), compiled beside [`toeplitz_module`]'s.
pub(crate) fn toeplitz_dot_module(l: usize) -> crate::kernels::Module {
    crate::kernels::Module::instance(crate::kernels::LINES, "TOEPLITZ_DOT", l)
}

/// The kernels of lines.cu's `module` for length `l` (one of [`module`]'s
/// and [`toeplitz_module`]'s), by family.
#[cfg(test)]
pub(crate) fn kernel_names(module: crate::kernels::Module, l: usize) -> Vec<String> {
    // Without `_wide` kernels a length names its narrow ones twice.
    let mut names: Vec<String> = LineKernel::ALL
        .iter()
        .filter(|(k, _)| k.module(l) == module)
        .map(|(k, lines)| k.name(l, *lines))
        .collect();
    names.sort();
    names.dedup();
    names
}

impl Device {
    /// `kernel` for lines of length `l`, its length's module loaded the
    /// first time.
    fn line_kernel(&self, kernel: LineKernel, l: usize, lines: Lines) -> Result<CudaFunction> {
        let name = kernel.name(l, lines);
        if !LENGTHS.contains(&l) {
            return Err(crate::error::err(
                format!("find kernel {name}"),
                format!("no line kernels for length {l} (lengths: {LENGTHS:?})"),
            ));
        }
        self.modules.function(&kernel.module(l), &name)
    }
}

/// Whether every length of `n` has kernels.
pub(crate) fn covered(n: [usize; 3]) -> bool {
    n.iter().all(|l| LENGTHS.contains(l))
}

/// Lines per block for length `l`, as `columns_for` in stockham.cuh: a power of
/// two from 4 to 32, about 256 threads a block; if `wide`, at least 8 where
/// that fits 512 threads; narrow lines of 256 points or more, 2 (a warp
/// reads 128 bytes of each of its lines).
pub(crate) fn columns_per_block(l: usize, wide: bool) -> usize {
    if !wide && l >= 256 {
        return 2;
    }
    let mut c = 1;
    while 2 * c * (l / 8) <= 256 && 2 * c <= 32 {
        c *= 2;
    }
    let c = c.max(4);
    if wide && c < 8 && l <= 512 {
        8
    } else {
        c
    }
}

/// Points a thread of `kernel` holds at length `l`: 8, or for
/// `toeplitz_columns` what `columns_points` in stockham.cuh says (16 at 256:
/// two passes of the FFT each way).
pub(crate) fn points_per_thread(kernel: LineKernel, l: usize) -> usize {
    match (kernel, l) {
        (LineKernel::ToeplitzColumns, 256) => 16,
        _ => 8,
    }
}

/// The first pass's radix of `kernel` at length `l` (`next_radix(l, P)` in
/// stockham.cuh): 16 where a thread holds 16 points and 16 divides `l`, else 8
/// (every length is a multiple of 8).
fn first_radix(kernel: LineKernel, l: usize) -> usize {
    if points_per_thread(kernel, l) >= 16 && l.is_multiple_of(16) {
        16
    } else {
        8
    }
}

/// Whether length `l` has `_wide` kernels: where wide blocks differ from
/// narrow ones (lines.cu compiles them for these lengths only).
fn has_wide(l: usize) -> bool {
    columns_per_block(l, true) != columns_per_block(l, false)
}

/// `kernel`'s dynamic shared memory for lines of length `l` lying as
/// `lines` says: the twiddles, then the block's lines of `l` float2 in
/// rows of as many points as lines, a padding row after every run of the
/// first radix (`at` in stockham.cuh).
pub(crate) fn shared_bytes(kernel: LineKernel, l: usize, lines: Lines) -> usize {
    let c = columns_per_block(l, kernel.wide(lines));
    let rows = if c >= 16 {
        l
    } else {
        l + l / first_radix(kernel, l)
    };
    8 * (l + rows * c)
}

/// Where line q's points lie: point k at `(q / a) * b + (q % a) * d + k *
/// step` (in float2), for k < n, multiplied by `f[k]` where `f` is not
/// null. Plain, transform index i is point i; centred, point k holds the
/// frequency k - n/2 (the n lowest, as a NUFFT orders its modes). A coil
/// map `s` where not null (see [`Map::coil`]). `Map` in stockham.cuh.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub(crate) struct Map {
    b: i64,
    d: i64,
    step: i64,
    a: i32,
    n: i32,
    centred: i32,
    coil: i32,
    f: u64,
    s: u64,
}

// SAFETY: plain integers and a device address, laid out as the C struct.
unsafe impl DeviceRepr for Map {}

// The layout stockham.cuh's `Map` has, whose size it checks (NVRTC has no
// offsetof, so the offsets are checked here only).
const _: () = assert!(
    std::mem::size_of::<Map>() == 56
        && std::mem::offset_of!(Map, a) == 24
        && std::mem::offset_of!(Map, f) == 40
        && std::mem::offset_of!(Map, s) == 48
);

impl Map {
    /// Line q's first point at `(q / a) * b + (q % a) * d`; n points, `step`
    /// apart. `a` = 0: line q at `q * d`.
    pub fn new(a: usize, b: usize, d: usize, step: usize, n: usize) -> Map {
        Map {
            b: b as i64,
            d: d as i64,
            step: step as i64,
            a: if a == 0 { 1 << 30 } else { a as i32 },
            n: n as i32,
            centred: 0,
            coil: 0,
            f: 0,
            s: 0,
        }
    }

    /// Lines one after another, `len` apart, n points each.
    pub fn rows(len: usize, n: usize) -> Map {
        Map::new(0, 0, len, 1, n)
    }

    /// Whether every point's offset within its line, k step for k < n,
    /// is below 2^31: the kernels take it in 32 bits (stockham.cuh's
    /// `LineT`). Every line of a grid whose axes are [`LENGTHS`] is
    /// (a step is at most a plane, 2^20 points).
    fn fits(&self) -> bool {
        (self.n.max(1) as i64 - 1) * self.step < 1 << 31
    }

    /// The n points are the n lowest frequencies, centred.
    pub fn centred(mut self) -> Map {
        self.centred = 1;
        self
    }

    /// Each point k multiplied by `f[k]` (f holds at least n values).
    pub fn times(mut self, dev: &Device, f: &CudaSlice<f32>) -> Map {
        let (ptr, _sync) = f.device_ptr(&dev.stream);
        self.f = ptr;
        self
    }

    /// With a coil map `s`, indexed like the data: loads multiply by s,
    /// stores write conj(s) times the result, or add it with `accumulate`
    /// (for the `fft_lines_coil` kernels only).
    pub fn coil(mut self, dev: &Device, s: &CudaSlice<f32>, accumulate: bool) -> Map {
        let (ptr, _sync) = s.device_ptr(&dev.stream);
        self.s = ptr;
        self.coil = accumulate as i32;
        self
    }
}

/// Checks the maps of a pass of `family`: every kernel takes a point's
/// offset in 32 bits ([`Map::fits`]), and a pruned kernel relies on its
/// maps (stockham.cuh's PAD and CROP): `Pad` reads a plain half line (its
/// first pass leaves the upper half out as zero) and `Crop` writes one
/// (its last pass computes only that half). Any other map would be
/// transformed wrongly without a sign, so it is an error here.
fn check_maps(family: LineKernel, len: usize, mo: &Map, mi: &Map) -> Result<()> {
    if !(mo.fits() && mi.fits()) {
        return Err(Error::Invalid {
            what: "line FFT",
            reason: format!(
                "lines of {} and {} points, {} and {} apart, span 2^31 points or more",
                mi.n, mo.n, mi.step, mo.step
            ),
        });
    }
    let half = |m: &Map| m.n as usize == len / 2 && m.centred == 0;
    let (what, ok) = match family {
        LineKernel::Pad | LineKernel::PadUpdate => ("read", half(mi)),
        LineKernel::Crop | LineKernel::CropDot => ("written", half(mo)),
        _ => return Ok(()),
    };
    if ok {
        Ok(())
    } else {
        Err(Error::Invalid {
            what: "pruned line FFT",
            reason: format!(
                "{family:?} lines of length {len} must be {what} through a plain map of {} points",
                len / 2
            ),
        })
    }
}

/// A kernel for lines of length `l`, with its twiddles and launch shape
/// for `count` lines.
pub(crate) struct Pass {
    pub kernel: CudaFunction,
    pub twiddles: CudaSlice<f32>,
    pub cfg: LaunchConfig,
    pub count: i32,
    family: LineKernel,
    len: usize,
}

impl Pass {
    /// Its launch's blocks.
    pub(crate) fn blocks(&self) -> usize {
        self.cfg.grid_dim.0 as usize
    }

    /// Fails unless it is a `family` pass over the rows of images of
    /// shape `n`, a line each, read through `mi` and written through `mo`
    /// as its kernel takes them (its family first: the maps' check
    /// assumes it).
    pub(crate) fn check_rows(
        &self,
        family: LineKernel,
        n: [usize; 3],
        mo: &Map,
        mi: &Map,
    ) -> Result<()> {
        if self.family != family || self.count as usize != n[1] * n[2] {
            return Err(Error::Invalid {
                what: "line pass",
                reason: format!(
                    "a {:?} pass of {} lines is not the {family:?} pass of images of {n:?}",
                    self.family, self.count
                ),
            });
        }
        check_maps(family, self.len, mo, mi)
    }
}

impl Device {
    /// The pass of `kernel` for `count` lines of length `l`, which must be
    /// one of [`LENGTHS`], lying as `lines` says.
    pub(crate) fn pass(
        &self,
        kernel: LineKernel,
        l: usize,
        count: usize,
        lines: Lines,
    ) -> Result<Pass> {
        let tw: Vec<f32> = (0..l)
            .flat_map(|k| {
                let a = std::f64::consts::TAU * k as f64 / l as f64;
                [a.cos() as f32, a.sin() as f32]
            })
            .collect();
        if kernel == LineKernel::ToeplitzColumns {
            // Its map is its own (lines.cu's `columns`): the held half of
            // each column, a plane of `count` points apart.
            let column = Map::new(0, 0, 1, count, l / 2);
            check_maps(kernel, l, &column, &column)?;
        }
        let wide = kernel.wide(lines);
        let c = columns_per_block(l, wide);
        Ok(Pass {
            kernel: self.line_kernel(kernel, l, lines)?,
            twiddles: self.upload(&tw)?,
            cfg: LaunchConfig {
                grid_dim: (count.div_ceil(c) as u32, 1, 1),
                block_dim: ((c * l / points_per_thread(kernel, l)) as u32, 1, 1),
                shared_mem_bytes: shared_bytes(kernel, l, lines) as u32,
            },
            count: count as i32,
            family: kernel,
            len: l,
        })
    }

    /// The lines' FFTs `X[i] = sum_j x[j] exp(s 2 pi i j / l)`, unnormalised,
    /// read from `src` (None: from `dst`, in place) through `mi`, written to
    /// `dst` through `mo`.
    pub(crate) fn lines(
        &self,
        p: &Pass,
        dst: &mut CudaSlice<f32>,
        src: Option<&CudaSlice<f32>>,
        mo: Map,
        mi: Map,
        s: f32,
    ) -> Result<()> {
        check_maps(p.family, p.len, &mo, &mi)?;
        let none = 0u64;
        let mut b = self.chained(&p.kernel);
        b.buf_mut(dst);
        match src {
            Some(src) => b.buf(src),
            None => b.arg(&none),
        };
        b.arg(&mo).arg(&mi).arg(&p.count).buf(&p.twiddles).arg(&s);
        unsafe { b.launch(p.cfg) }
            .at("launch fft_lines")
            .map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pruned_kernels_take_only_plain_half_maps_and_offsets_fit_32_bits() {
        let half = Map::rows(64, 32);
        let full = Map::rows(64, 64);
        // Pad reads the half line, Crop writes it; the other side is free.
        assert!(check_maps(LineKernel::Pad, 64, &full, &half).is_ok());
        assert!(check_maps(LineKernel::Crop, 64, &half, &full).is_ok());
        assert!(check_maps(LineKernel::Pad, 64, &half, &full).is_err());
        assert!(check_maps(LineKernel::Crop, 64, &full, &half).is_err());
        // a centred half (a NUFFT's modes) is not the lower half
        assert!(check_maps(LineKernel::Pad, 64, &full, &half.centred()).is_err());
        // the plain kernels take any map whose offsets fit 32 bits
        assert!(check_maps(LineKernel::Fft, 64, &full, &half.centred()).is_ok());
        let z = |step| Map::new(0, 0, 1, step, 1024);
        assert!(check_maps(LineKernel::Fft, 1024, &z(1 << 21), &full).is_ok());
        assert!(check_maps(LineKernel::Fft, 1024, &full, &z(1 << 22)).is_err());
    }

    #[test]
    fn every_length_has_radices_8_4_6_2_3_5_and_fits_a_block() {
        for l in LENGTHS {
            assert_eq!(l % 8, 0, "L = {l}");
            let mut rest = l;
            for r in [2, 3, 5] {
                while rest % r == 0 {
                    rest /= r;
                }
            }
            assert_eq!(rest, 1, "L = {l}");
            for wide in [false, true] {
                let c = columns_per_block(l, wide);
                assert!(c.is_power_of_two() && (2..=32).contains(&c), "L = {l}");
                assert!(c * l / 8 <= 512, "L = {l}");
            }
            // No opt-in to more than the default 48 KiB of shared memory.
            for (kernel, lines) in LineKernel::ALL {
                let bytes = shared_bytes(kernel, l, lines);
                assert!(bytes <= 48 * 1024, "L = {l}, {kernel:?} {lines:?}");
            }
        }
        assert_eq!(columns_per_block(128, false), 16);
        assert_eq!(columns_per_block(96, false), 16);
        // Narrow from 256 points: 128 bytes of each line a warp.
        assert_eq!(columns_per_block(256, false), 2);
        assert_eq!(columns_per_block(1024, false), 2);
        // Wide: 64 bytes of each row at L = 512 (8 lines); no wider where
        // the narrow blocks have 8 already, nor past 512 threads.
        assert_eq!(columns_per_block(512, true), 8);
        assert_eq!(columns_per_block(256, true), 8);
        assert_eq!(columns_per_block(1024, true), 4);
        // The lengths with _wide kernels, as lines.cu's #if lists them.
        let wide: Vec<usize> = LENGTHS.into_iter().filter(|l| has_wide(*l)).collect();
        assert_eq!(wide, [256, 320, 384, 512, 640, 768, 1024]);
        // plain: fft_lines, fft_lines_coil (and _wide); Toeplitz: the
        // columns, pad, crop (and pad, crop _wide); CG's: crop_dot,
        // pad_update
        assert_eq!(kernel_names(module(512), 512).len(), 4);
        assert_eq!(kernel_names(module(256), 256).len(), 4);
        assert_eq!(kernel_names(module(128), 128).len(), 2);
        assert_eq!(kernel_names(toeplitz_module(512), 512).len(), 5);
        assert_eq!(kernel_names(toeplitz_module(256), 256).len(), 5);
        assert_eq!(kernel_names(toeplitz_module(128), 128).len(), 3);
        assert_eq!(kernel_names(toeplitz_dot_module(256), 256).len(), 2);
        assert_eq!(std::mem::size_of::<Map>(), 56);
    }

    /// lines.cu's kernels run on the CPU (emulate/: a block's threads as
    /// std::threads) against DFTs summed in double, at lengths that take
    /// each path: radices 8 and 2 with the product in registers (16), 8, 4
    /// and 3 through shared memory (96), 16 x 16 with 16 points a thread
    /// (256), 8, 8 and 5 (320), 8, 8 and 6 (384, the last pass with a
    /// third of its group slots idle), 8 x 8 x 8 in registers (512). The
    /// pruned passes: a padded first pass of radix 8 (every length) and 16
    /// (the columns at 256), a cropped last pass of radix 2 (16), 4 (256's
    /// lines), 6 (384), 8 (512) and 16 (256's columns), and none where the
    /// last radix is odd (96, 320). The columns also with the uniform
    /// stencil's symbol beside FFT(Q); the cropped x lines with CG's dot
    /// on images with axes of 1, 2 and more voxels, with and without the
    /// faces' correction, its block sum by shuffles (blocks of whole warps)
    /// and by the tree (160: 80 threads). It checks the index and twiddle
    /// logic where no GPU is; the GPU tests check the same kernels on the
    /// device.
    #[test]
    fn kernels_emulated_on_the_cpu_match_dfts() {
        for l in [16, 96, 160, 256, 320, 384, 512] {
            let defines = [
                format!("LENGTH={l}"),
                format!("TOEPLITZ={l}"),
                format!("TOEPLITZ_DOT={l}"),
                r#"LINES_CU="../kernels/lines.cu""#.to_string(),
            ];
            // float32 FFTs of a few hundred points round to ~1e-7
            // relative, and the dot's sums (double) to less, CG's updates
            // (one fma a value) to ~3e-8; a wrong index or twiddle gives
            // order 1, a face missed or a coefficient swapped 1e-3 or more.
            if !crate::emulate::check("lines.cpp", &defines, &format!("L = {l}"), 23, 1e-5) {
                return;
            }
        }
    }
}
