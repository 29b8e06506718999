//! `recon validate --auto-lambda`: lambda "auto" (and, for the quadratic
//! priors, "gcv") on the noisy case, held against the best lambda of a
//! sweep of the config's own prior against the truth.

use super::sweep::{self, Swept};
use super::{Check, ValidateArgs};
use crate::config::{Lambda, Loaded, PriorKind};
use crate::pipeline::{lambda::Used, Inputs, Ui};
use anyhow::Result;
use recon_core::Real;
use recon_encoding::NufftBackend;
use recon_q::Stored;
use serde::Serialize;

/// The finding: the automatic lambda against the sweep's best.
#[derive(Debug, Clone, Serialize)]
pub struct AutoLambda {
    pub prior: String,
    pub lambda: f64,
    pub rule: String,
    pub psnr_db: f64,
    pub tried: Vec<(f64, f64)>,
    pub best_lambda: f64,
    pub best_psnr_db: f64,
    /// The quadratic priors: lambda "gcv" too (lambda, PSNR).
    pub gcv: Option<(f64, f64)>,
}

/// The sweep's name of the config's own prior.
pub fn own_name(l: &Loaded) -> String {
    let prior = match l.cfg.prior.kind {
        PriorKind::Quadratic => format!("{} W", l.cfg.regulariser.kind.name()),
        k => k.name().to_string(),
    };
    format!("the config's prior ({prior})")
}

/// What the rules chose on backend `b`: "auto"'s lambda and PSNR, and
/// "gcv"'s for a quadratic prior.
#[allow(clippy::type_complexity)]
pub fn solve<B>(
    b: &B,
    l: &Loaded,
    inputs: &Inputs,
    ui: &impl Ui,
) -> Result<((Used, f64), Option<(Used, f64)>)>
where
    B: NufftBackend,
    B::Real: Stored + Real,
{
    let auto = sweep::auto(b, l, inputs, Lambda::Auto, ui)?;
    let gcv = match l.cfg.prior.kind.sparse() {
        false => Some(sweep::auto(b, l, inputs, Lambda::Gcv, ui)?),
        true => None,
    };
    Ok((auto, gcv))
}

/// The finding against the sweep named `own`, and its check: "auto" at
/// most `--auto-margin` dB below the best.
pub fn finding(
    ((used, psnr_db), gcv): ((Used, f64), Option<(Used, f64)>),
    swept: &[Swept],
    own: &str,
    case_name: &str,
    args: &ValidateArgs,
    checks: &mut Vec<Check>,
) -> AutoLambda {
    let s = swept.iter().find(|s| s.name == own).expect("swept");
    let best = &s.points[s.best];
    let a = AutoLambda {
        prior: own.to_string(),
        lambda: used.lambda,
        rule: used.rule,
        psnr_db,
        tried: used.tried,
        best_lambda: best.lambda,
        best_psnr_db: best.psnr_db,
        gcv: gcv.map(|(u, p)| (u.lambda, p)),
    };
    let below = a.best_psnr_db - a.psnr_db;
    checks.push(Check {
        what: format!(
            "{case_name}: lambda \"auto\" ({:.3e}) below the best of the sweep ({:.3e})",
            a.lambda, a.best_lambda
        ),
        value: below,
        bound: Some(format!("<= {} dB", args.auto_margin)),
        passed: Some(below <= args.auto_margin),
        not_run: None,
    });
    a
}
