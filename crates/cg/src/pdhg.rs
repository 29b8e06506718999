//! The primal-dual hybrid gradient method for the sparse priors, with the
//! data term taken by its gradient (Condat, JOTA 2013; Vu, Adv. Comput.
//! Math. 2013: Chambolle and Pock's method with a smooth term), so that an
//! iteration costs one Toeplitz product and one K and K^H, and F itself is
//! never applied:
//!
//! ```text
//! x+ = x - tau (A x - b + K^H y)
//! y+ = proj_{|.| <= lambda}(y + sigma K (2 x+ - x))
//! ```
//!
//! It converges when `1/tau - sigma |K|^2 > |A| / 2`; both norms come from
//! power iterations, with a margin of 10%, and the steps are `tau = 1/L`,
//! `sigma = L / (2 |K|^2)` (L the margined `|A|`). The residuals are those
//! of the optimality conditions at the new point (Goldstein et al., 2013):
//! primal `(x - x+)/tau - A (x - x+) - K^H (y - y+)`, relative to `|b|`,
//! and dual `(y - y+)/sigma - K (x - x+)`, relative to `max(|K x+|,
//! |y+|/sigma)`; they are evaluated every [`Backend::read_every`]
//! iterations, so that a GPU is not made to wait for each.

use crate::sparse::{norm, record, relative, Sparse, SparseParams};
use crate::{Info, Normal};
use recon_core::{Backend, Error, Result};
use recon_ops::power_norm;

/// The margin on the power iterations' norms (which approach from below).
const MARGIN: f64 = 1.1;

/// The primal and dual iterates with the products an iteration reuses.
struct Point<B: Backend> {
    x: B::Vector,
    /// `A x`
    ax: B::Vector,
    /// `K x`
    kx: B::Vector,
    y: B::Vector,
    /// `K^H y`
    khy: B::Vector,
}

impl<B: Backend> Point<B> {
    /// Zeros, images of length `n` and fields of `m`.
    fn zeros(backend: &B, n: usize, m: usize) -> Result<Self> {
        Ok(Point {
            x: backend.zeros(n)?,
            ax: backend.zeros(n)?,
            kx: backend.zeros(m)?,
            y: backend.zeros(m)?,
            khy: backend.zeros(n)?,
        })
    }
}

/// PDHG from the given `x` (the dual from 0). `on_iteration(i, r)` gets
/// the larger relative residual at each check.
pub fn pdhg<B: Backend, A: Normal<B>>(
    backend: &B,
    a: &mut A,
    prior: Sparse<'_, B>,
    x: &mut B::Vector,
    b: &B::Vector,
    params: &SparseParams,
    on_iteration: &mut dyn FnMut(usize, f64),
) -> Result<Info> {
    let (n, m) = prior.check_all("PDHG's image (F^H D, x)", backend, a, x, b, params)?;
    let Sparse {
        op,
        norm: group,
        lambda,
        ..
    } = prior;
    let steps = params.power_iterations;
    let l = MARGIN * power_norm(backend, n, steps, &mut |o, v| a.apply(backend, o, v))?;
    let k2 = MARGIN * power_norm(backend, n, steps, &mut |o, v| op.normal(backend, o, v))?;
    if !(l > 0.0 && k2 > 0.0) {
        return Err(Error::Invalid {
            what: "PDHG",
            reason: format!(
                "the data term (norm {l:e}) or the prior's operator (norm^2 {k2:e}) is 0"
            ),
        });
    }
    // 1/tau - sigma |K|^2 = L - L/2 = L/2 >= |A|/2 with the margins
    let (tau, sigma) = (1.0 / l, l / (2.0 * k2));
    let b_norm = norm(backend, b)?;
    let mut now = Point::zeros(backend, n, m)?;
    backend.copy(&mut now.x, x)?;
    a.apply(backend, &mut now.ax, &now.x)?;
    op.forward(backend, &mut now.kx, &now.x)?;
    let mut next = Point::zeros(backend, n, m)?;
    let (mut p, mut d) = (backend.zeros(n)?, backend.zeros(m)?);
    let every = backend.read_every().max(1);
    let mut info = Info {
        iterations: 0,
        relative_residual: 0.0,
        residuals: Vec::new(),
    };
    for it in 1..=params.iterations {
        // x+ = x - tau (A x - b + K^H y)
        backend.copy(&mut next.x, &now.x)?;
        backend.axpy(&mut next.x, -tau, &now.ax)?;
        backend.axpy(&mut next.x, tau, b)?;
        backend.axpy(&mut next.x, -tau, &now.khy)?;
        a.apply(backend, &mut next.ax, &next.x)?;
        op.forward(backend, &mut next.kx, &next.x)?;
        // y+ = proj(y + sigma (2 K x+ - K x))
        backend.copy(&mut next.y, &now.y)?;
        backend.axpy(&mut next.y, 2.0 * sigma, &next.kx)?;
        backend.axpy(&mut next.y, -sigma, &now.kx)?;
        group.prox_conjugate(backend, &mut next.y, lambda)?;
        op.adjoint(backend, &mut next.khy, &next.y)?;
        let check = it % every == 0 || it == params.iterations;
        let done = check && {
            let [primal, dual] = residuals(backend, &now, &next, [tau, sigma], (&mut p, &mut d))?;
            let y_scale = norm(backend, &next.y)? / sigma;
            let rel = [
                relative(primal, b_norm),
                relative(dual, norm(backend, &next.kx)?.max(y_scale)),
            ];
            record(&mut info, "PDHG", it, rel, params.tolerance, on_iteration)?
        };
        std::mem::swap(&mut now, &mut next);
        if done {
            break;
        }
    }
    backend.copy(x, &now.x)?;
    Ok(info)
}

/// The primal and dual residuals of the step from `now` to `next` (see the
/// module's doc), with `p` and `d` their scratch.
fn residuals<B: Backend>(
    backend: &B,
    now: &Point<B>,
    next: &Point<B>,
    [tau, sigma]: [f64; 2],
    (p, d): (&mut B::Vector, &mut B::Vector),
) -> Result<[f64; 2]> {
    // p = (x - x+)/tau - (A x - A x+) - (K^H y - K^H y+)
    backend.copy(p, &now.x)?;
    backend.axpy(p, -1.0, &next.x)?;
    backend.scale(p, 1.0 / tau)?;
    backend.axpy(p, -1.0, &now.ax)?;
    backend.axpy(p, 1.0, &next.ax)?;
    backend.axpy(p, -1.0, &now.khy)?;
    backend.axpy(p, 1.0, &next.khy)?;
    // d = (y - y+)/sigma - (K x - K x+)
    backend.copy(d, &now.y)?;
    backend.axpy(d, -1.0, &next.y)?;
    backend.scale(d, 1.0 / sigma)?;
    backend.axpy(d, -1.0, &now.kx)?;
    backend.axpy(d, 1.0, &next.kx)?;
    Ok([norm(backend, p)?, norm(backend, d)?])
}
