//! The plans that operators keep ([`Backend::Fft`], [`Backend::ToeplitzPlan`]):
//! a cuFFT plan of one shape, and the Toeplitz product's line passes where
//! its shape has line kernels, else a cuFFT plan of the `2n` grid for the
//! product by pieces. Each is made on one GPU, by its stream, and runs
//! there only.

use crate::device::Device;
use crate::toeplitz::Passes;
use crate::CudaBackend;
use cudarc::cufft::CudaFft;
use cudarc::driver::CudaSlice;
use recon_core::{CgStep, Direction, Error, Result};

/// A cuFFT plan for 3-D FFTs of one shape.
pub struct CudaFft3 {
    shape: [usize; 3],
    plan: CudaFft,
}

/// The Toeplitz product's plan for one image shape.
pub struct CudaToeplitz {
    n: [usize; 3],
    how: How,
}

enum How {
    /// The pruned, fused passes (toeplitz.rs).
    Fused(Box<crate::toeplitz::Passes>),
    /// Pad, cuFFT, product, cuFFT, crop.
    Pieces(CudaFft3),
}

impl CudaBackend {
    pub(crate) fn fft_plan_on(dev: &Device, shape: [usize; 3]) -> Result<CudaFft3> {
        Ok(CudaFft3 {
            shape,
            plan: dev.fft_plan(shape)?,
        })
    }

    pub(crate) fn fft3_by(
        &self,
        plan: &CudaFft3,
        x: &mut CudaSlice<f32>,
        dir: Direction,
    ) -> Result<()> {
        Error::check_len("fft3", 2 * plan.shape.iter().product::<usize>(), x.len())?;
        self.dev0().fft3(&plan.plan, x, plan.shape, dir)
    }

    /// The fused passes where `n`'s doubled lengths have line kernels and
    /// `options.pruned_toeplitz` allows them; else a cuFFT plan of `2n`.
    pub(crate) fn toeplitz_plan_for(&self, n: [usize; 3]) -> Result<CudaToeplitz> {
        let dev = self.dev0();
        // The fused passes are 3-D; a flat z (2-D grid) takes the pieces.
        let fused = match self.options.pruned_toeplitz && n[2] > 1 {
            true => dev.passes(n)?,
            false => None,
        };
        let how = match fused {
            Some(p) => How::Fused(Box::new(p)),
            None => How::Pieces(Self::fft_plan_on(dev, recon_core::doubled(n))?),
        };
        Ok(CudaToeplitz { n, how })
    }

    /// The Toeplitz product by `plan`; with `coil = (s, accumulate)` one
    /// coil's SENSE term `out (+)= conj(s) . T(s . x)`, `scratch` used by
    /// the product by pieces only.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn toeplitz_by(
        &self,
        plan: &CudaToeplitz,
        out: &mut CudaSlice<f32>,
        x: &CudaSlice<f32>,
        fq: &CudaSlice<f32>,
        work: &mut CudaSlice<f32>,
        coil: Option<(&CudaSlice<f32>, bool)>,
        scratch: Option<(&mut CudaSlice<f32>, &mut CudaSlice<f32>)>,
    ) -> Result<()> {
        let n = plan.n;
        // The fused product's FFT(Q) is real (Device::fft_q); the pieces'
        // complex.
        let fused = matches!(plan.how, How::Fused(_));
        check_toeplitz(
            [("Toeplitz input", x), ("Toeplitz output", out)],
            fq,
            fused,
            work,
            n,
        )?;
        if let Some((s, _)) = coil {
            check_toeplitz([("coil map", s)], fq, fused, work, n)?;
        }
        match (&plan.how, coil, scratch) {
            (How::Fused(p), coil, _) => self.dev0().toeplitz(p, out, x, fq, work, n, coil),
            (How::Pieces(fft), None, _) => {
                recon_core::toeplitz_by_pieces(self, fft, out, x, fq, work, n)
            }
            (How::Pieces(_), Some((s, accumulate)), Some(scratch)) => {
                recon_core::toeplitz_coil_by_pieces(
                    self, plan, out, accumulate, s, x, fq, work, scratch,
                )
            }
            (How::Pieces(_), Some(_), None) => unreachable!("a coil's product has its scratch"),
        }
    }

    /// [`recon_core::Backend::toeplitz_dot`] by `plan`: by the fused
    /// passes, the dot taken in the last and the prior folded into them
    /// ([`Device::toeplitz_dot`]), where the plan has them and there is no
    /// prior or the uniform stencil; else the product, then the prior's
    /// pass (or the dot alone).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn toeplitz_dot_by(
        &self,
        plan: &CudaToeplitz,
        out: &mut CudaSlice<f32>,
        x: &CudaSlice<f32>,
        fq: &CudaSlice<f32>,
        work: &mut CudaSlice<f32>,
        prior: Option<(f64, &crate::CudaWeights)>,
        s: &mut CudaSlice<f64>,
        slot: usize,
    ) -> Result<()> {
        match self.fused_dot(plan, out, x, fq, work, prior, s, slot)? {
            Some((p, a)) => self
                .dev0()
                .toeplitz_dot(p, out, x, fq, work, plan.n, a, s, slot),
            None => {
                recon_core::toeplitz_dot_by_pieces(self, plan, out, x, fq, work, prior, s, slot)
            }
        }
    }

    /// [`recon_core::Backend::toeplitz_update_dot`] by `plan`: CG's updates
    /// made in the fused product's first pass
    /// ([`Device::toeplitz_update_dot`]) where [`CudaBackend::toeplitz_dot_by`]
    /// takes the fused passes; else the updates' own pass, then the
    /// product by pieces.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn toeplitz_update_dot_by(
        &self,
        plan: &CudaToeplitz,
        u: CgStep<'_, CudaSlice<f32>>,
        out: &mut CudaSlice<f32>,
        dir: &mut CudaSlice<f32>,
        fq: &CudaSlice<f32>,
        work: &mut CudaSlice<f32>,
        prior: Option<(f64, &crate::CudaWeights)>,
        s: &mut CudaSlice<f64>,
        slot: usize,
    ) -> Result<()> {
        match self.fused_dot(plan, out, dir, fq, work, prior, s, slot)? {
            Some((p, a)) => {
                let dev = self.dev0();
                dev.toeplitz_update_dot(p, u, out, dir, fq, work, plan.n, a, s, slot)
            }
            None => {
                u.apply(self, dir, s)?;
                recon_core::toeplitz_dot_by_pieces(self, plan, out, dir, fq, work, prior, s, slot)
            }
        }
    }

    /// The fused passes of `plan` and the folded prior's weight (0: none),
    /// with the vectors checked, where CG's map and dot take them: the plan
    /// has them, and there is no prior or the uniform stencil. `None`: by
    /// the pieces.
    #[allow(clippy::too_many_arguments)]
    fn fused_dot<'p>(
        &self,
        plan: &'p CudaToeplitz,
        out: &CudaSlice<f32>,
        x: &CudaSlice<f32>,
        fq: &CudaSlice<f32>,
        work: &CudaSlice<f32>,
        prior: Option<(f64, &crate::CudaWeights)>,
        s: &CudaSlice<f64>,
        slot: usize,
    ) -> Result<Option<(&'p Passes, f32)>> {
        let How::Fused(p) = &plan.how else {
            return Ok(None);
        };
        let a = match prior {
            None => 0.0,
            Some((a, w)) if w.is_uniform() => {
                w.check(x, out)?;
                if w.n != plan.n {
                    return Err(Error::Invalid {
                        what: "W^H W",
                        reason: format!(
                            "its grid {:?} is not the Toeplitz product's {:?}",
                            w.n, plan.n
                        ),
                    });
                }
                a as f32
            }
            Some(_) => return Ok(None),
        };
        check_toeplitz(
            [("Toeplitz input", x), ("Toeplitz output", out)],
            fq,
            true,
            work,
            plan.n,
        )?;
        Error::check_index("solver scalars", slot, s.len())?;
        Ok(Some((p, a)))
    }
}

/// Lengths of the Toeplitz product's vectors for images of shape `n`;
/// FFT(Q) real where `real_fq`.
fn check_toeplitz<const K: usize>(
    images: [(&'static str, &CudaSlice<f32>); K],
    fq: &CudaSlice<f32>,
    real_fq: bool,
    work: &CudaSlice<f32>,
    n: [usize; 3],
) -> Result<()> {
    let len: usize = n.iter().product();
    let big: usize = recon_core::doubled(n).iter().product();
    for (what, v) in images {
        Error::check_len(what, 2 * len, v.len())?;
    }
    let fq_len = if real_fq { big } else { 2 * big };
    Error::check_len("FFT(Q)", fq_len, fq.len())?;
    Error::check_len("Toeplitz work", 2 * big, work.len())
}
