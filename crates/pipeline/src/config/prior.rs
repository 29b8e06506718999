//! `[prior]` and the solver's algorithm: which prior R(rho) the run uses,
//! its lambda, and which algorithm minimises the model with it.

use super::{Config, Lambda, RegulariserKind};
use serde::Deserialize;

/// The prior R(rho).
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PriorKind {
    /// `|W rho|^2 / 2`, W from `[regulariser]` (uniform or anatomical).
    #[default]
    Quadratic,
    /// Isotropic total variation, `sum_i |grad rho (i)|`.
    Tv,
    /// Directional total variation guided by the reference image.
    Dtv,
    /// l1 of the orthonormal 3-D Daubechies wavelet coefficients.
    Wavelet,
}

impl PriorKind {
    /// Whether the prior is a sparse (non-smooth) one.
    pub fn sparse(self) -> bool {
        self != PriorKind::Quadratic
    }

    pub fn name(self) -> &'static str {
        match self {
            PriorKind::Quadratic => "quadratic",
            PriorKind::Tv => "tv",
            PriorKind::Dtv => "dtv",
            PriorKind::Wavelet => "wavelet",
        }
    }
}

/// The prior's table.
#[derive(Debug, Clone, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct PriorCfg {
    #[serde(default)]
    pub kind: PriorKind,
    /// The prior's weight. Quadratic: relative to the peak of Q, as
    /// `solver.lambda` (set one of the two). Sparse: relative to the peak
    /// of |F^H D|, so that it carries over between scans and data scales.
    pub lambda: Option<f64>,
    /// dtv: eta, as a fraction of the reference's largest gradient norm:
    /// reference edges weaker than this barely steer the prior.
    #[serde(default = "default_eta")]
    pub eta: f64,
    /// wavelet: how many shifted transforms the penalty averages over
    /// (translation invariance; each costs a transform per iteration).
    #[serde(default = "default_shifts")]
    pub shifts: usize,
    /// The reference image (of the anatomical W and of dtv) as a NIfTI
    /// file with its own geometry, resampled onto the reconstruction's
    /// grid (relative to the config's folder); instead of the scan file's
    /// `/reference/anatomy` or `phantom.anatomy`.
    pub reference: Option<std::path::PathBuf>,
}

fn default_shifts() -> usize {
    4
}

fn default_eta() -> f64 {
    0.2
}

impl Default for PriorCfg {
    fn default() -> Self {
        PriorCfg {
            kind: PriorKind::default(),
            lambda: None,
            eta: default_eta(),
            shifts: default_shifts(),
            reference: None,
        }
    }
}

/// The algorithm that minimises the model.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Algorithm {
    /// Conjugate gradient on the normal equations (quadratic priors).
    Cg,
    /// ADMM with CG x-updates (sparse priors).
    Admm,
    /// Primal-dual hybrid gradient (sparse priors).
    Pdhg,
}

impl Algorithm {
    /// The solve stage's name, for messages.
    pub fn describe(self) -> &'static str {
        match self {
            Algorithm::Cg => "conjugate gradient",
            Algorithm::Admm => "ADMM",
            Algorithm::Pdhg => "PDHG",
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Algorithm::Cg => "cg",
            Algorithm::Admm => "admm",
            Algorithm::Pdhg => "pdhg",
        }
    }
}

impl Config {
    /// The algorithm: as configured, else CG for the quadratic prior and
    /// ADMM for the sparse ones.
    pub fn algorithm(&self) -> Algorithm {
        self.solver
            .algorithm
            .unwrap_or(if self.prior.kind.sparse() {
                Algorithm::Admm
            } else {
                Algorithm::Cg
            })
    }

    /// The algorithm's iterations: as configured, else 60 for CG (the
    /// book's), 20 for ADMM (each about `solver.inner` CG iterations) and
    /// 100 for PDHG (one Toeplitz product each).
    pub fn iterations(&self) -> usize {
        self.solver.iterations.unwrap_or(match self.algorithm() {
            Algorithm::Cg => 60,
            Algorithm::Admm => 20,
            Algorithm::Pdhg => 100,
        })
    }

    /// The prior's relative lambda, wherever it was set (`"auto"` when
    /// neither key is).
    pub fn lambda(&self) -> Lambda {
        self.prior.lambda.map_or(self.solver.lambda, Lambda::Fixed)
    }

    /// Whether the run needs a reference image (an anatomical W, or a
    /// directional TV).
    pub fn needs_reference(&self) -> Option<&'static str> {
        if self.prior.kind == PriorKind::Dtv {
            Some("prior.kind")
        } else if !self.prior.kind.sparse() && self.regulariser.kind == RegulariserKind::Anatomical
        {
            Some("regulariser.kind")
        } else {
            None
        }
    }

    /// What needs the reference, for messages.
    pub fn reference_user(&self) -> &'static str {
        if self.prior.kind == PriorKind::Dtv {
            "\"dtv\""
        } else {
            "\"anatomical\""
        }
    }

    /// Checks `[prior]`, the algorithm against it and ADMM's settings:
    /// `(key, message)` of the first problem.
    pub fn check_prior(&self) -> Result<(), (&'static str, String)> {
        let s = &self.solver;
        if s.inner == 0 {
            return Err((
                "solver.inner",
                "ADMM needs at least one CG iteration per step".into(),
            ));
        }
        if !(s.rho.is_finite() && s.rho > 0.0) {
            return Err((
                "solver.rho",
                format!("must be finite and positive, got {}", s.rho),
            ));
        }
        let a = s.relaxation;
        if !(a.is_finite() && (1.0..2.0).contains(&a)) {
            return Err(("solver.relaxation", format!("must lie in [1, 2), got {a}")));
        }
        let p = &self.prior;
        if let Some(l) = p.lambda {
            if !(l.is_finite() && l >= 0.0) {
                return Err(("prior.lambda", format!("must be zero or positive, got {l}")));
            }
            if self.solver.lambda != Lambda::Auto {
                return Err((
                    "prior.lambda",
                    format!(
                        "lambda is set twice (prior.lambda = {l}, solver.lambda = {}): keep one",
                        self.solver.lambda
                    ),
                ));
            }
        }
        if !(p.eta.is_finite() && p.eta > 0.0) {
            return Err((
                "prior.eta",
                format!("must be finite and positive, got {}", p.eta),
            ));
        }
        if !(1..=64).contains(&p.shifts) {
            return Err((
                "prior.shifts",
                format!("must lie in 1..=64, got {}", p.shifts),
            ));
        }
        if p.kind.sparse() && self.regulariser.kind == RegulariserKind::Anatomical {
            return Err((
                "regulariser.kind",
                format!(
                    "\"anatomical\" shapes the quadratic prior's W, but prior.kind is \"{}\": \
                     for a sparse prior guided by the reference use prior.kind = \"dtv\"",
                    p.kind.name()
                ),
            ));
        }
        match (self.algorithm(), p.kind.sparse()) {
            (Algorithm::Cg, true) => Err((
                "solver.algorithm",
                format!(
                    "\"cg\" solves the quadratic prior only; prior.kind = \"{}\" is not smooth: \
                     use \"admm\" or \"pdhg\"",
                    p.kind.name()
                ),
            )),
            (a @ (Algorithm::Admm | Algorithm::Pdhg), false) => Err((
                "solver.algorithm",
                format!(
                    "\"{}\" is for the sparse priors (prior.kind = \"tv\", \"dtv\" or \"wavelet\"); the \
                     quadratic prior is solved by \"cg\"",
                    a.name()
                ),
            )),
            _ => Ok(()),
        }
    }
}
