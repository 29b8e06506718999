//! The encoding operator F of a NUFFT plan as a [`LinearOp`]: images (one
//! value per voxel) to samples (one per trajectory point), so that it
//! composes with the operator layer's maps, stacks and sums (SENSE is the
//! stack over coils of `F S_c`). Its normal map is the Toeplitz product
//! with Q where one is given, as BART's normal replaces `A^H A`; after a
//! diagonal (a coil's map) the map rides along with the product's first
//! read and last write ([`LinearOp::normal_between`]: on the GPU the fused
//! passes of SENSE), and the sum over coils adds in place.

use crate::Plan;
use recon_cg::{Normal, Toeplitz};
use recon_core::{Complex, Error, Real, Result};
use recon_nufft::NufftBackend;
use recon_ops::LinearOp;

/// `F x = phi . type1^H(x)`, `F^H y = type1(phi . y)`, on a plan's NUFFT.
pub struct Encoding<'p, 'b, B: NufftBackend> {
    plan: &'p Plan<'b, B>,
    /// `phi(k_m)`, one per sample, as complex values on the device.
    phi: B::Vector,
    /// One value per sample.
    work: B::Vector,
    /// `F^H F` by its Toeplitz product, where Q was given.
    toeplitz: Option<Toeplitz<B>>,
}

impl<'p, 'b, B: NufftBackend> Encoding<'p, 'b, B> {
    /// The operator of `plan`, which must use the NUFFT engine; with `q` (as
    /// recon-q computes it for this plan), its normal map is the Toeplitz
    /// product, else the adjoint after the forward map.
    pub fn new(backend: &B, plan: &'p Plan<'b, B>, q: Option<&[Complex<B::Real>]>) -> Result<Self> {
        let Some((_, phi)) = plan.nufft() else {
            return Err(Error::Invalid {
                what: "encoding operator",
                reason: "it needs the NUFFT engine (the exact engine has no F on the device)"
                    .into(),
            });
        };
        let phi: Vec<Complex<B::Real>> = phi
            .iter()
            .map(|&p| Complex::new(B::Real::of(p), B::Real::of(0.0)))
            .collect();
        let toeplitz = q
            .map(|q| Toeplitz::new(backend, plan.grid(), q))
            .transpose()?;
        Ok(Encoding {
            plan,
            work: backend.zeros(phi.len())?,
            phi: backend.upload(&phi)?,
            toeplitz,
        })
    }

    /// The plan's NUFFT (borrowing the plan, not the operator).
    fn nufft(&self) -> &'p B::Nufft {
        let plan: &'p Plan<'b, B> = self.plan;
        plan.nufft().expect("checked in new").0
    }
}

impl<B: NufftBackend> LinearOp<B> for Encoding<'_, '_, B> {
    fn shape(&self) -> [usize; 2] {
        [self.plan.traj().len(), self.plan.grid().len()]
    }

    fn forward(&mut self, backend: &B, out: &mut B::Vector, x: &B::Vector) -> Result<()> {
        let [m, n] = self.shape();
        Error::check_len("encoding input (one value per voxel)", n, backend.len(x))?;
        Error::check_len(
            "encoding output (one value per sample)",
            m,
            backend.len(out),
        )?;
        // out = phi . type1^H(x)
        backend.nufft_type1_adjoint(self.nufft(), out, x)?;
        backend.mul(out, &self.phi)
    }

    fn adjoint(&mut self, backend: &B, out: &mut B::Vector, y: &B::Vector) -> Result<()> {
        let [m, n] = self.shape();
        Error::check_len(
            "encoding adjoint input (one value per sample)",
            m,
            backend.len(y),
        )?;
        Error::check_len(
            "encoding adjoint output (one value per voxel)",
            n,
            backend.len(out),
        )?;
        // out = type1(phi . y)
        backend.copy(&mut self.work, y)?;
        backend.mul(&mut self.work, &self.phi)?;
        backend.nufft_type1(self.nufft(), out, &self.work)
    }

    fn normal(&mut self, backend: &B, out: &mut B::Vector, x: &B::Vector) -> Result<()> {
        let n = self.shape()[1];
        Error::check_len("encoding normal input", n, backend.len(x))?;
        Error::check_len("encoding normal output", n, backend.len(out))?;
        match &mut self.toeplitz {
            // out = F^H F x by the Toeplitz product
            Some(t) => t.apply(backend, out, x),
            None => {
                // out = type1(phi . phi . type1^H(x))
                let nufft = self.nufft();
                backend.nufft_type1_adjoint(nufft, &mut self.work, x)?;
                backend.mul(&mut self.work, &self.phi)?;
                backend.mul(&mut self.work, &self.phi)?;
                backend.nufft_type1(nufft, out, &self.work)
            }
        }
    }

    fn normal_between(
        &mut self,
        backend: &B,
        out: &mut B::Vector,
        accumulate: bool,
        s: &B::Vector,
        x: &B::Vector,
        scratch: (&mut B::Vector, &mut B::Vector),
    ) -> Result<()> {
        let n = self.shape()[1];
        Error::check_len("encoding normal input", n, backend.len(x))?;
        Error::check_len("encoding normal output", n, backend.len(out))?;
        Error::check_len("coil map (one value per voxel)", n, backend.len(s))?;
        match &mut self.toeplitz {
            // out (+)= S^H T (S x), the map folded into T's passes
            Some(t) => t.apply_coil(backend, out, accumulate, s, x, scratch),
            // y = S x, F^H F y by the NUFFT, out (+)= S^H (...)
            None => {
                recon_ops::normal_between_by_pieces(self, backend, out, accumulate, s, x, scratch)
            }
        }
    }
}
