//! What the sparse priors' solvers share: the prior, their settings and the
//! residual bookkeeping.
//!
//! Both solve `min_x 1/2 x^H A x - Re <b, x> + lambda ||K x||`, i.e.
//! `1/2 ||F x - D||^2 + lambda ||K x||` with `A = F^H F` (a [`Normal`],
//! the Toeplitz product or SENSE's sum), `b = F^H D`, `K` a linear
//! operator (the gradient; the directional one; the identity for the
//! wavelet prior, whose transform sits in its norm) and `||.||` a
//! [`Norm`]. Neither ever applies F itself.

use crate::Gram;
use crate::Normal;
use recon_core::{Backend, Error, Result};
use recon_ops::{LinearOp, Norm};

/// The prior `lambda ||K x||`.
pub struct Sparse<'a, B: Backend> {
    /// `K`: images to fields.
    pub op: &'a mut dyn LinearOp<B>,
    pub norm: &'a mut dyn Norm<B>,
    /// Absolute lambda.
    pub lambda: f64,
    /// `K^H K` as ADMM's circulant preconditioner models it.
    pub gram: Gram,
}

impl<B: Backend> Sparse<'_, B> {
    /// The checks both solvers start with: the prior's and the settings',
    /// and the lengths of `b` and `x` against the data term's. Returns the
    /// images' length `n` and the fields' `m`.
    pub(crate) fn check_all<A: Normal<B>>(
        &self,
        what: &'static str,
        backend: &B,
        a: &A,
        x: &B::Vector,
        b: &B::Vector,
        params: &SparseParams,
    ) -> Result<(usize, usize)> {
        self.check(a)?;
        params.check()?;
        let n = a.len();
        Error::check_len(what, n, backend.len(b))?;
        Error::check_len(what, n, backend.len(x))?;
        Ok((n, self.op.shape()[0]))
    }

    /// Fails unless lambda is finite and non-negative and K takes images of
    /// the data term's length.
    fn check<A: Normal<B>>(&self, a: &A) -> Result<()> {
        if !(self.lambda.is_finite() && self.lambda >= 0.0) {
            return Err(Error::Invalid {
                what: "lambda",
                reason: format!("must be finite and non-negative, got {}", self.lambda),
            });
        }
        Error::check_len("prior operator's input", a.len(), self.op.shape()[1])
    }
}

/// The sparse priors' algorithms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SparseAlgorithm {
    Admm,
    Pdhg,
}

/// Settings of ADMM and PDHG.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SparseParams {
    /// Maximum (outer) iterations.
    pub iterations: usize,
    /// Stop once both relative residuals, primal and dual, fall to this;
    /// 0 runs every iteration.
    pub tolerance: f64,
    /// ADMM: CG iterations per x-update (warm-started).
    pub inner: usize,
    /// ADMM: the penalty rho relative to `scale` (the data term's largest
    /// diagonal entry), where it starts; residual balancing adapts it.
    pub rho: f64,
    /// ADMM: over-relaxation, in [1, 2); 1 is plain ADMM.
    pub relaxation: f64,
    /// PDHG: power iterations for the norms of A and K.
    pub power_iterations: usize,
}

impl Default for SparseParams {
    fn default() -> Self {
        SparseParams {
            iterations: 60,
            tolerance: 1e-3,
            inner: 4,
            rho: 0.1,
            relaxation: 1.6,
            power_iterations: 30,
        }
    }
}

impl SparseParams {
    /// Checks the ranges named in the fields' docs.
    pub fn check(&self) -> Result<()> {
        let bad = |what: &'static str, reason: String| Err(Error::Invalid { what, reason });
        if !(self.tolerance.is_finite() && self.tolerance >= 0.0) {
            return bad(
                "tolerance",
                format!("must be finite and non-negative, got {}", self.tolerance),
            );
        }
        if self.inner == 0 {
            return bad(
                "inner",
                "ADMM needs at least one CG iteration per step".into(),
            );
        }
        if !(self.rho.is_finite() && self.rho > 0.0) {
            return bad(
                "rho",
                format!("must be finite and positive, got {}", self.rho),
            );
        }
        let a = self.relaxation;
        if !(a.is_finite() && (1.0..2.0).contains(&a)) {
            return bad("relaxation", format!("must lie in [1, 2), got {a}"));
        }
        Ok(())
    }
}

/// `|x|`, by the backend's dot product.
pub(crate) fn norm<B: Backend>(backend: &B, x: &B::Vector) -> Result<f64> {
    Ok(backend.dot_re(x, x)?.sqrt())
}

/// `num / den`; where `den` is 0, 0 for `num = 0` (a fixed point at 0, e.g.
/// lambda so large that the image is 0) and 1 otherwise (not converged).
pub(crate) fn relative(num: f64, den: f64) -> f64 {
    if den > 0.0 {
        num / den
    } else if num > 0.0 {
        1.0
    } else {
        0.0
    }
}

/// Records one iteration's relative residuals in `info` (their larger one),
/// fails on non-finite ones, and says whether both are at the tolerance.
pub(crate) fn record(
    info: &mut crate::Info,
    what: &'static str,
    it: usize,
    [primal, dual]: [f64; 2],
    tolerance: f64,
    on_iteration: &mut dyn FnMut(usize, f64),
) -> Result<bool> {
    if !(primal.is_finite() && dual.is_finite()) {
        return Err(Error::Invalid {
            what,
            reason: format!(
                "the residuals are not finite at iteration {it} (primal {primal}, dual {dual}): \
                 the computation diverged or overflowed"
            ),
        });
    }
    let worst = primal.max(dual);
    info.iterations = it;
    info.relative_residual = worst;
    info.residuals.push(worst);
    on_iteration(it, worst);
    Ok(worst <= tolerance)
}
