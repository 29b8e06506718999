//! The solvers: conjugate gradient on `(F^H F + lambda W^H W) rho = F^H D`
//! for the quadratic priors, and ADMM and PDHG for the sparse ones
//! (`lambda ||K rho||`, total variation and its directional form).
//!
//! As in BART, an operator that CG needs only offers its normal map, and
//! F^H F is never formed from F: it is the Toeplitz product
//! `crop(IFFT(FFT(Q) . FFT(zero-pad(rho))))` on the `(2N)^3` grid. A
//! [`Problem`] holds FFT(Q) and F^H D on the device, made once per run and
//! solved for any W and lambda (passes, sweeps). W^H W is the backend's
//! sparse stencil. The data term is a [`DataTerm`]: F^H F alone, or
//! SENSE's sum over coils around the one Toeplitz product (Q does not
//! depend on the coil), which recon-encoding builds with the operator
//! layer and shares among the GPUs of a host.
//! Everything here is written once against [`Backend`]. CG's scalars stay
//! on the device with its vectors, and the host reads them only now and
//! then, so a GPU runs the iterations back to back. Residuals reach the caller through a callback:
//! this crate never prints.

mod admm;
mod circulant;
mod pdhg;
mod problem;
mod solve;
mod sparse;
pub use admm::admm;
pub use circulant::{toeplitz_eigenvalues, Circulant, Gram, Preconditioner};
pub use pdhg::pdhg;
pub use problem::Problem;
pub use solve::{solve, Info, Params};
pub use sparse::{Sparse, SparseAlgorithm, SparseParams};

use recon_core::{Backend, CgStep, Complex, Error, Grid, Real, Result, Stencil};

/// A Hermitian positive (semi-)definite operator `A`, applied as `out = A x`.
pub trait Normal<B: Backend> {
    /// Length of the vectors it maps.
    fn len(&self) -> usize;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    fn apply(&mut self, backend: &B, out: &mut B::Vector, x: &B::Vector) -> Result<()>;
    /// `out = A x`, then `s[slot] = <x, A x>` (CG's `<p, A p>`): the map
    /// and the dot product, which an operator may fuse (the quadratic
    /// prior's last pass takes the product along).
    fn apply_dot(
        &mut self,
        backend: &B,
        out: &mut B::Vector,
        x: &B::Vector,
        s: &mut B::Scalars,
        slot: usize,
    ) -> Result<()> {
        self.apply(backend, out, x)?;
        backend.dot_re_to(s, slot, x, out)
    }
    /// `out = A x + a W^H W x`, then `s[slot] = <x, out>`: CG's map of a
    /// regularised problem and its dot. The Toeplitz product hands both to
    /// the backend ([`Backend::toeplitz_dot`]), which may fold a uniform
    /// W^H W into the product.
    #[allow(clippy::too_many_arguments)]
    fn apply_whw_dot(
        &mut self,
        backend: &B,
        out: &mut B::Vector,
        x: &B::Vector,
        a: f64,
        w: &B::Weights,
        s: &mut B::Scalars,
        slot: usize,
    ) -> Result<()> {
        self.apply(backend, out, x)?;
        backend.add_whw_dot_to(out, a, x, w, s, slot)
    }
    /// CG's updates `u` ([`Backend::cg_update`]: the iterate, and the
    /// direction `p` from the residual), then [`Normal::apply_dot`] of the
    /// new `p`: a product whose first pass reads p may make the updates
    /// there.
    fn update_apply_dot(
        &mut self,
        backend: &B,
        u: CgStep<'_, B::Vector>,
        out: &mut B::Vector,
        p: &mut B::Vector,
        s: &mut B::Scalars,
        slot: usize,
    ) -> Result<()> {
        u.apply(backend, p, s)?;
        self.apply_dot(backend, out, p, s, slot)
    }
    /// As [`Normal::update_apply_dot`], with [`Normal::apply_whw_dot`]'s map.
    #[allow(clippy::too_many_arguments)]
    fn update_apply_whw_dot(
        &mut self,
        backend: &B,
        u: CgStep<'_, B::Vector>,
        out: &mut B::Vector,
        p: &mut B::Vector,
        a: f64,
        w: &B::Weights,
        s: &mut B::Scalars,
        slot: usize,
    ) -> Result<()> {
        u.apply(backend, p, s)?;
        self.apply_whw_dot(backend, out, p, a, w, s, slot)
    }
}

/// A solver's data term `A = sum_c S_c^H F^H F S_c`: its normal map, and
/// what the solvers need to know of it. F^H F alone ([`Toeplitz`]) is one
/// coil of sensitivity 1; SENSE's sum over coils (recon-encoding's
/// `SenseTerm`, the operator layer's stack split over devices) has maps.
pub trait DataTerm<B: Backend>: Normal<B> + Send {
    /// The largest `sum_c |S_c(x)|^2` over the voxels (1 without maps):
    /// the data term's diagonal peaks at `max|Q|` times this.
    fn map_peak(&self) -> f64 {
        1.0
    }
    /// Whether it has coil maps (SENSE), rather than being F^H F alone.
    fn has_maps(&self) -> bool {
        false
    }
    /// Devices that share its work.
    fn devices(&self) -> usize {
        1
    }
}

/// Every method forwarded, so that a boxed term keeps its fused ones.
impl<B: Backend> Normal<B> for Box<dyn DataTerm<B> + '_> {
    fn len(&self) -> usize {
        (**self).len()
    }
    fn apply(&mut self, backend: &B, out: &mut B::Vector, x: &B::Vector) -> Result<()> {
        (**self).apply(backend, out, x)
    }
    fn apply_dot(
        &mut self,
        backend: &B,
        out: &mut B::Vector,
        x: &B::Vector,
        s: &mut B::Scalars,
        slot: usize,
    ) -> Result<()> {
        (**self).apply_dot(backend, out, x, s, slot)
    }
    fn apply_whw_dot(
        &mut self,
        backend: &B,
        out: &mut B::Vector,
        x: &B::Vector,
        a: f64,
        w: &B::Weights,
        s: &mut B::Scalars,
        slot: usize,
    ) -> Result<()> {
        (**self).apply_whw_dot(backend, out, x, a, w, s, slot)
    }
    fn update_apply_dot(
        &mut self,
        backend: &B,
        u: CgStep<'_, B::Vector>,
        out: &mut B::Vector,
        p: &mut B::Vector,
        s: &mut B::Scalars,
        slot: usize,
    ) -> Result<()> {
        (**self).update_apply_dot(backend, u, out, p, s, slot)
    }
    fn update_apply_whw_dot(
        &mut self,
        backend: &B,
        u: CgStep<'_, B::Vector>,
        out: &mut B::Vector,
        p: &mut B::Vector,
        a: f64,
        w: &B::Weights,
        s: &mut B::Scalars,
        slot: usize,
    ) -> Result<()> {
        (**self).update_apply_whw_dot(backend, u, out, p, a, w, s, slot)
    }
}

/// F^H F as a Toeplitz product with Q.
pub struct Toeplitz<B: Backend> {
    n: [usize; 3],
    /// FFT of Q, circularly shifted so that displacement 0 is at index 0.
    fq: B::Vector,
    /// A `(2N)^3` work vector.
    work: B::Vector,
    /// The product's FFT plans (or line passes), made once here.
    plan: B::ToeplitzPlan,
}

impl<B: Backend> Toeplitz<B> {
    /// Takes Q as computed by `recon-q` (displacement 0 at index N per axis)
    /// and precomputes its FFT on the device. Q must be Hermitian, `Q(-r) =
    /// conj Q(r)` (as every Q of real sample weights is): a device may keep
    /// only the real part of its FFT ([`Backend::fft_q`]).
    pub fn new(backend: &B, grid: &Grid, q: &[Complex<B::Real>]) -> Result<Self> {
        let d = grid.doubled();
        Error::check_len("Q (2N)^3", d[0] * d[1] * d[2], q.len())?;
        let fq = backend.fft_q(q, d)?;
        Ok(Toeplitz {
            n: grid.n,
            fq,
            work: backend.zeros(q.len())?,
            plan: backend.toeplitz_plan(grid.n)?,
        })
    }

    /// SENSE's term of one coil: `out = conj(s) . F^H F (s . x)`, or
    /// `out += ...` with `accumulate`; `scratch` two image-sized vectors.
    pub fn apply_coil(
        &mut self,
        backend: &B,
        out: &mut B::Vector,
        accumulate: bool,
        s: &B::Vector,
        x: &B::Vector,
        scratch: (&mut B::Vector, &mut B::Vector),
    ) -> Result<()> {
        backend.toeplitz_coil(
            &self.plan,
            out,
            accumulate,
            s,
            x,
            &self.fq,
            &mut self.work,
            scratch,
        )
    }

    /// The same product on another shard `to`, FFT(Q) copied from `from`
    /// (this one's backend).
    pub fn copied(&self, to: &B, from: &B) -> Result<Self> {
        let mut fq = to.zeros(from.len(&self.fq))?;
        to.transfer(&mut fq, from, &self.fq)?;
        Ok(Toeplitz {
            n: self.n,
            fq,
            work: to.zeros(from.len(&self.work))?,
            plan: to.toeplitz_plan(self.n)?,
        })
    }
}

/// One coil of sensitivity 1.
impl<B: Backend> DataTerm<B> for Toeplitz<B> {}

impl<B: Backend> Normal<B> for Toeplitz<B> {
    fn len(&self) -> usize {
        self.n.iter().product()
    }

    fn apply(&mut self, backend: &B, out: &mut B::Vector, x: &B::Vector) -> Result<()> {
        // out = crop(IFFT(FFT(Q) . FFT(pad(x))))
        backend.toeplitz(&self.plan, out, x, &self.fq, &mut self.work)
    }

    fn apply_dot(
        &mut self,
        backend: &B,
        out: &mut B::Vector,
        x: &B::Vector,
        s: &mut B::Scalars,
        slot: usize,
    ) -> Result<()> {
        // out = T x, s[slot] = <x, out>: the backend may take the dot in
        // the product's last pass
        let (plan, fq) = (&self.plan, &self.fq);
        backend.toeplitz_dot(plan, out, x, fq, &mut self.work, None, s, slot)
    }

    fn apply_whw_dot(
        &mut self,
        backend: &B,
        out: &mut B::Vector,
        x: &B::Vector,
        a: f64,
        w: &B::Weights,
        s: &mut B::Scalars,
        slot: usize,
    ) -> Result<()> {
        // out = T x + a W^H W x, s[slot] = <x, out>
        let (plan, fq) = (&self.plan, &self.fq);
        backend.toeplitz_dot(plan, out, x, fq, &mut self.work, Some((a, w)), s, slot)
    }

    fn update_apply_dot(
        &mut self,
        backend: &B,
        u: CgStep<'_, B::Vector>,
        out: &mut B::Vector,
        p: &mut B::Vector,
        s: &mut B::Scalars,
        slot: usize,
    ) -> Result<()> {
        // CG's updates, out = T p, s[slot] = <p, out>: the backend may make
        // the updates in the product's first pass
        let (plan, fq) = (&self.plan, &self.fq);
        backend.toeplitz_update_dot(plan, u, out, p, fq, &mut self.work, None, s, slot)
    }

    fn update_apply_whw_dot(
        &mut self,
        backend: &B,
        u: CgStep<'_, B::Vector>,
        out: &mut B::Vector,
        p: &mut B::Vector,
        a: f64,
        w: &B::Weights,
        s: &mut B::Scalars,
        slot: usize,
    ) -> Result<()> {
        let (plan, fq) = (&self.plan, &self.fq);
        let prior = Some((a, w));
        backend.toeplitz_update_dot(plan, u, out, p, fq, &mut self.work, prior, s, slot)
    }
}

/// `A + lambda W^H W`, around a data term `A` it borrows (F^H F as a
/// Toeplitz product, or SENSE's sum over coils).
pub struct Regularised<'t, B: Backend, A: Normal<B> = Toeplitz<B>> {
    pub data: &'t mut A,
    weights: B::Weights,
    /// Absolute lambda (already scaled by Q's peak).
    lambda: f64,
}

impl<'t, B: Backend, A: Normal<B>> Regularised<'t, B, A> {
    /// `lambda_abs` multiplies W^H W as is; see [`lambda_abs`] for the
    /// relative convention of the configs.
    pub fn new(backend: &B, data: &'t mut A, weights: &Stencil, lambda_abs: f64) -> Result<Self> {
        if !(lambda_abs.is_finite() && lambda_abs >= 0.0) {
            return Err(Error::Invalid {
                what: "lambda",
                reason: format!("must be finite and non-negative, got {lambda_abs}"),
            });
        }
        Error::check_len("edge weights grid", data.len(), weights.n.iter().product())?;
        Ok(Regularised {
            weights: backend.upload_weights(weights)?,
            data,
            lambda: lambda_abs,
        })
    }
}

impl<B: Backend, A: Normal<B>> Normal<B> for Regularised<'_, B, A> {
    fn len(&self) -> usize {
        self.data.len()
    }

    fn apply(&mut self, backend: &B, out: &mut B::Vector, x: &B::Vector) -> Result<()> {
        // out = A x + lambda W^H W x
        self.data.apply(backend, out, x)?;
        if self.lambda > 0.0 {
            backend.add_whw(out, self.lambda, x, &self.weights)?;
        }
        Ok(())
    }

    fn apply_dot(
        &mut self,
        backend: &B,
        out: &mut B::Vector,
        x: &B::Vector,
        s: &mut B::Scalars,
        slot: usize,
    ) -> Result<()> {
        // out = A x + lambda W^H W x, s[slot] = <x, out>, by the data
        // term (which may fold the prior into its own passes), as apply
        if self.lambda > 0.0 {
            let (a, w) = (self.lambda, &self.weights);
            self.data.apply_whw_dot(backend, out, x, a, w, s, slot)
        } else {
            self.data.apply_dot(backend, out, x, s, slot)
        }
    }

    fn update_apply_dot(
        &mut self,
        backend: &B,
        u: CgStep<'_, B::Vector>,
        out: &mut B::Vector,
        p: &mut B::Vector,
        s: &mut B::Scalars,
        slot: usize,
    ) -> Result<()> {
        // as apply_dot, the updates handed on with it
        if self.lambda > 0.0 {
            let (a, w) = (self.lambda, &self.weights);
            self.data
                .update_apply_whw_dot(backend, u, out, p, a, w, s, slot)
        } else {
            self.data.update_apply_dot(backend, u, out, p, s, slot)
        }
    }
}

/// The peak of |Q|: Q at displacement 0, `sum_m |phi(k_m)|^2` (by the
/// triangle inequality no |Q(y)| exceeds it), which is also every diagonal
/// entry of F^H F. Read at index N along each axis (0 along a 2-D grid's
/// flat z; see recon-q).
pub fn q_peak<T: Real>(grid: &Grid, q: &[Complex<T>]) -> Result<f64> {
    let d = grid.doubled();
    Error::check_len("Q (2N)^3", d[0] * d[1] * d[2], q.len())?;
    let [cx, cy, cz] = grid.lag_zero();
    let centre = (cz * d[1] + cy) * d[0] + cx;
    Ok(q[centre].norm().f64())
}

/// Converts the configs' relative lambda to an absolute one:
/// `lambda_abs = lambda_rel * max |Q|`, so that lambda_rel = 1 weighs W^H W
/// like the diagonal of F^H F, whatever the trajectory length or units.
pub fn lambda_abs<T: Real>(lambda_rel: f64, grid: &Grid, q: &[Complex<T>]) -> Result<f64> {
    Ok(lambda_rel * q_peak(grid, q)?)
}
