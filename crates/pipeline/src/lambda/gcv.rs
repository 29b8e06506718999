//! Generalised cross-validation (Golub, Heath and Wahba) for the quadratic
//! priors, whose image `x = A^-1 b` (`A = T + lambda W^H W`, `T` the data
//! term) is linear in the data: lambda minimises
//!
//! ```text
//! V(lambda) = M ||F x - D||^2 / (M - df)^2,  df = tr(A^-1 T),
//! ```
//!
//! the leave-one-out prediction error, with no noise level needed and
//! model error counted as noise. `df` (the degrees of freedom the image
//! spends) is Hutchinson's randomised trace `Re z^H A^-1 T z` with one
//! complex Rademacher probe z, the same z for every lambda so that V is
//! smooth in lambda: one more solve per candidate.

use super::Choice;
use crate::{bail, Result};
use recon_core::Complex;

/// The probe: `(+-1 +- i) / sqrt(2)` on the first `len` voxels (0 after:
/// a batch's padding plane, which holds no samples), from a fixed seed.
pub fn probe(total: usize, len: usize) -> Vec<Complex<f64>> {
    let mut state = 0x2545f4914f6cdd1du64;
    let s = std::f64::consts::FRAC_1_SQRT_2;
    (0..total)
        .map(|i| {
            if i >= len {
                return Complex::default();
            }
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let sign = |bit: u64| if state >> bit & 1 == 1 { s } else { -s };
            Complex::new(sign(11), sign(37))
        })
        .collect()
}

/// GCV's probe of one problem: z, and `T z`, each made at the first
/// candidate that needs them (a given lambda never does).
pub struct Probe<T> {
    total: usize,
    len: usize,
    z: Option<Vec<Complex<T>>>,
    tz: Option<Vec<Complex<T>>>,
}

impl<T: recon_core::Real> Probe<T> {
    /// A probe over a grid of `total` voxels, nonzero on the first `len`.
    pub fn new(total: usize, len: usize) -> Self {
        Probe {
            total,
            len,
            z: None,
            tz: None,
        }
    }

    /// `df = Re z^H (T + lambda W^H W)^-1 T z` on `problem`, W the
    /// candidate's stencil, by the solver's own CG settings.
    pub fn df<B: recon_core::Backend<Real = T>>(
        &mut self,
        backend: &B,
        problem: &mut recon_cg::Problem<'_, B>,
        weights: &recon_core::Stencil,
        lambda: f64,
        params: &recon_cg::Params,
    ) -> Result<f64> {
        let (total, len) = (self.total, self.len);
        let z = self.z.get_or_insert_with(|| {
            probe(total, len)
                .iter()
                .map(|c| Complex::new(T::of(c.re), T::of(c.im)))
                .collect()
        });
        if self.tz.is_none() {
            self.tz = Some(problem.normal(backend, z)?);
        }
        let tz = self.tz.as_deref().expect("made");
        let (v, _) =
            problem.solve_on(backend, weights, lambda, Some(tz), params, &mut |_, _| {})?;
        Ok(z.iter()
            .zip(&v)
            .map(|(z, v)| z.re.f64() * v.re.f64() + z.im.f64() * v.im.f64())
            .sum())
    }
}

/// The decades (log10 of relative lambda) the search starts with, and how
/// far it may extend them.
pub const DECADES: (i32, i32) = (-3, 3);
pub const LIMITS: (i32, i32) = (-6, 4);
/// Golden-section steps within the best decade's neighbours.
pub const REFINE: usize = 4;

/// GCV's lambda: `eval(lambda)` returns a candidate solution, its misfit
/// `||F x - D||^2` and its `df`, over `samples` data values. Evaluates one
/// lambda per decade over [`DECADES`] (extended while the least V is at an
/// end), then refines by golden section between the best decade's
/// neighbours. Returns the solution of least V, and in
/// [`Choice::tried`] each candidate's `V / V_min`.
pub fn gcv<T>(
    samples: usize,
    mut eval: impl FnMut(f64) -> Result<(T, f64, f64)>,
) -> Result<(T, Choice)> {
    let m = samples as f64;
    let mut tried: Vec<(f64, f64)> = Vec::new();
    let mut best: Option<(f64, T)> = None;
    let mut v_at = |e: f64, tried: &mut Vec<(f64, f64)>| -> Result<f64> {
        let lambda = 10f64.powf(e);
        let (x, misfit, df) = eval(lambda)?;
        if !(misfit.is_finite() && df.is_finite()) {
            bail!("GCV at lambda {lambda:.3e}: misfit {misfit} and degrees of freedom {df}");
        }
        // df < M: a candidate that spends every sample's freedom fits the
        // noise exactly and predicts nothing (V = infinity).
        let v = match df < m {
            true => m * misfit.max(0.0) / (m - df).powi(2),
            false => f64::INFINITY,
        };
        tried.push((lambda, v));
        if best.as_ref().is_none_or(|(b, _)| v < *b) {
            best = Some((v, x));
        }
        Ok(v)
    };
    let mut grid: Vec<(i32, f64)> = Vec::new();
    for e in DECADES.0..=DECADES.1 {
        grid.push((e, v_at(e as f64, &mut tried)?));
    }
    let least = |g: &[(i32, f64)]| -> usize {
        (0..g.len())
            .min_by(|&a, &b| g[a].1.total_cmp(&g[b].1))
            .expect("points")
    };
    loop {
        let i = least(&grid);
        if i == 0 && grid[0].0 > LIMITS.0 {
            let e = grid[0].0 - 1;
            grid.insert(0, (e, v_at(e as f64, &mut tried)?));
        } else if i == grid.len() - 1 && grid[i].0 < LIMITS.1 {
            let e = grid[i].0 + 1;
            grid.push((e, v_at(e as f64, &mut tried)?));
        } else {
            break;
        }
    }
    let i = least(&grid);
    let unmet = (i == 0 || i == grid.len() - 1).then(|| {
        format!(
            "V is least at the end of the range, lambda = {:e}",
            10f64.powi(grid[i].0)
        )
    });
    if unmet.is_none() {
        // Golden section on [e - 1, e + 1], V known at the middle.
        let phi = (5f64.sqrt() - 1.0) / 2.0;
        let (mut a, mut b) = (grid[i].0 as f64 - 1.0, grid[i].0 as f64 + 1.0);
        let mut c = b - phi * (b - a);
        let mut d = a + phi * (b - a);
        let (mut vc, mut vd) = (v_at(c, &mut tried)?, v_at(d, &mut tried)?);
        for _ in 2..REFINE {
            if vc < vd {
                (b, d, vd) = (d, c, vc);
                c = b - phi * (b - a);
                vc = v_at(c, &mut tried)?;
            } else {
                (a, c, vc) = (c, d, vd);
                d = a + phi * (b - a);
                vd = v_at(d, &mut tried)?;
            }
        }
    }
    let (v_min, x) = best.expect("at least one candidate");
    let lambda = tried
        .iter()
        .find(|(_, v)| *v == v_min)
        .expect("the best was tried")
        .0;
    let tried = tried.into_iter().map(|(l, v)| (l, v / v_min)).collect();
    Ok((
        x,
        Choice {
            lambda,
            tried,
            unmet,
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    // A diagonal problem of known GCV: T = diag(t), W = I, b = t y:
    // x_i = t_i y_i / (t_i + l), misfit = sum |y_i - t_i x_i|^2 ... with
    // F = diag(sqrt t), D = sqrt(t) y. The search finds the dense minimum
    // of the same V to within the golden section's resolution.
    #[test]
    fn gcv_finds_the_least_v_of_a_diagonal_problem() {
        let n = 400;
        let t: Vec<f64> = (0..n).map(|i| 1.0 / (1.0 + i as f64 / 20.0)).collect();
        let y: Vec<f64> = (0..n)
            .map(|i| (i as f64 / 30.0).sin() * t[i] + 0.05 * ((i * 7919 % 101) as f64 / 50.0 - 1.0))
            .collect();
        let v = |l: f64| {
            // D_i = sqrt(t_i) y_i / t_i ... the model: D = F x + n, F = sqrt(t)
            let (mut misfit, mut df) = (0.0, 0.0);
            for i in 0..n {
                let d = y[i] / t[i].sqrt();
                let x = t[i].sqrt() * d / (t[i] + l);
                misfit += (t[i].sqrt() * x - d).powi(2);
                df += t[i] / (t[i] + l);
            }
            (misfit, df)
        };
        let score = |l: f64| {
            let (r, df) = v(l);
            n as f64 * r / (n as f64 - df).powi(2)
        };
        let (x, c) = gcv(n, |l| {
            let (r, df) = v(l);
            Ok((l, r, df))
        })
        .unwrap();
        assert!(c.unmet.is_none(), "{c:?}");
        assert_eq!(x, c.lambda);
        // The dense minimum over 2000 points in log lambda.
        let dense = (0..2000)
            .map(|k| 10f64.powf(-6.0 + 10.0 * k as f64 / 2000.0))
            .min_by(|a, b| score(*a).total_cmp(&score(*b)))
            .unwrap();
        // Golden section over two decades with REFINE steps: the bracket
        // shrinks to 2 * 0.618^(REFINE - 1) decades, about 0.47.
        let off = (c.lambda / dense).log10().abs();
        assert!(off < 0.25, "chose {} against {dense}", c.lambda);
        // Its V is within 1% of the least.
        assert!(score(c.lambda) <= 1.01 * score(dense));
    }

    #[test]
    fn the_probe_has_unit_entries_and_is_zero_past_len() {
        let z = probe(10, 7);
        assert!(z[..7].iter().all(|c| (c.norm_sqr() - 1.0).abs() < 1e-15));
        assert!(z[7..].iter().all(|c| *c == Complex::default()));
        assert_eq!(z, probe(10, 7), "fixed seed");
    }
}
