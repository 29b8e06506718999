//! Conjugate gradient, with its scalars kept on the device: the host
//! queues iterations and reads the scalars every [`Backend::read_every`].

use crate::Normal;
use recon_core::{Backend, CgStep, Error, Ratio, Result};

/// Solver settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Params {
    /// Maximum iterations (the book uses 60).
    pub iterations: usize,
    /// Stop early once `||r|| / ||b||` falls to this; 0 never stops early.
    pub tolerance: f64,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            iterations: 60,
            tolerance: 0.0,
        }
    }
}

/// What the solver did.
#[derive(Debug, Clone, PartialEq)]
pub struct Info {
    pub iterations: usize,
    /// Final `||b - A x|| / ||b||` (the recursively updated residual).
    pub relative_residual: f64,
    /// Relative residual after each iteration.
    pub residuals: Vec<f64>,
}

/// Conjugate gradient for `A x = b`, starting from the given `x`.
/// `on_iteration(i, relative_residual)` is called after each iteration.
///
/// The dot products stay on the device and the vector updates take their
/// coefficients from them there ([`Ratio`]): the host queues iterations
/// and reads the scalars every [`Backend::read_every`] iterations, so a GPU
/// never waits for it. Once `||r||` falls to `tolerance ||b||` the queued
/// iterations leave x as it is, so the result is the one CG would have
/// stopped at; Info counts only the iterations that ran.
pub fn solve<B: Backend, A: Normal<B>>(
    backend: &B,
    a: &mut A,
    x: &mut B::Vector,
    b: &B::Vector,
    params: &Params,
    on_iteration: &mut dyn FnMut(usize, f64),
) -> Result<Info> {
    let n = a.len();
    Error::check_len("CG right-hand side", n, backend.len(b))?;
    Error::check_len("CG initial guess", n, backend.len(x))?;
    let bb = backend.dot_re(b, b)?;
    if !bb.is_finite() {
        return Err(Error::Invalid {
            what: "conjugate gradient",
            reason: format!("the right-hand side is not finite (||b||^2 = {bb})"),
        });
    }
    let b_norm = bb.sqrt();
    let info = Info {
        iterations: 0,
        relative_residual: 0.0,
        residuals: Vec::new(),
    };
    if b_norm == 0.0 {
        // A x = 0 has the solution 0.
        backend.copy(x, b)?;
        return Ok(info);
    }
    let mut ws = Workspace::new(backend, n, false)?;
    let mut r = backend.zeros(n)?;
    // r = b - A x; from x = 0, the usual start, r = b without applying A.
    backend.copy(&mut r, b)?;
    if backend.dot_re(x, x)? != 0.0 {
        a.apply(backend, &mut ws.ap, x)?;
        backend.axpy(&mut r, -1.0, &ws.ap)?;
    }
    iterate(
        backend,
        a,
        x,
        &mut r,
        b_norm,
        params,
        &mut ws,
        None,
        on_iteration,
    )
}

/// CG's work vectors `A p`, `p` and (preconditioned) `z = M^-1 r`, made
/// once for solves that follow one another (ADMM's x-updates).
pub(crate) struct Workspace<B: Backend> {
    ap: B::Vector,
    p: B::Vector,
    z: Option<B::Vector>,
}

impl<B: Backend> Workspace<B> {
    /// `preconditioned`: with room for `z`.
    pub(crate) fn new(backend: &B, n: usize, preconditioned: bool) -> Result<Self> {
        Ok(Workspace {
            ap: backend.zeros(n)?,
            p: backend.zeros(n)?,
            z: if preconditioned {
                Some(backend.zeros(n)?)
            } else {
                None
            },
        })
    }
}

/// CG's iterations from `x` with `r = b - A x` given (and left as the
/// recursively updated residual); `b_norm = ||b|| > 0`. With a
/// preconditioner M (and `ws` made with room for it) it is preconditioned
/// CG: `<r, r>` becomes `<r, M^-1 r>` throughout, the tolerance included.
#[allow(clippy::too_many_arguments)]
pub(crate) fn iterate<B: Backend, A: Normal<B>>(
    backend: &B,
    a: &mut A,
    x: &mut B::Vector,
    r: &mut B::Vector,
    b_norm: f64,
    params: &Params,
    ws: &mut Workspace<B>,
    pre: Option<&mut dyn crate::Preconditioner<B>>,
    on_iteration: &mut dyn FnMut(usize, f64),
) -> Result<Info> {
    let mut info = Info {
        iterations: 0,
        relative_residual: 0.0,
        residuals: Vec::new(),
    };
    let Workspace { ap, p, z } = ws;
    // With a preconditioner, z = M^-1 r; without, z stands for r itself.
    let mut z = match (pre, z.as_mut()) {
        (Some(m), Some(z)) => Some((m, z)),
        (None, _) => None,
        (Some(_), None) => {
            return Err(Error::Invalid {
                what: "preconditioned CG",
                reason: "its workspace has no room for M^-1 r".into(),
            })
        }
    };
    // The scalars: the floor (tolerance ||b||)^2, <r, z> at the start,
    // then per iteration i from 1 <p, A p> and <r, z> (see `Slots`).
    let mut host = vec![0.0; Slots::len(params.iterations)];
    host[Slots::FLOOR] = (params.tolerance * b_norm).powi(2);
    let mut s = backend.scalars(&host)?;
    // p = z, <r, z>
    match z.as_mut() {
        Some((m, z)) => {
            m.apply(backend, z, r)?;
            backend.copy(p, z)?;
            backend.dot_re_to(&mut s, Slots::rr(0), r, z)?;
        }
        None => {
            backend.copy(p, r)?;
            backend.dot_re_to(&mut s, Slots::rr(0), r, r)?;
        }
    }
    let every = backend.read_every().max(1);
    // Iteration i's step alpha = <r, z> / <p, A p> and the next
    // direction's beta = <r, z> / <r_old, z_old>.
    let alpha = |i| Slots::ratio(Slots::rr(i - 1), Slots::pap(i));
    let beta = |i| Slots::ratio(Slots::rr(i), Slots::rr(i - 1));
    let mut last = 0;
    for it in 1..=params.iterations {
        last = it;
        if it == 1 {
            a.apply_dot(backend, ap, p, &mut s, Slots::pap(it))?;
        } else {
            // x = x + alpha p, p = z + beta p (the last iteration's), then A
            // p and <p, A p>: the product may make the updates as it reads p
            let z_or_r = match z.as_ref() {
                Some((_, z)) => &**z,
                None => &*r,
            };
            let u = CgStep {
                x: &mut *x,
                a: 1.0,
                step: alpha(it - 1),
                r: z_or_r,
                beta: beta(it - 1),
            };
            a.update_apply_dot(backend, u, ap, p, &mut s, Slots::pap(it))?;
        }
        match z.as_mut() {
            Some((m, z)) => {
                backend.axpy_ratio(r, -1.0, alpha(it), &s, ap)?; // r = r - alpha A p
                m.apply(backend, z, r)?;
                backend.dot_re_to(&mut s, Slots::rr(it), r, z)?;
            }
            None => {
                // r = r - alpha A p, <r, r>
                backend.axpy_norm_to(r, -1.0, alpha(it), &mut s, ap, Slots::rr(it))?;
            }
        }
        if it % every == 0 || it == params.iterations {
            backend.read_scalars(&mut host, &s)?;
            if !report(&mut info, &host, it, b_norm, on_iteration)? {
                break;
            }
        }
    }
    // The last iteration's x = x + alpha p (its p = z + beta p is not
    // needed).
    if last > 0 {
        backend.axpy_ratio(x, 1.0, alpha(last), &s, p)?;
    }
    if params.iterations == 0 {
        backend.read_scalars(&mut host, &s)?;
        report(&mut info, &host, 0, b_norm, on_iteration)?;
    }
    Ok(info)
}

/// Where CG keeps its scalars.
struct Slots;

impl Slots {
    const FLOOR: usize = 0;

    fn len(iterations: usize) -> usize {
        2 * iterations + 2
    }

    /// `<r, r>` after iteration `i` (0: at the start).
    fn rr(i: usize) -> usize {
        2 * i + 1
    }

    /// `<p, A p>` of iteration `i`, from 1.
    fn pap(i: usize) -> usize {
        2 * i
    }

    /// `s[num] / s[den]`, 0 once `s[num]` is at the floor.
    fn ratio(num: usize, den: usize) -> Ratio {
        Ratio {
            num,
            den,
            floor: Slots::FLOOR,
        }
    }
}

/// Reads the iterations after `info.iterations`, up to `last`, from the
/// scalars `s` on the host, as [`Ratio`] gated them on the device: iteration
/// i ran when `<r, r>` before it was above the floor. Returns whether CG
/// goes on after `last`.
fn report(
    info: &mut Info,
    s: &[f64],
    last: usize,
    b_norm: f64,
    on_iteration: &mut dyn FnMut(usize, f64),
) -> Result<bool> {
    let above = |i: usize| s[Slots::rr(i)].is_finite() && s[Slots::rr(i)] > s[Slots::FLOOR];
    if info.iterations == 0 {
        info.relative_residual = s[Slots::rr(0)].sqrt() / b_norm;
    }
    for it in info.iterations + 1..=last {
        if !above(it - 1) {
            return Ok(false);
        }
        let (pap, rr) = (s[Slots::pap(it)], s[Slots::rr(it)]);
        if !pap.is_finite() {
            return Err(Error::Invalid {
                what: "conjugate gradient",
                reason: format!(
                    "p^H A p = {pap} at iteration {it}: the computation overflowed (the data are \
                     normalised before it: look at the coil maps' and the trajectory's values)"
                ),
            });
        }
        if pap <= 0.0 {
            return Err(Error::Invalid {
                what: "conjugate gradient",
                reason: format!(
                    "p^H A p = {pap:e} at iteration {it}, with the relative residual at {:.1e}: \
                     CG broke down on a system that is singular, or too ill-conditioned for the \
                     precision, in the directions left (with lambda = 0 the trajectory leaves \
                     some unmeasured): set solver.lambda > 0, solver.tolerance > 0 or fewer \
                     iterations",
                    info.relative_residual
                ),
            });
        }
        if !rr.is_finite() {
            return Err(Error::Invalid {
                what: "conjugate gradient",
                reason: format!("the residual is not finite (||r||^2 = {rr}) at iteration {it}"),
            });
        }
        info.iterations = it;
        info.relative_residual = rr.sqrt() / b_norm;
        info.residuals.push(info.relative_residual);
        on_iteration(it, info.relative_residual);
    }
    Ok(above(last))
}
