//! Noise prewhitening: the coils' noise covariance, from noise samples or
//! given, turned into a mix after which every coil's noise is white, of
//! equal variance and uncorrelated.

use crate::{Mix, C64};
use nalgebra::DMatrix;
use recon_core::{Error, Result};

/// The noise covariance `Psi = (1/K) sum_k n_k n_k^H` (C x C, row-major)
/// of `K` noise samples per coil (`[C, K]`, coil after coil).
pub fn covariance(noise: &[C64], coils: usize) -> Result<Vec<C64>> {
    if coils == 0 || !noise.len().is_multiple_of(coils) || noise.is_empty() {
        return Err(Error::Invalid {
            what: "noise samples",
            reason: format!("{} values are not {coils} coils of samples", noise.len()),
        });
    }
    let k = noise.len() / coils;
    let mut psi = vec![C64::default(); coils * coils];
    for a in 0..coils {
        for b in 0..coils {
            let s: C64 = noise[a * k..][..k]
                .iter()
                .zip(&noise[b * k..][..k])
                .map(|(x, y)| x * y.conj())
                .sum();
            psi[a * coils + b] = s / k as f64;
        }
    }
    Ok(psi)
}

/// The fewest noise samples per coil accepted for a covariance of C coils,
/// per coil: with about C samples the estimate is singular or nearly so,
/// and whitening by it ruins SENSE (5.9 dB against 23.4 dB with the true
/// covariance, 8 coils with 8 samples each).
pub const MIN_NOISE_PER_COIL: usize = 4;

/// Below this many noise samples per coil, per coil, the estimate is
/// unstable enough to cost image quality: a warning.
pub const GOOD_NOISE_PER_COIL: usize = 20;

/// Whether `k` noise samples of each of `coils` coils estimate their
/// covariance: an error below [`MIN_NOISE_PER_COIL`] times the coils, and
/// a warning's text below [`GOOD_NOISE_PER_COIL`] times.
pub fn check_noise_samples(k: usize, coils: usize) -> Result<Option<String>> {
    if k < MIN_NOISE_PER_COIL * coils {
        return Err(Error::Invalid {
            what: "noise samples",
            reason: format!(
                "{k} per coil cannot estimate the noise covariance of {coils} coils: at least \
                 {} are needed ({MIN_NOISE_PER_COIL} per coil), {} for a stable estimate",
                MIN_NOISE_PER_COIL * coils,
                GOOD_NOISE_PER_COIL * coils
            ),
        });
    }
    Ok((k < GOOD_NOISE_PER_COIL * coils).then(|| {
        format!(
            "{k} noise samples per coil estimate the covariance of {coils} coils unstably: \
             {} or more ({GOOD_NOISE_PER_COIL} per coil) are advised",
            GOOD_NOISE_PER_COIL * coils
        )
    }))
}

/// The largest condition number of a noise covariance that whitening
/// survives: its weakest direction is amplified by the square root (here
/// 1000 times), far beyond any real coil array, and beyond what float32
/// data carry above their rounding (one coil at 1e-11 of the others gave
/// -87 dB).
pub const MAX_CONDITION: f64 = 1e6;

/// The condition number of a Hermitian covariance (largest eigenvalue over
/// smallest; infinite when the smallest is not positive).
pub fn condition(psi: &[C64], coils: usize) -> Result<f64> {
    Error::check_len("noise covariance (C x C)", coils * coils, psi.len())?;
    let m = DMatrix::from_row_slice(coils, coils, psi);
    // The Hermitian part: rounding leaves a covariance nearly Hermitian.
    let h = (&m + m.adjoint()) * C64::new(0.5, 0.0);
    let e = h.symmetric_eigenvalues();
    let (lo, hi) = e.iter().fold((f64::INFINITY, 0.0f64), |(lo, hi), v| {
        (lo.min(*v), hi.max(*v))
    });
    Ok(if lo > 0.0 { hi / lo } else { f64::INFINITY })
}

/// The prewhitening mix `sigma L^-1`, with `Psi = L L^H` (Cholesky) and
/// `sigma^2` the mean of Psi's diagonal: after it the noise covariance is
/// `sigma^2 I`, so the data keep their scale. `psi` is C x C, row-major,
/// Hermitian; a singular one is an error, as whitening would divide by 0.
pub fn whitening(psi: &[C64], coils: usize) -> Result<Mix> {
    Error::check_len("noise covariance (C x C)", coils * coils, psi.len())?;
    let bad = |reason: String| Error::Invalid {
        what: "noise covariance",
        reason,
    };
    if let Some(i) = psi
        .iter()
        .position(|v| !(v.re.is_finite() && v.im.is_finite()))
    {
        return Err(bad(format!("entry {i} is {}", psi[i])));
    }
    let m = DMatrix::from_row_slice(coils, coils, psi);
    let scale = (0..coils).map(|i| m[(i, i)].norm()).fold(0.0, f64::max);
    for i in 0..coils {
        if m[(i, i)].im.abs() > 1e-6 * scale {
            return Err(bad(format!(
                "has diagonal entry ({i}, {i}) = {}: a coil's noise variance is real",
                m[(i, i)]
            )));
        }
    }
    for a in 0..coils {
        for b in 0..a {
            if (m[(a, b)] - m[(b, a)].conj()).norm() > 1e-6 * scale {
                return Err(bad(format!(
                    "is not Hermitian: entry ({a}, {b}) is {} but ({b}, {a}) is {}",
                    m[(a, b)],
                    m[(b, a)]
                )));
            }
        }
    }
    let singular = || {
        bad(format!(
            "is singular (not positive definite) for {coils} coils: a coil without noise of its own, \
             or fewer noise samples than coils"
        ))
    };
    let l = nalgebra::Cholesky::new(m.clone())
        .ok_or_else(singular)?
        .unpack();
    // A pivot this small against the largest variance: numerically singular.
    let least = (0..coils)
        .map(|i| l[(i, i)].re)
        .fold(f64::INFINITY, f64::min);
    if !(scale > 0.0) || least * least < 1e-12 * scale {
        return Err(singular());
    }
    let sigma = ((0..coils).map(|i| m[(i, i)].re).sum::<f64>() / coils as f64).sqrt();
    let inv = l
        .solve_lower_triangular(&DMatrix::identity(coils, coils))
        .ok_or_else(singular)?;
    let mut out = Vec::with_capacity(coils * coils);
    for r in 0..coils {
        for c in 0..coils {
            out.push(inv[(r, c)] * sigma);
        }
    }
    Ok(Mix {
        rows: coils,
        cols: coils,
        m: out,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn psi3() -> Vec<C64> {
        // Hermitian positive definite: a correlated 3-coil covariance.
        let c = |re, im| C64::new(re, im);
        vec![
            c(2.0, 0.0),
            c(0.5, 0.3),
            c(0.1, 0.0),
            c(0.5, -0.3),
            c(1.0, 0.0),
            c(0.2, -0.1),
            c(0.1, 0.0),
            c(0.2, 0.1),
            c(1.5, 0.0),
        ]
    }

    #[test]
    fn whitened_covariance_is_sigma_squared_identity() {
        let psi = psi3();
        let w = whitening(&psi, 3).unwrap();
        let sigma2 = (2.0 + 1.0 + 1.5) / 3.0;
        // W Psi W^H = sigma^2 I
        for a in 0..3 {
            for b in 0..3 {
                let v: C64 = (0..3)
                    .flat_map(|i| (0..3).map(move |j| (i, j)))
                    .map(|(i, j)| w.m[a * 3 + i] * psi[i * 3 + j] * w.m[b * 3 + j].conj())
                    .sum();
                let want = if a == b { sigma2 } else { 0.0 };
                assert!((v - C64::new(want, 0.0)).norm() < 1e-12, "({a}, {b}): {v}");
            }
        }
    }

    #[test]
    fn covariance_of_samples_and_bad_covariances() {
        // Two coils, the second twice the first: singular.
        let noise: Vec<C64> = (0..40)
            .map(|i| C64::new((i as f64 * 0.7).sin(), (i as f64 * 1.3).cos()))
            .collect();
        let mut two = noise[..20].to_vec();
        two.extend(noise[..20].iter().map(|v| v * 2.0));
        let psi = covariance(&two, 2).unwrap();
        assert!((psi[3].re - 4.0 * psi[0].re).abs() < 1e-12);
        let e = whitening(&psi, 2).unwrap_err().to_string();
        assert!(e.contains("singular"), "{e}");
        // Independent coils: whitening works.
        let psi = covariance(&noise, 2).unwrap();
        assert!(whitening(&psi, 2).is_ok());
        let mut skew = psi3();
        skew[1] = C64::new(0.9, 0.0);
        let e = whitening(&skew, 3).unwrap_err().to_string();
        assert!(e.contains("not Hermitian"), "{e}");
        let e = whitening(&psi3(), 2).unwrap_err().to_string();
        assert!(e.contains("expected length 4"), "{e}");
        let e = covariance(&noise[..7], 2).unwrap_err().to_string();
        assert!(e.contains("not 2 coils"), "{e}");
    }

    #[test]
    fn too_few_noise_samples_and_ill_conditioned_or_complex_variances() {
        // 4C is the least, 20C stable.
        assert!(check_noise_samples(31, 8).is_err());
        assert!(check_noise_samples(32, 8).unwrap().is_some());
        assert!(check_noise_samples(160, 8).unwrap().is_none());
        // The condition number of a diagonal covariance is its range.
        let mut psi = vec![C64::default(); 9];
        for (i, v) in [2.0, 1.0, 1e-11].iter().enumerate() {
            psi[4 * i] = C64::new(*v, 0.0);
        }
        let k = condition(&psi, 3).unwrap();
        assert!((k / 2e11 - 1.0).abs() < 1e-9, "{k}");
        assert!(k > MAX_CONDITION);
        assert!((condition(&psi3(), 3).unwrap()) < 10.0);
        // A variance with an imaginary part: an error naming the entry.
        let mut bad = psi3();
        bad[4] = C64::new(1.0, 0.5);
        let e = whitening(&bad, 3).unwrap_err().to_string();
        assert!(e.contains("(1, 1)") && e.contains("real"), "{e}");
    }
}
