//! The NUFFT's execution on one GPU, once a plan has its points: spreading
//! onto the fine grid, interpolation from it, the fine grid's FFT and the
//! kernel's corrections; type 1, its adjoint and the convolution.

use super::{Correction, CudaNufft, Fft, Interp, Method, Step, INTERP_THREADS, SPREAD_THREADS};
use crate::device::Device;
use crate::error::Ctx;
use cudarc::driver::{CudaSlice, PushKernelArg};
use recon_core::{Error, Result};
use std::sync::atomic::Ordering;

impl Device {
    /// Spreads `c` (one value per point) onto the zeroed fine grid.
    pub(super) fn nufft_spread(
        &self,
        p: &CudaNufft,
        fine: &mut CudaSlice<f32>,
        c: &CudaSlice<f32>,
    ) -> Result<()> {
        self.stream.memset_zeros(fine).at("zero the fine grid")?;
        if p.points == 0 {
            return Ok(());
        }
        let w = p.layout.kernel.width;
        let beta = p.layout.kernel.beta as f32;
        match p.method {
            Method::Shared(step, bytes) => {
                let maxsub = p.maxsub as i32;
                let f = self.nufft_kernel(step, w)?;
                let mut b = self.stream.launch_builder(&f);
                b.arg(fine).arg(c);
                p.point_args(&mut b);
                b.arg(&p.sub)
                    .arg(&p.sub_first)
                    .arg(&maxsub)
                    .arg(&beta)
                    .arg(&p.geometry);
                unsafe { b.launch(p.per_subproblem(SPREAD_THREADS, bytes)) }
                    .at(&format!("launch {}", step.name(w)))?;
            }
            Method::Global => {
                let m = p.points as i64;
                let f = self.nufft_kernel(Step::SpreadGlobal, w)?;
                let mut b = self.stream.launch_builder(&f);
                b.arg(fine).arg(c);
                p.point_args(&mut b);
                b.arg(&m).arg(&beta).arg(&p.geometry);
                unsafe { b.launch(self.cfg(p.points)) }.at("launch nufft_spread_global")?;
            }
        }
        Ok(())
    }

    /// `out` (one value per point) = the fine grid interpolated at the points.
    pub(super) fn nufft_interpolate(
        &self,
        p: &CudaNufft,
        out: &mut CudaSlice<f32>,
        fine: &CudaSlice<f32>,
    ) -> Result<()> {
        if p.points == 0 {
            return Ok(());
        }
        let w = p.layout.kernel.width;
        let (beta, m) = (p.layout.kernel.beta as f32, p.points as i64);
        match p.interp {
            Interp::Shared { bytes, limit } => {
                let step = Step::InterpolateShared;
                let f = self.nufft_kernel(step, w)?;
                if !p.interp_allowed.load(Ordering::Relaxed) {
                    self.allow_shared(&f, limit, "interpolation")?;
                    p.interp_allowed.store(true, Ordering::Relaxed);
                }
                let mut b = self.stream.launch_builder(&f);
                b.arg(out).arg(fine);
                p.point_args(&mut b);
                b.arg(&p.sub).arg(&p.sub_first).arg(&beta).arg(&p.geometry);
                unsafe { b.launch(p.per_subproblem(INTERP_THREADS, bytes)) }
                    .at(&format!("launch {}", step.name(w)))?;
            }
            Interp::Global => {
                let f = self.nufft_kernel(Step::Interpolate, w)?;
                let mut b = self.stream.launch_builder(&f);
                b.arg(out).arg(fine);
                p.point_args(&mut b);
                b.arg(&m).arg(&beta).arg(&p.geometry);
                unsafe { b.launch(self.cfg(p.points)) }.at("launch nufft_interpolate")?;
            }
        }
        Ok(())
    }

    pub(super) fn check_lengths(&self, p: &CudaNufft, modes: usize, points: usize) -> Result<()> {
        Error::check_len("NUFFT modes", 2 * p.modes_len(), modes)?;
        Error::check_len("NUFFT values (one per point)", 2 * p.points, points)
    }

    /// Type 1: `out[k] = sum_m c[m] exp(s i k . x[m])`.
    pub(crate) fn nufft_type1(
        &self,
        p: &CudaNufft,
        out: &mut CudaSlice<f32>,
        c: &CudaSlice<f32>,
    ) -> Result<()> {
        self.check_lengths(p, out.len(), c.len())?;
        let mut fine = p.fine.lock().expect("NUFFT fine grid poisoned");
        self.nufft_spread(p, &mut fine, c)?;
        self.type1_from_fine(p, out, &mut fine, None)
    }

    /// Type 1's steps after spreading, from the spread `fine` grid into
    /// `out`. With `coil = (s, accumulate)` on the line FFTs, SENSE's term
    /// of one coil instead, `out (+)= conj(s) . type1`: the map rides on
    /// the last pass's write (the cuFFT path has no such pass; see
    /// coils.rs).
    pub(super) fn type1_from_fine(
        &self,
        p: &CudaNufft,
        out: &mut CudaSlice<f32>,
        fine: &mut CudaSlice<f32>,
        coil: Option<(&CudaSlice<f32>, bool)>,
    ) -> Result<()> {
        let [cx, cy, cz] = &p.correction;
        match &p.fft {
            Fft::Lines(fft) => {
                // x, then y where x is a mode, then z into out.
                let [x, y, z] = p.axes();
                let s = p.layout.sign as f32;
                self.lines(&fft.x, fine, None, x.modes.times(self, cx), x.grid, s)?;
                self.lines(&fft.y, fine, None, y.modes.times(self, cy), y.grid, s)?;
                let (pass, modes) = match coil {
                    None => (&fft.z, z.modes.times(self, cz)),
                    Some((map, add)) => (&fft.z_coil, z.modes.times(self, cz).coil(self, map, add)),
                };
                self.lines(pass, out, Some(fine), modes, z.grid, s)
            }
            Fft::Cufft(plan) => {
                if coil.is_some() {
                    return Err(Error::Invalid {
                        what: "GPU type 1",
                        reason: "the cuFFT path folds no coil map".into(),
                    });
                }
                self.fft_exec(plan, fine, p.layout.sign)?;
                self.corrections(p, Correction::Deconvolve, out, fine, p.modes_len())
            }
        }
    }

    /// The adjoint of type 1: `out[m] = sum_k f[k] exp(-s i k . x[m])`.
    pub(crate) fn nufft_type1_adjoint(
        &self,
        p: &CudaNufft,
        out: &mut CudaSlice<f32>,
        f: &CudaSlice<f32>,
    ) -> Result<()> {
        self.check_lengths(p, f.len(), out.len())?;
        let mut fine = p.fine.lock().expect("NUFFT fine grid poisoned");
        let [cx, cy, cz] = &p.correction;
        match &p.fft {
            Fft::Lines(fft) => {
                // z from f, then y where x is a mode, then x over every row.
                let [x, y, z] = p.axes();
                let s = -p.layout.sign as f32;
                self.lines(
                    &fft.z,
                    &mut fine,
                    Some(f),
                    z.grid,
                    z.modes.times(self, cz),
                    s,
                )?;
                self.lines(&fft.y, &mut fine, None, y.grid, y.modes.times(self, cy), s)?;
                self.lines(&fft.x, &mut fine, None, x.grid, x.modes.times(self, cx), s)?;
            }
            Fft::Cufft(plan) => {
                self.corrections(p, Correction::Amplify, &mut fine, f, p.fine_len())?;
                self.fft_exec(plan, &mut fine, -p.layout.sign)?;
            }
        }
        self.nufft_interpolate(p, out, &fine)
    }

    /// `kernel` (deconvolve: modes from the fine grid, or amplify: the fine
    /// grid from modes) with the corrections per axis, over `threads`
    /// outputs.
    pub(super) fn corrections(
        &self,
        p: &CudaNufft,
        kernel: Correction,
        out: &mut CudaSlice<f32>,
        x: &CudaSlice<f32>,
        threads: usize,
    ) -> Result<()> {
        let [mx, my, mz] = p.layout.modes.map(|v| v as i32);
        let [cx, cy, cz] = &p.correction;
        let (f, name) = self.nufft()?.correction(kernel);
        let mut b = self.stream.launch_builder(f);
        b.arg(out)
            .arg(x)
            .arg(cx)
            .arg(cy)
            .arg(cz)
            .arg(&mx)
            .arg(&my)
            .arg(&mz)
            .arg(&p.geometry);
        unsafe { b.launch(self.cfg(threads)) }
            .at(&format!("launch {name}"))
            .map(|_| ())
    }

    /// Spread then interpolate, without the FFT.
    pub(crate) fn nufft_convolve(
        &self,
        p: &CudaNufft,
        out: &mut CudaSlice<f32>,
        c: &CudaSlice<f32>,
    ) -> Result<()> {
        Error::check_len("NUFFT strengths (one per point)", 2 * p.points, c.len())?;
        Error::check_len("NUFFT outputs (one per point)", 2 * p.points, out.len())?;
        let mut fine = p.fine.lock().expect("NUFFT fine grid poisoned");
        self.nufft_spread(p, &mut fine, c)?;
        self.nufft_interpolate(p, out, &fine)
    }
}
