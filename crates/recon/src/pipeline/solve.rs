//! The solve driver: the prior the config asks for (a quadratic W, or a
//! sparse prior with its operator), and the solve of a [`Problem`] with it
//! (CG, with the anatomical W's second pass; ADMM or PDHG).

use super::Inputs;
use crate::config::{Algorithm, Loaded, PriorKind, RegulariserKind};
use anyhow::{Context, Result};
use recon_cg::{Params, Problem, SparseAlgorithm, SparseParams};
use recon_core::{Backend, Complex, Real, Stencil};
use recon_encoding::NufftBackend;
use recon_ops::{Compose, Directional, Gradient, LinearOp};

/// The prior as the solver starts from.
#[derive(Clone)]
pub enum Regulariser {
    /// Quadratic, plain first differences.
    Uniform,
    /// Quadratic, weights from the reference (two passes with data edges).
    Anatomical(Box<recon_prior::Prior>),
    /// Total variation, or its directional form with the reference on the
    /// grid and eta, solved by ADMM or PDHG.
    Sparse {
        reference: Option<(Vec<f64>, f64)>,
        algorithm: SparseAlgorithm,
        params: SparseParams,
    },
}

impl Regulariser {
    /// Solves it takes.
    pub fn passes(&self) -> usize {
        match self {
            Regulariser::Anatomical(p) => p.passes(),
            _ => 1,
        }
    }

    /// The prior's operator K on the grid `n` (sparse priors only).
    fn operator<'b, B: Backend + 'b>(
        &self,
        backend: &B,
        n: [usize; 3],
    ) -> Result<Box<dyn LinearOp<B> + 'b>> {
        let gradient = Gradient::new(backend, n)?;
        Ok(match self {
            Regulariser::Sparse {
                reference: Some((r, eta)),
                ..
            } => {
                let p = Directional::from_reference(backend, n, r, *eta)
                    .context("directional TV from the reference")?;
                Box::new(Compose::new(backend, p, gradient)?)
            }
            _ => Box::new(gradient),
        })
    }
}

/// The prior the config asks for: a quadratic W (uniform, or from the
/// anatomy), or a sparse prior.
pub fn regulariser(l: &Loaded, inputs: &Inputs) -> Result<Regulariser> {
    let cfg = &l.cfg;
    // config::load checked that a reference exists where one is needed
    let reference = || {
        inputs
            .anatomy_on_grid
            .clone()
            .context("no anatomical reference")
    };
    if cfg.prior.kind.sparse() {
        let reference = match cfg.prior.kind {
            PriorKind::Dtv => Some(reference()?),
            _ => None,
        };
        return Ok(sparse(l, reference));
    }
    match cfg.regulariser.kind {
        RegulariserKind::Uniform => Ok(Regulariser::Uniform),
        RegulariserKind::Anatomical => {
            let a = inputs
                .anatomy_on_grid
                .as_ref()
                .context("no anatomical reference")?;
            let p = recon_prior::Prior::new(&l.grid, a, &cfg.regulariser.params())
                .context("building W from the anatomical reference")?;
            Ok(Regulariser::Anatomical(Box::new(p)))
        }
    }
}

/// A sparse prior with the config's solver settings: TV, or directional
/// TV guided by `reference` (on the grid) with the config's eta.
pub fn sparse(l: &Loaded, reference: Option<Vec<f64>>) -> Regulariser {
    let s = &l.cfg.solver;
    // The config's algorithm when it is a sparse one; else (a quadratic
    // config whose validation sweeps TV) ADMM with its own default
    // iterations.
    let (algorithm, iterations) = match l.cfg.algorithm() {
        Algorithm::Pdhg => (SparseAlgorithm::Pdhg, l.cfg.iterations()),
        Algorithm::Admm => (SparseAlgorithm::Admm, l.cfg.iterations()),
        Algorithm::Cg => (SparseAlgorithm::Admm, s.iterations.unwrap_or(20)),
    };
    Regulariser::Sparse {
        reference: reference.map(|r| (r, l.cfg.prior.eta)),
        algorithm,
        params: SparseParams {
            iterations,
            tolerance: s.tolerance,
            inner: s.inner,
            rho: s.rho,
            relaxation: s.relaxation,
            ..Default::default()
        },
    }
}

/// What [`solve`] returns.
pub struct Solved<T> {
    pub x: Vec<Complex<T>>,
    /// Of the last pass.
    pub info: recon_cg::Info,
    /// W as the last pass used it, and the prior's findings.
    pub stencil: Stencil,
    pub prior: Option<recon_prior::Info>,
}

/// The one solve driver: `(F^H F + lambda W^H W) x = F^H D` by CG from 0,
/// `lambda` relative to Q's peak. An anatomical W with data edges solves
/// twice: solve, relax the edges the image shows beyond its noise
/// ([`recon_prior::Prior::relaxed`]), solve again. `on_iteration` counts
/// iterations across passes. The problem (FFT(Q), F^H D) is reused.
pub fn solve<B: NufftBackend>(
    backend: &B,
    problem: &mut Problem<B>,
    w: &Regulariser,
    lambda: f64,
    params: &Params,
    on_iteration: &mut dyn FnMut(usize, f64),
) -> Result<Solved<B::Real>> {
    match w {
        Regulariser::Sparse {
            algorithm, params, ..
        } => {
            let mut op = w.operator(backend, problem.grid().n)?;
            let (x, info) = problem.solve_sparse(
                backend,
                op.as_mut(),
                lambda,
                *algorithm,
                params,
                on_iteration,
            )?;
            Ok(Solved {
                x,
                info,
                stencil: Stencil::uniform(problem.grid().n),
                prior: None,
            })
        }
        Regulariser::Uniform => {
            let stencil = Stencil::uniform(problem.grid().n);
            let (x, info) = problem.solve(backend, &stencil, lambda, params, on_iteration)?;
            Ok(Solved {
                x,
                info,
                stencil,
                prior: None,
            })
        }
        Regulariser::Anatomical(p) => {
            let (x, info) = problem.solve(backend, &p.stencil, lambda, params, on_iteration)?;
            let mag: Vec<f64> = x.iter().map(|c| c.norm().f64()).collect();
            let Some(used) = p.relaxed(&mag)? else {
                return Ok(Solved {
                    x,
                    info,
                    stencil: p.stencil.clone(),
                    prior: Some(p.info.clone()),
                });
            };
            let (x, info) =
                problem.solve(backend, &used.stencil, lambda, params, &mut |i, r| {
                    on_iteration(params.iterations + i, r)
                })?;
            Ok(Solved {
                x,
                info,
                stencil: used.stencil,
                prior: Some(used.info),
            })
        }
    }
}
