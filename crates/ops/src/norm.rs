//! The sparse priors' norms and their proximal maps, and the power
//! iteration that gives an operator's norm for step sizes.

use crate::testing::random;
use recon_core::{Backend, Complex, Error, GroupProx, Real, Result};

/// A prior's norm `||.||` (of `K x`), by its proximal maps.
pub trait Norm<B: Backend>: Send {
    /// The proximal map of `t ||.||`: `x = argmin_v t ||v|| + |v - x|^2 / 2`.
    fn prox(&mut self, backend: &B, x: &mut B::Vector, t: f64) -> Result<()>;

    /// The proximal map of the convex conjugate of `t ||.||` (whatever its
    /// step: the conjugate of a norm is an indicator): the projection onto
    /// the dual ball of radius `t`.
    fn prox_conjugate(&mut self, backend: &B, y: &mut B::Vector, t: f64) -> Result<()>;

    /// `||x||`, computed on the host (for reports and tests).
    fn value(&mut self, backend: &B, x: &B::Vector) -> Result<f64>;
}

/// The mixed norm `sum_i |v_i|`, with `v_i` the group of `components`
/// values of index `i` (component `a` at `a len / components + i`) and
/// `|.|` the Euclidean norm: isotropic total variation's norm for 3
/// components (of the gradient), the l1 norm for 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupNorm {
    pub components: usize,
}

impl<B: Backend> Norm<B> for GroupNorm {
    /// Soft thresholding of each group's norm.
    fn prox(&mut self, backend: &B, x: &mut B::Vector, t: f64) -> Result<()> {
        backend.group_prox(x, t, self.components, GroupProx::Shrink)
    }

    /// The projection of each group onto the ball of radius `t`.
    fn prox_conjugate(&mut self, backend: &B, y: &mut B::Vector, t: f64) -> Result<()> {
        backend.group_prox(y, t, self.components, GroupProx::Project)
    }

    fn value(&mut self, backend: &B, x: &B::Vector) -> Result<f64> {
        let mut host = vec![Complex::default(); backend.len(x)];
        backend.download(&mut host, x)?;
        recon_core::cpu::sparse::check_groups(host.len(), self.components)?;
        let len = host.len() / self.components;
        Ok((0..len)
            .map(|i| {
                (0..self.components)
                    .map(|a| host[a * len + i].norm_sqr().f64())
                    .sum::<f64>()
                    .sqrt()
            })
            .sum())
    }
}

/// The largest eigenvalue of the Hermitian positive semi-definite map
/// `normal` on vectors of length `len` (`||A||^2` for `normal = A^H A`), by
/// `iterations` steps of the power method from a fixed pseudo-random start.
/// The estimate approaches the eigenvalue from below; callers that need a
/// bound add a margin.
pub fn power_norm<B: Backend>(
    backend: &B,
    len: usize,
    iterations: usize,
    normal: &mut dyn FnMut(&mut B::Vector, &B::Vector) -> Result<()>,
) -> Result<f64> {
    let mut x = backend.upload(&random::<B::Real>(len, 0x5eed_0f9e))?;
    let mut y = backend.zeros(len)?;
    let mut estimate = 0.0;
    for _ in 0..iterations.max(1) {
        // x = x / |x|; y = A x; estimate = <x, A x>
        let xx = backend.dot_re(&x, &x)?;
        if !(xx.is_finite() && xx > 0.0) {
            return Ok(0.0);
        }
        backend.scale(&mut x, 1.0 / xx.sqrt())?;
        normal(&mut y, &x)?;
        estimate = backend.dot_re(&x, &y)?;
        if !estimate.is_finite() {
            return Err(Error::Invalid {
                what: "power iteration",
                reason: format!("the operator's output is not finite ({estimate})"),
            });
        }
        std::mem::swap(&mut x, &mut y);
    }
    Ok(estimate)
}
