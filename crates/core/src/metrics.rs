//! Image-quality metrics, as defined in the README and the book.

/// PSNR in dB of the magnitude image `recon` against the real truth `truth`:
/// `20 log10(max |truth| / RMSE(|recon| - truth))`.
pub fn psnr_db(recon_mag: &[f64], truth: &[f64]) -> f64 {
    let peak = truth.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    20.0 * (peak / rmse(recon_mag, truth)).log10()
}

/// Percent error `100 RMS(|recon| - truth) / RMS(truth)`.
pub fn percent_error(recon_mag: &[f64], truth: &[f64]) -> f64 {
    100.0 * rmse(recon_mag, truth) / rms(truth)
}

/// [`psnr_db`] and [`percent_error`] of the magnitude of the complex
/// `image`, summed over the voxels side by side with no image of
/// magnitudes made (for a 256^3 volume, that would cost more than the
/// sums).
pub fn of_magnitude(image: &[crate::Complex<f64>], truth: &[f64]) -> (f64, f64) {
    use rayon::prelude::*;
    assert_eq!(
        image.len(),
        truth.len(),
        "an image and a truth of different lengths"
    );
    // sum (|x| - t)^2, sum t^2, max |t|: fixed chunks summed in order, then
    // the chunks' sums in order, so that the figures do not depend on how
    // rayon splits the work (which varies with the load), and a run
    // repeats them bit for bit.
    const CHUNK: usize = 1 << 12;
    let parts: Vec<(f64, f64, f64)> = image
        .par_chunks(CHUNK)
        .zip(truth.par_chunks(CHUNK))
        .map(|(x, t)| {
            x.iter().zip(t).fold((0.0, 0.0, 0.0f64), |a, (x, &t)| {
                (a.0 + (x.norm() - t).powi(2), a.1 + t * t, a.2.max(t.abs()))
            })
        })
        .collect();
    let (err, energy, peak) = parts.iter().fold((0.0, 0.0, 0.0f64), |a, b| {
        (a.0 + b.0, a.1 + b.1, a.2.max(b.2))
    });
    let n = image.len() as f64;
    let (rmse, rms) = ((err / n).sqrt(), (energy / n).sqrt());
    (20.0 * (peak / rmse).log10(), 100.0 * rmse / rms)
}

/// Root-mean-square difference.
pub fn rmse(a: &[f64], b: &[f64]) -> f64 {
    assert_eq!(a.len(), b.len(), "rmse of arrays of different lengths");
    let s: f64 = a.iter().zip(b).map(|(x, y)| (x - y) * (x - y)).sum();
    (s / a.len() as f64).sqrt()
}

/// Root mean square.
pub fn rms(a: &[f64]) -> f64 {
    (a.iter().map(|x| x * x).sum::<f64>() / a.len() as f64).sqrt()
}

/// Normalised RMS error of complex vectors, `||a - b|| / ||b||`, as BART's
/// `nrmse` compares whole pipelines.
pub fn nrmse<T: crate::Real>(a: &[crate::Complex<T>], b: &[crate::Complex<T>]) -> f64 {
    assert_eq!(a.len(), b.len(), "nrmse of arrays of different lengths");
    let mut num = 0.0;
    let mut den = 0.0;
    for (x, y) in a.iter().zip(b) {
        let (xr, xi, yr, yi) = (x.re.f64(), x.im.f64(), y.re.f64(), y.im.f64());
        num += (xr - yr).powi(2) + (xi - yi).powi(2);
        den += yr * yr + yi * yi;
    }
    (num / den).sqrt()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Complex;

    #[test]
    fn of_magnitude_agrees_with_the_definitions() {
        let n = 10_000;
        let truth: Vec<f64> = (0..n)
            .map(|i| ((i * 37 % 101) as f64 - 20.0) / 7.0)
            .collect();
        let image: Vec<Complex<f64>> = (0..n)
            .map(|i| {
                Complex::new(
                    truth[i] + 0.1 * ((i % 7) as f64 - 3.0),
                    0.05 * (i % 3) as f64,
                )
            })
            .collect();
        let mag: Vec<f64> = image.iter().map(|c| c.norm()).collect();
        let (p, e) = of_magnitude(&image, &truth);
        // the same sums in another order: equal to rounding
        assert!((p - psnr_db(&mag, &truth)).abs() < 1e-9, "{p}");
        assert!((e - percent_error(&mag, &truth)).abs() < 1e-9, "{e}");
    }

    #[test]
    fn psnr_of_a_known_error() {
        // truth peak 2, every voxel off by 0.02: PSNR = 20 log10(2 / 0.02) = 40 dB
        let truth = [0.0, 1.0, 2.0, 1.5];
        let recon: Vec<f64> = truth.iter().map(|v| v + 0.02).collect();
        assert!((psnr_db(&recon, &truth) - 40.0).abs() < 1e-9);
        let expected = 100.0 * 0.02 / rms(&truth);
        assert!((percent_error(&recon, &truth) - expected).abs() < 1e-9);
    }
}
