//! ADMM for the sparse priors, its x-update CG on the normal equations.
//!
//! Splitting `z = K x` (Boyd et al., Found. Trends Mach. Learn. 2011, in
//! the scaled form), an iteration is
//!
//! ```text
//! x = argmin 1/2 x^H A x - Re <b, x> + rho/2 |K x - z + u|^2
//!   : (A + rho K^H K) x = b + rho K^H (z - u), by a few CG iterations from
//!     the last x (the Toeplitz product and K's own normal map)
//! z = prox_{lambda/rho ||.||}(K x + u)
//! u = u + K x - z
//! ```
//!
//! with over-relaxation (Boyd et al. 3.4.3): `K x` in the z- and u-updates
//! is `a K x + (1 - a) z_old`, `a` in [1, 2) ([`SparseParams::relaxation`]).
//!
//! The x-updates keep CG's residual `r = rhs - (A + rho K^H K) x` from one
//! to the next (`r += rhs_new - rhs_old`, less `(rho_new - rho_old) K^H K
//! x` when rho moved), so a warm start costs no product with A; it is
//! recomputed every [`REFRESH`] iterations against the drift of rounding.
//! It stops once the primal residual `|K x - z|` and the dual one
//! `rho |K^H (z - z_old)|`, relative to `max(|K x|, |z|)` and
//! `rho |K^H u|`, are at the tolerance. rho starts at a multiple of the data
//! term's diagonal and follows residual balancing (doubled or halved when
//! one relative residual exceeds the other tenfold, u rescaled with it).

use crate::solve::{iterate, Workspace};
use crate::sparse::{norm, record, relative, Sparse, SparseParams};
use crate::{Circulant, Info, Normal, Params, Preconditioner};
use recon_core::{Backend, Error, Result};
use recon_ops::LinearOp;

/// Outer iterations between exact recomputations of the x-update's
/// residual.
pub const REFRESH: usize = 10;

/// `A + rho K^H K`.
struct Augmented<'a, B: Backend, A> {
    data: &'a mut A,
    op: &'a mut dyn LinearOp<B>,
    rho: f64,
    work: B::Vector,
}

impl<B: Backend, A: Normal<B>> Normal<B> for Augmented<'_, B, A> {
    fn len(&self) -> usize {
        self.data.len()
    }

    fn apply(&mut self, backend: &B, out: &mut B::Vector, x: &B::Vector) -> Result<()> {
        // out = A x + rho K^H K x
        self.data.apply(backend, out, x)?;
        self.op.normal(backend, &mut self.work, x)?;
        backend.axpy(out, self.rho, &self.work)
    }
}

/// ADMM from the given `x`; `scale` is the data term's largest diagonal
/// entry (rho's unit); `pre` preconditions the x-updates' CG (see
/// [`Circulant`]). `on_iteration(i, r)` gets the larger relative residual
/// after each iteration.
#[allow(clippy::too_many_arguments)]
pub fn admm<B: Backend, A: Normal<B>>(
    backend: &B,
    a: &mut A,
    prior: Sparse<'_, B>,
    x: &mut B::Vector,
    b: &B::Vector,
    scale: f64,
    mut pre: Option<&mut Circulant<B>>,
    params: &SparseParams,
    on_iteration: &mut dyn FnMut(usize, f64),
) -> Result<Info> {
    let (n, m) = prior.check_all("ADMM's image (F^H D, x)", backend, a, x, b, params)?;
    if !(scale.is_finite() && scale > 0.0) {
        return Err(Error::Invalid {
            what: "ADMM",
            reason: format!("the data term's scale must be finite and positive, got {scale}"),
        });
    }
    let Sparse {
        op,
        norm: group,
        lambda,
        gram,
    } = prior;
    let mut rho = params.rho * scale;
    // z = K x, u = 0
    let mut z = backend.zeros(m)?;
    op.forward(backend, &mut z, x)?;
    let mut u = backend.zeros(m)?;
    let (mut kx, mut z_old, mut w) = (backend.zeros(m)?, backend.zeros(m)?, backend.zeros(m)?);
    let (mut rhs, mut t) = (backend.zeros(n)?, backend.zeros(n)?);
    let mut aug = Augmented {
        data: a,
        op,
        rho,
        work: backend.zeros(n)?,
    };
    let inner = Params {
        iterations: params.inner,
        tolerance: 0.0,
    };
    let mut info = Info {
        iterations: 0,
        relative_residual: 0.0,
        residuals: Vec::new(),
    };
    let mut ws = Workspace::new(backend, n, pre.is_some())?;
    // r = rhs - (A + rho K^H K) x, carried between x-updates
    let (mut r, mut rhs_old, mut rho_old) = (backend.zeros(n)?, backend.zeros(n)?, rho);
    for it in 1..=params.iterations {
        // rhs = b + rho K^H (z - u)
        backend.copy(&mut w, &z)?;
        backend.axpy(&mut w, -1.0, &u)?;
        aug.op.adjoint(backend, &mut t, &w)?;
        backend.copy(&mut rhs, b)?;
        backend.axpy(&mut rhs, rho, &t)?;
        aug.rho = rho;
        if it == 1 || it % REFRESH == 0 {
            // r = rhs - (A + rho K^H K) x (from x = 0, the usual start: rhs)
            backend.copy(&mut r, &rhs)?;
            if it > 1 || backend.dot_re(x, x)? != 0.0 {
                aug.apply(backend, &mut t, x)?;
                backend.axpy(&mut r, -1.0, &t)?;
            }
        } else {
            // r = r + rhs - rhs_old - (rho - rho_old) K^H K x
            backend.axpy(&mut r, 1.0, &rhs)?;
            backend.axpy(&mut r, -1.0, &rhs_old)?;
            if rho != rho_old {
                aug.op.normal(backend, &mut t, x)?;
                backend.axpy(&mut r, rho_old - rho, &t)?;
            }
        }
        // (A + rho K^H K) x = rhs, from the last x
        let rhs_norm = norm(backend, &rhs)?.max(f64::MIN_POSITIVE);
        let m = match pre.as_deref_mut() {
            Some(c) => {
                c.set_rho(backend, rho, gram)?;
                Some(c as &mut dyn Preconditioner<B>)
            }
            None => None,
        };
        iterate(
            backend,
            &mut aug,
            x,
            &mut r,
            rhs_norm,
            &inner,
            &mut ws,
            m,
            &mut |_, _| {},
        )?;
        std::mem::swap(&mut rhs, &mut rhs_old);
        rho_old = rho;
        // over-relaxed: h = a K x + (1 - a) z_old;
        // z = prox(h + u), u = u + h - z
        aug.op.forward(backend, &mut kx, x)?;
        std::mem::swap(&mut z, &mut z_old);
        let a = params.relaxation;
        backend.copy(&mut w, &kx)?;
        if a != 1.0 {
            backend.scale(&mut w, a)?;
            backend.axpy(&mut w, 1.0 - a, &z_old)?;
        }
        backend.copy(&mut z, &w)?;
        backend.axpy(&mut z, 1.0, &u)?;
        group.prox(backend, &mut z, lambda / rho)?;
        backend.axpy(&mut u, 1.0, &w)?;
        backend.axpy(&mut u, -1.0, &z)?;
        // primal |K x - z| / max(|K x|, |z|)
        backend.copy(&mut w, &kx)?;
        backend.axpy(&mut w, -1.0, &z)?;
        let primal = relative(
            norm(backend, &w)?,
            norm(backend, &kx)?.max(norm(backend, &z)?),
        );
        // dual |K^H (z - z_old)| / |K^H u| (rho cancels)
        backend.copy(&mut w, &z)?;
        backend.axpy(&mut w, -1.0, &z_old)?;
        aug.op.adjoint(backend, &mut t, &w)?;
        let s = norm(backend, &t)?;
        aug.op.adjoint(backend, &mut t, &u)?;
        let dual = relative(s, norm(backend, &t)?);
        if record(
            &mut info,
            "ADMM",
            it,
            [primal, dual],
            params.tolerance,
            on_iteration,
        )? {
            break;
        }
        // residual balancing; u = y / rho is rescaled with rho
        if primal > 10.0 * dual {
            rho *= 2.0;
            backend.scale(&mut u, 0.5)?;
        } else if dual > 10.0 * primal {
            rho *= 0.5;
            backend.scale(&mut u, 2.0)?;
        }
    }
    Ok(info)
}
