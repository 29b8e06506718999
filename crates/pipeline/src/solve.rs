//! The solve driver: the prior the config asks for (a quadratic W, or a
//! sparse prior with its operator), and the solve of a [`Problem`] with it
//! (CG, with the anatomical W's second pass; ADMM or PDHG).

use super::Inputs;
use crate::config::{Algorithm, Loaded, PriorKind, RegulariserKind};
use crate::{Context, Result};
use recon_cg::{Gram, Params, Problem, SparseAlgorithm, SparseParams};
use recon_core::{Backend, Complex, Real, Stencil};
use recon_encoding::NufftBackend;
use recon_ops::{shifted_wavelets, Compose, Directional, Gradient, GroupNorm, LinearOp};

/// The prior as the solver starts from.
#[derive(Clone)]
pub enum Regulariser {
    /// Quadratic, plain first differences.
    Uniform,
    /// Quadratic, weights from the reference (two passes with data edges).
    Anatomical(Box<recon_prior::Prior>),
    /// A sparse prior, solved by ADMM or PDHG.
    Sparse {
        prior: SparsePrior,
        algorithm: SparseAlgorithm,
        params: SparseParams,
    },
}

/// The sparse priors.
#[derive(Clone)]
pub enum SparsePrior {
    /// Isotropic total variation.
    Tv,
    /// Directional total variation, the reference on the grid and eta.
    Dtv { reference: Vec<f64>, eta: f64 },
    /// l1 of the wavelet coefficients, averaged over this many shifted
    /// transforms.
    Wavelet { shifts: usize },
}

/// A sparse prior's operator K, norm and K^H K's model.
type Parts<'b, B> = (
    Box<dyn LinearOp<B> + 'b>,
    Box<dyn recon_ops::Norm<B> + 'b>,
    Gram,
);

impl SparsePrior {
    /// The config's name of it.
    pub fn kind(&self) -> PriorKind {
        match self {
            SparsePrior::Tv => PriorKind::Tv,
            SparsePrior::Dtv { .. } => PriorKind::Dtv,
            SparsePrior::Wavelet { .. } => PriorKind::Wavelet,
        }
    }

    /// The prior's operator, norm and Gram model on the grid `n`.
    fn parts<'b, B: Backend + 'b>(&self, backend: &B, n: [usize; 3]) -> Result<Parts<'b, B>> {
        let tv = Box::new(GroupNorm { components: 3 });
        Ok(match self {
            SparsePrior::Tv => (Box::new(Gradient::new(backend, n)?), tv, Gram::Laplacian),
            SparsePrior::Dtv { reference, eta } => {
                let p = Directional::from_reference(backend, n, reference, *eta)
                    .context("directional TV from the reference")?;
                let k = Compose::new(backend, p, Gradient::new(backend, n)?)?;
                (Box::new(k), tv, Gram::Laplacian)
            }
            SparsePrior::Wavelet { shifts } => {
                let (k, norm) =
                    shifted_wavelets(backend, n, *shifts).context("the wavelet prior")?;
                (Box::new(k), Box::new(norm), Gram::Identity)
            }
        })
    }
}

impl Regulariser {
    /// Solves it takes.
    pub fn passes(&self) -> usize {
        match self {
            Regulariser::Anatomical(p) => p.passes(),
            _ => 1,
        }
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
    let sparse_prior = match cfg.prior.kind {
        PriorKind::Quadratic => None,
        PriorKind::Tv => Some(SparsePrior::Tv),
        PriorKind::Dtv => Some(SparsePrior::Dtv {
            reference: reference()?,
            eta: cfg.prior.eta,
        }),
        PriorKind::Wavelet => Some(SparsePrior::Wavelet {
            shifts: cfg.prior.shifts,
        }),
    };
    if let Some(p) = sparse_prior {
        return Ok(sparse(l, p));
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

/// A sparse prior with the config's solver settings.
pub fn sparse(l: &Loaded, prior: SparsePrior) -> Regulariser {
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
        prior,
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
    /// Of every pass together: iterations summed, residuals pass after
    /// pass, the last pass's relative residual ...
    pub info: recon_cg::Info,
    /// ... and each pass's iterations (one entry but for the anatomical
    /// W's two passes).
    pub passes: Vec<usize>,
    /// W as the last pass used it, and the prior's findings.
    pub stencil: Stencil,
    pub prior: Option<recon_prior::Info>,
}

/// The one solve driver: `(F^H F + lambda W^H W) x = F^H D` by CG from 0,
/// `lambda` relative to Q's peak. An anatomical W with data edges solves
/// twice: solve, relax the edges the image shows beyond its noise
/// ([`recon_prior::Prior::relaxed`]), solve again. `on_iteration` counts
/// iterations across passes, and `log` hears of the second pass before it
/// starts. The problem (FFT(Q), F^H D) is reused.
pub fn solve<B: NufftBackend>(
    backend: &B,
    problem: &mut Problem<'_, B>,
    w: &Regulariser,
    lambda: f64,
    params: &Params,
    on_iteration: &mut dyn FnMut(usize, f64),
    log: &dyn Fn(&str),
) -> Result<Solved<B::Real>> {
    match w {
        Regulariser::Sparse {
            prior,
            algorithm,
            params,
        } => {
            let (mut op, mut norm, gram) = prior.parts(backend, problem.grid().n)?;
            let prior = recon_cg::Sparse {
                op: op.as_mut(),
                norm: norm.as_mut(),
                lambda: problem.sparse_lambda_abs(backend, lambda)?,
                gram,
            };
            let (x, info) =
                problem.solve_sparse(backend, prior, *algorithm, params, on_iteration)?;
            Ok(Solved {
                x,
                passes: vec![info.iterations],
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
                passes: vec![info.iterations],
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
                    passes: vec![info.iterations],
                    info,
                    stencil: p.stencil.clone(),
                    prior: Some(p.info.clone()),
                });
            };
            if let Some(n) = used.info.data_edges {
                log(&format!(
                    "W: second pass (CG restarts from 0), {n} more edges relaxed where the first \
                     pass's image has edges"
                ));
            }
            let first = info;
            let (x, second) =
                problem.solve(backend, &used.stencil, lambda, params, &mut |i, r| {
                    on_iteration(first.iterations + i, r)
                })?;
            let mut residuals = first.residuals.clone();
            residuals.extend(&second.residuals);
            Ok(Solved {
                x,
                passes: vec![first.iterations, second.iterations],
                info: recon_cg::Info {
                    iterations: first.iterations + second.iterations,
                    relative_residual: second.relative_residual,
                    residuals,
                },
                stencil: used.stencil,
                prior: Some(used.info),
            })
        }
    }
}
