//! CG's x lines, lines.cu's module `-DTOEPLITZ_DOT` (lines.rs's
//! [`LineKernel::CropDot`] and [`LineKernel::PadUpdate`]): the Toeplitz
//! product's last pass, cropped into the image with CG's dot `<x, A x>`
//! taken per block, and its first, zero-padded, with CG's updates of the
//! iterate and the direction made as it reads the direction. toeplitz.rs
//! launches them; each checks that its pass is its family's over the
//! image's rows.

use crate::device::Device;
use crate::error::Ctx;
use crate::lines::{LineKernel, Map, Pass};
use crate::vector::slots_of;
use cudarc::driver::CudaSlice;
use recon_core::{CgStep, Error, Result};

impl Device {
    /// The inverse FFTs of a [`LineKernel::CropDot`] pass `p`, read from
    /// `src` through `mi`, cropped into the rows of the image `out` of
    /// shape `n` (line q its row q), each value less `a b x` at a voxel on
    /// b of the grid's faces, and `partial[block]` the block's part of
    /// `Re <x, out>` (x laid out as out), for [`Device::sum_partials_to`].
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn crop_dot(
        &self,
        p: &Pass,
        out: &mut CudaSlice<f32>,
        src: &CudaSlice<f32>,
        mi: Map,
        x: &CudaSlice<f32>,
        a: f32,
        n: [usize; 3],
        partial: &mut CudaSlice<f64>,
    ) -> Result<()> {
        let [nx, ny, nz] = n;
        let mo = Map::rows(nx, nx);
        p.check_rows(LineKernel::CropDot, n, &mo, &mi)?;
        Error::check_len("crop_dot output", 2 * nx * ny * nz, out.len())?;
        Error::check_len("crop_dot input", out.len(), x.len())?;
        // every value of `partial` is summed afterwards: one per block
        Error::check_len("crop_dot partial sums", p.blocks(), partial.len())?;
        let (ny, nz) = (ny as i32, nz as i32);
        let mut b = self.chained(&p.kernel);
        b.buf_mut(partial)
            .buf_mut(out)
            .buf(src)
            .arg(&mo)
            .arg(&mi)
            .arg(&p.count)
            .buf(&p.twiddles)
            .buf(x)
            .arg(&a)
            .arg(&ny)
            .arg(&nz);
        unsafe { b.launch(p.cfg) }
            .at("launch fft_lines_crop_dot")
            .map(|_| ())
    }

    /// The forward FFTs of a [`LineKernel::PadUpdate`] pass `p` into `dst`
    /// (through `mo`), read from the rows of the image `dir` (CG's
    /// direction p) of shape `n`, zero-padded, each point read first
    /// taking CG's updates `u`: `x = x + a c p`, `p = r + d p`
    /// ([`Device::cg_update`]'s arithmetic), both written back.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn pad_update(
        &self,
        p: &Pass,
        dst: &mut CudaSlice<f32>,
        mo: Map,
        u: CgStep<'_, CudaSlice<f32>>,
        dir: &mut CudaSlice<f32>,
        n: [usize; 3],
        s: &CudaSlice<f64>,
    ) -> Result<()> {
        let [nx, ny, nz] = n;
        let mi = Map::rows(nx, nx);
        p.check_rows(LineKernel::PadUpdate, n, &mo, &mi)?;
        let len = 2 * nx * ny * nz;
        Error::check_len("pad_update direction", len, dir.len())?;
        Error::check_len("pad_update iterate", len, u.x.len())?;
        Error::check_len("pad_update residual", len, u.r.len())?;
        u.step.check(s.len())?;
        u.beta.check(s.len())?;
        let [step_num, step_den, floor] = slots_of(u.step);
        let [beta_num, beta_den, _] = slots_of(u.beta);
        let mut b = self.chained(&p.kernel);
        b.buf_mut(dst)
            .buf_mut(dir)
            .arg(&mo)
            .arg(&mi)
            .arg(&p.count)
            .buf(&p.twiddles)
            .buf_mut(u.x)
            .buf(u.r)
            .arg(&u.a)
            .buf(s)
            .arg(&step_num)
            .arg(&step_den)
            .arg(&beta_num)
            .arg(&beta_den)
            .arg(&floor);
        unsafe { b.launch(p.cfg) }
            .at("launch fft_lines_pad_update")
            .map(|_| ())
    }
}
