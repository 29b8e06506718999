//! The Toeplitz product on the GPU, pruned and fused:
//! `out = crop(IFFT(fq .* FFT(pad(x))))` on the `2n` grid, as five passes of
//! FFTs along lines, of our own (lines.rs), with no cuFFT call:
//! 1. x lines: each row of x, zero-padded to 2nx, transformed (rows y < ny,
//!    z < nz only: the others are zero);
//! 2. y lines: transformed for z < nz, their upper half read as zero;
//! 3. z lines, every (x, y): the FFT (upper half zero), the product with
//!    FFT(Q) scaled by `1 / (2n)^3` and the inverse FFT, lower half kept;
//! 4. y lines: the inverse FFT for z < nz, lower half kept;
//! 5. x lines: the inverse FFT of the rows y < ny, z < nz, cropped into out.
//!
//! For CG, [`Device::toeplitz_dot`] also folds a uniform W^H W into pass 3
//! (its stencil is a convolution but at the grid's faces: its symbol joins
//! FFT(Q)), and pass 5 mends the faces and takes CG's dot `<x, out>` as it
//! writes: where the stencil's own pass read x and out, rewrote out and
//! gathered six neighbours a voxel, pass 5 reads x once more. And
//! [`Device::toeplitz_update_dot`] makes CG's updates of the iterate and
//! the direction in pass 1, as it reads the direction: where a pass of
//! their own read and wrote it and pass 1 read it again.
//!
//! The grid is held as its lower half in z only. Each pass reads and writes
//! global memory once and skips the points that are zero or not needed: in
//! units of x's size, 34 reads and writes against about 55 for padding and
//! cropping around cuFFT's 2-D transforms of the planes, and 90 for 3-D
//! transforms of the whole grid. Shapes whose doubled sizes all have line
//! kernels (lines.rs) take this path; others fall back to the pieces.

use crate::device::Device;
use crate::error::Ctx;
use crate::lines::{covered, LineKernel, Lines, Map, Pass};
use cudarc::driver::CudaSlice;
use recon_core::{CgStep, Complex, Result};
use std::sync::Mutex;

/// What the fused path needs per grid shape, made once by the operator
/// that runs it: the passes along x (rows of x), y and z. The x and y
/// lines' forward FFTs read half their points (the rest is zero padding)
/// and the inverses write half (the crop): each has kernels of its own
/// that leave the other half out of the FFT's first or last pass
/// (`LineKernel::Pad`, `LineKernel::Crop`); SENSE's x lines, through a
/// coil map, take the plain kernels (lines.cu says why).
pub(crate) struct Passes {
    /// x lines: forward (padded), inverse (cropped).
    x: [Pass; 2],
    /// x lines with a coil map (SENSE), both ways.
    x_coil: Pass,
    /// x lines, inverse (cropped) with CG's dot, and its partial sums, a
    /// value per block.
    x_dot: Pass,
    partial: Mutex<CudaSlice<f64>>,
    /// x lines, forward (padded) with CG's updates made as they read.
    x_update: Pass,
    /// y lines: forward (padded), inverse (cropped).
    y: [Pass; 2],
    z: Pass,
    /// The uniform stencil's symbol along x and y, `S_x + S_y` (each `2 -
    /// 2 cos(2 pi i / L)`), at each (x, y) column of the 2n grid: lines.cu's
    /// `columns` adds z's.
    symbol: CudaSlice<f32>,
}

impl Device {
    /// The fused product's passes for images of shape `n`, or `None` for
    /// shapes it does not cover.
    pub(crate) fn passes(&self, n: [usize; 3]) -> Result<Option<Passes>> {
        let [nx, ny, nz] = n;
        if !covered([2 * nx, 2 * ny, 2 * nz]) {
            return Ok(None);
        }
        let both = |l, count, lines| -> Result<[Pass; 2]> {
            Ok([
                self.pass(LineKernel::Pad, l, count, lines)?,
                self.pass(LineKernel::Crop, l, count, lines)?,
            ])
        };
        let z = self.pass(
            LineKernel::ToeplitzColumns,
            2 * nz,
            4 * nx * ny,
            Lines::Across,
        )?;
        let axis = |l| (0..l).map(|i| symbol(i, l)).collect::<Vec<_>>();
        let (sx, sy) = (axis(2 * nx), axis(2 * ny));
        let symbol: Vec<f32> = sy
            .iter()
            .flat_map(|y| sx.iter().map(move |x| (x + y) as f32))
            .collect();
        let x_dot = self.pass(LineKernel::CropDot, 2 * nx, ny * nz, Lines::Along)?;
        let partial = Mutex::new(self.zeros::<f64>(x_dot.blocks())?);
        Ok(Some(Passes {
            x: both(2 * nx, ny * nz, Lines::Along)?,
            x_coil: self.pass(LineKernel::FftCoil, 2 * nx, ny * nz, Lines::Along)?,
            x_dot,
            partial,
            x_update: self.pass(LineKernel::PadUpdate, 2 * nx, ny * nz, Lines::Along)?,
            y: both(2 * ny, 2 * nx * nz, Lines::Across)?,
            z,
            symbol: self.upload(&symbol)?,
        }))
    }

    /// The pruned, fused Toeplitz product (module docs) by the passes `p`
    /// made for `n`, with `fq` the real FFT(Q) of [`Device::fft_q`]. `work`
    /// holds at least the lower half of the 2n grid.
    /// With `coil = (s, accumulate)`, SENSE's term of one coil instead,
    /// `out (+)= conj(s) . T(s . x)`: the map rides along with the first
    /// pass's reads and the last's writes.
    #[allow(clippy::too_many_arguments)]
    pub fn toeplitz(
        &self,
        p: &Passes,
        out: &mut CudaSlice<f32>,
        x: &CudaSlice<f32>,
        fq: &CudaSlice<f32>,
        work: &mut CudaSlice<f32>,
        n: [usize; 3],
        coil: Option<(&CudaSlice<f32>, bool)>,
    ) -> Result<()> {
        let (xf, xi, read, write) = match coil {
            Some((s, accumulate)) => (
                &p.x_coil,
                &p.x_coil,
                image_rows(n).coil(self, s, false),
                image_rows(n).coil(self, s, accumulate),
            ),
            None => (&p.x[0], &p.x[1], image_rows(n), image_rows(n)),
        };
        // 1. x: FFT of x's rows (times s) zero-padded to 2nx
        self.lines(xf, work, Some(x), work_rows(n, 2 * n[0]), read, -1.0)?;
        self.yz(p, fq, work, n, None)?;
        // 5. x: inverse FFT of the rows y < ny, cropped into out (times
        // conj(s), added)
        self.lines(xi, out, Some(work), write, work_rows(n, 2 * n[0]), 1.0)
    }

    /// CG's map and dot by the passes `p` (as [`Device::toeplitz`]) with
    /// the uniform stencil (every edge 1, no diagonal) times `a` (0: no
    /// prior): `out = T x + a W^H W x`, then `s[slot] = Re <x, out>`.
    ///
    /// That W^H W is the convolution with 6 at lag 0 and -1 at the lags
    /// `+-e_d`, a Toeplitz matrix like F^H F, less `b(i)` at each voxel on
    /// `b(i)` of the grid's faces (where it lacks neighbours). So pass 3
    /// multiplies by `FFT(Q) + a S` instead of FFT(Q), S the stencil's
    /// symbol `sum_d 2 - 2 cos(2 pi k_d / 2n_d)`, and pass 5 subtracts `a b
    /// x` at the faces as it writes out, and sums the dot's parts per
    /// block (`fft_lines_crop_dot`): it reads x once more, where a pass of
    /// its own read x and out again (and the stencil's own pass,
    /// `add_whw_dot_partial`, rewrote all of out).
    #[allow(clippy::too_many_arguments)]
    pub fn toeplitz_dot(
        &self,
        p: &Passes,
        out: &mut CudaSlice<f32>,
        x: &CudaSlice<f32>,
        fq: &CudaSlice<f32>,
        work: &mut CudaSlice<f32>,
        n: [usize; 3],
        a: f32,
        s: &mut CudaSlice<f64>,
        slot: usize,
    ) -> Result<()> {
        // 1. x: FFT of x's rows zero-padded to 2nx
        self.lines(
            &p.x[0],
            work,
            Some(x),
            work_rows(n, 2 * n[0]),
            image_rows(n),
            -1.0,
        )?;
        self.yz_crop_dot(p, out, x, fq, work, n, a, s, slot)
    }

    /// CG's updates `u` (`x = x + a c dir`, `dir = r + d dir`, as
    /// [`Device::cg_update`]), then [`Device::toeplitz_dot`] of the new
    /// direction `dir`: pass 1 makes the updates as it reads `dir`
    /// (`fft_lines_pad_update`), which spares the updates' own pass a
    /// read and write of `dir`, and the bits are the same.
    #[allow(clippy::too_many_arguments)]
    pub fn toeplitz_update_dot(
        &self,
        p: &Passes,
        u: CgStep<'_, CudaSlice<f32>>,
        out: &mut CudaSlice<f32>,
        dir: &mut CudaSlice<f32>,
        fq: &CudaSlice<f32>,
        work: &mut CudaSlice<f32>,
        n: [usize; 3],
        a: f32,
        s: &mut CudaSlice<f64>,
        slot: usize,
    ) -> Result<()> {
        // 1. x: the updates, and the FFT of the new direction's rows
        // zero-padded to 2nx
        self.pad_update(&p.x_update, work, work_rows(n, 2 * n[0]), u, dir, n, s)?;
        self.yz_crop_dot(p, out, dir, fq, work, n, a, s, slot)
    }

    /// Passes 2 to 5 of [`Device::toeplitz_dot`], pass 1 made.
    #[allow(clippy::too_many_arguments)]
    fn yz_crop_dot(
        &self,
        p: &Passes,
        out: &mut CudaSlice<f32>,
        x: &CudaSlice<f32>,
        fq: &CudaSlice<f32>,
        work: &mut CudaSlice<f32>,
        n: [usize; 3],
        a: f32,
        s: &mut CudaSlice<f64>,
        slot: usize,
    ) -> Result<()> {
        self.yz(p, fq, work, n, (a != 0.0).then_some(a))?;
        // 5. x: inverse FFT of the rows y < ny, cropped into out, less a b
        // x at the faces, and the dot's parts
        let mut partial = p.partial.lock().expect("partial sums poisoned");
        let src = work_rows(n, 2 * n[0]);
        self.crop_dot(&p.x_dot, out, work, src, x, a, n, &mut partial)?;
        self.sum_partials_to(s, slot, &partial)
    }

    /// Passes 2 to 4 (module docs), pass 1 made into `work`; with `stencil
    /// = Some(a)`, pass 3's multiplier also takes `a` times the uniform
    /// stencil's symbol (see [`Device::toeplitz_dot`]).
    fn yz(
        &self,
        p: &Passes,
        fq: &CudaSlice<f32>,
        work: &mut CudaSlice<f32>,
        n: [usize; 3],
        stencil: Option<f32>,
    ) -> Result<()> {
        let [nx, ny, nz] = n;
        let (px, py) = (2 * nx, 2 * ny);
        let plane = px * py;
        // y lines of work: line q = z px + x.
        let work_ys = |n| Map::new(px, plane, 1, px, n);
        // 2. y: FFT, points y >= ny zero
        self.lines(&p.y[0], work, None, work_ys(py), work_ys(ny), -1.0)?;
        // 3. z: FFT, product with FFT(Q) / (2n)^3, inverse FFT
        // 1 / (2n)^3: every pass transforms unnormalised.
        // With the uniform stencil, scale (FFT(Q) + a S): lam = scale a.
        let scale = 1.0 / (plane * 2 * nz) as f32;
        let (plane, nz32) = (plane as i64, nz as i32);
        let none = 0u64;
        let lam = scale * stencil.unwrap_or(0.0);
        let mut b = self.chained(&p.z.kernel);
        b.buf_mut(work)
            .buf(fq)
            .buf(&p.z.twiddles)
            .arg(&plane)
            .arg(&nz32)
            .arg(&scale);
        match stencil {
            Some(_) => b.buf(&p.symbol),
            None => b.arg(&none),
        };
        b.arg(&lam);
        unsafe { b.launch(p.z.cfg) }.at("launch toeplitz_columns")?;
        // 4. y: inverse FFT, points y < ny kept
        self.lines(&p.y[1], work, None, work_ys(ny), work_ys(py), 1.0)
    }

    /// The Toeplitz kernel `FFT(ifftshift(q))` on the grid `d` by the line
    /// kernels, real, or `None` where a length has none. The shift by half
    /// of each (even) length multiplies the transform by (-1)^k per axis, so
    /// it rides along with each pass instead of costing a copy of Q on the
    /// host.
    ///
    /// Real because Q is Hermitian, `Q(-r) = conj(Q(r))` (its weights are
    /// real), once its lags `-n` are left out: they pair with no lag `+n`
    /// on the grid, and the cropped product never uses them (its lags are
    /// `i - j` with both in `0..n`), so each axis's pass reads index 0 (the
    /// lag -n) as 0. The imaginary part left is the rounding of Q's sums, and the
    /// product reads half the bytes (toeplitz_columns).
    pub fn fft_q(&self, q: &[Complex<f32>], d: [usize; 3]) -> Result<Option<CudaSlice<f32>>> {
        if !covered(d) {
            return Ok(None);
        }
        let [d0, d1, d2] = d;
        let mut fq = self.upload(crate::device::as_floats(q))?;
        let axes = [
            (d0, d1 * d2, Map::rows(d0, d0), Lines::Along),
            (d1, d0 * d2, Map::new(d0, d0 * d1, 1, d0, d1), Lines::Across),
            (d2, d0 * d1, Map::new(0, 0, 1, d0 * d1, d2), Lines::Across),
        ];
        for (l, count, m, lines) in axes {
            let pass = self.pass(LineKernel::Fft, l, count, lines)?;
            // In: lag -n (index 0) left out; out: (-1)^k, the shift.
            let keep: Vec<f32> = (0..l).map(|k| if k == 0 { 0.0 } else { 1.0 }).collect();
            let alternate: Vec<f32> = (0..l)
                .map(|k| if k % 2 == 0 { 1.0 } else { -1.0 })
                .collect();
            let (keep, alternate) = (self.upload(&keep)?, self.upload(&alternate)?);
            let (mi, mo) = (m.times(self, &keep), m.times(self, &alternate));
            self.lines(&pass, &mut fq, None, mo, mi, -1.0)?;
        }
        let mut re = self.zeros::<f32>(d0 * d1 * d2)?;
        self.real_part(&mut re, &fq)?;
        Ok(Some(re))
    }
}

/// The rows of images of shape `n`, `nx` points each.
fn image_rows(n: [usize; 3]) -> Map {
    Map::rows(n[0], n[0])
}

/// The lower half of the Toeplitz product's work (the planes z < nz of the
/// 2n grid: point (x, y, z) at `z * plane + y * 2nx + x`), its rows y < ny,
/// `len` points each: row q = z ny + y.
fn work_rows(n: [usize; 3], len: usize) -> Map {
    let [nx, ny, _] = n;
    Map::new(ny, 4 * nx * ny, 2 * nx, 1, len)
}

/// The uniform stencil's symbol along an axis of `l` points at frequency
/// `i`: the FFT of its row (2 at lag 0, -1 at the lags +-1), `2 - 2 cos(2
/// pi i / l)`.
fn symbol(i: usize, l: usize) -> f64 {
    2.0 - 2.0 * (std::f64::consts::TAU * i as f64 / l as f64).cos()
}
