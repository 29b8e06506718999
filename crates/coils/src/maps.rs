//! Sensitivity maps from the data: Inati's iteration on low-resolution
//! coil images, and how well two sets of maps agree.

use crate::{check, rss, MapParams, C64};
use rayon::prelude::*;
use recon_core::{Error, Result};

/// Sensitivity maps from low-resolution coil images on the grid `n`
/// (Inati's iteration; see the crate's notes).
pub fn estimate_maps(n: [usize; 3], images: &[Vec<C64>], p: &MapParams) -> Result<Vec<Vec<C64>>> {
    let len: usize = n.iter().product();
    check("coil image (one value per voxel)", images, len)?;
    if p.smoothing % 2 == 0 || !(p.floor.is_finite() && p.floor >= 0.0 && p.floor < 1.0) {
        return Err(Error::Invalid {
            what: "coil map settings",
            reason: format!(
                "smoothing must be odd and floor in [0, 1), got {} and {}",
                p.smoothing, p.floor
            ),
        });
    }
    // rho = sum_c conj(u_c) I_c
    let u = dominant_direction(images);
    let mut rho = combine(images, |c, _| u[c].conj());
    let mut maps = vec![vec![C64::default(); len]; images.len()];
    for _ in 0..p.iterations.max(1) {
        // A_c = smooth(I_c conj(rho))
        maps.par_iter_mut().zip(images).for_each(|(a, im)| {
            for ((a, i), r) in a.iter_mut().zip(im).zip(&rho) {
                *a = i * r.conj();
            }
            smooth(a, n, p.smoothing);
        });
        // S_c = A_c / max(||A||, floor^2 peak): A grows like the signal
        // squared, so the floor on the amplitude is squared.
        let norm = rss(&maps);
        let peak = norm.iter().copied().fold(0.0, f64::max);
        if !(peak > 0.0 && peak.is_finite()) {
            return Err(Error::Invalid {
                what: "coil images",
                reason: format!("they hold no signal to estimate maps from (peak {peak})"),
            });
        }
        let least = p.floor * p.floor * peak;
        maps.par_iter_mut().for_each(|a| {
            for (a, s) in a.iter_mut().zip(&norm) {
                *a /= s.max(least);
            }
        });
        // rho = sum_c conj(S_c) I_c
        rho = combine(images, |c, i| maps[c][i].conj());
    }
    Ok(maps)
}

/// `sum_c w(c, i) I_c[i]` per voxel i.
fn combine(images: &[Vec<C64>], w: impl Fn(usize, usize) -> C64 + Sync) -> Vec<C64> {
    (0..images[0].len())
        .into_par_iter()
        .map(|i| {
            images
                .iter()
                .enumerate()
                .map(|(c, im)| w(c, i) * im[i])
                .sum()
        })
        .collect()
}

/// The dominant eigenvector of `sum_x I(x) I(x)^H` (C x C), by power
/// iteration: the coils' combination that carries most of the signal.
fn dominant_direction(images: &[Vec<C64>]) -> Vec<C64> {
    let c = images.len();
    let mut cov = vec![C64::default(); c * c];
    for a in 0..c {
        for b in 0..=a {
            let v: C64 = images[a]
                .par_iter()
                .zip(&images[b])
                .map(|(x, y)| x * y.conj())
                .sum();
            cov[a * c + b] = v;
            cov[b * c + a] = v.conj();
        }
    }
    let mut u = vec![C64::new(1.0, 0.0); c];
    for _ in 0..50 {
        let mut v: Vec<C64> = (0..c)
            .map(|a| (0..c).map(|b| cov[a * c + b] * u[b]).sum())
            .collect();
        let norm = v.iter().map(|x| x.norm_sqr()).sum::<f64>().sqrt();
        if !(norm > 0.0) {
            break;
        }
        v.iter_mut().for_each(|x| *x /= norm);
        u = v;
    }
    u
}

/// Box filter of odd width `w` along each axis in turn, in place; at the
/// edges the box holds only the voxels inside.
fn smooth(x: &mut [C64], n: [usize; 3], w: usize) {
    let h = w / 2;
    if h == 0 {
        return;
    }
    let stride = [1, n[0], n[0] * n[1]];
    let mut line = Vec::new();
    let mut out = Vec::new();
    for d in 0..3 {
        let len = n[d];
        let lines = x.len() / len;
        for l in 0..lines {
            // the l-th line along axis d: its first point
            let start = match d {
                0 => l * n[0],
                1 => (l / n[0]) * n[0] * n[1] + l % n[0],
                _ => l,
            };
            line.clear();
            line.extend((0..len).map(|k| x[start + k * stride[d]]));
            // prefix sums, then each box's mean
            out.clear();
            let mut prefix = Vec::with_capacity(len + 1);
            prefix.push(C64::default());
            for v in &line {
                let last = *prefix.last().unwrap();
                prefix.push(last + v);
            }
            for k in 0..len {
                let (lo, hi) = (k.saturating_sub(h), (k + h + 1).min(len));
                out.push((prefix[hi] - prefix[lo]) / (hi - lo) as f64);
            }
            for (k, v) in out.iter().enumerate() {
                x[start + k * stride[d]] = *v;
            }
        }
    }
}

/// How well maps `a` agree with maps `b` where `mask` is set: the mean
/// over those voxels of `|<a(x), b(x)>| / (||a(x)|| ||b(x)||)`, the cosine
/// of the angle between the coil vectors, blind to a phase common to all
/// coils (which SENSE cannot see). 1 is perfect agreement.
pub fn agreement(a: &[Vec<C64>], b: &[Vec<C64>], mask: &[bool]) -> Result<f64> {
    check("coil map (one value per voxel)", a, mask.len())?;
    check("coil map (one value per voxel)", b, mask.len())?;
    Error::check_len("coil maps (one per coil)", a.len(), b.len())?;
    let (sum, count) = (0..mask.len())
        .into_par_iter()
        .filter(|&i| mask[i])
        .map(|i| {
            let dot: C64 = a.iter().zip(b).map(|(a, b)| a[i].conj() * b[i]).sum();
            let na = a.iter().map(|a| a[i].norm_sqr()).sum::<f64>().sqrt();
            let nb = b.iter().map(|b| b[i].norm_sqr()).sum::<f64>().sqrt();
            let cos = if na > 0.0 && nb > 0.0 {
                dot.norm() / (na * nb)
            } else {
                0.0
            };
            (cos, 1usize)
        })
        .reduce(|| (0.0, 0), |x, y| (x.0 + y.0, x.1 + y.1));
    if count == 0 {
        return Err(Error::Invalid {
            what: "coil map agreement",
            reason: "the mask selects no voxel".into(),
        });
    }
    Ok(sum / count as f64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::MapParams;

    /// Smooth maps and an object on a 16^3 grid: coil c's sensitivity is a
    /// plane wave of low frequency with a magnitude slope.
    fn truth(n: [usize; 3], coils: usize) -> (Vec<Vec<C64>>, Vec<f64>) {
        let len: usize = n.iter().product();
        let pos = |i: usize| {
            let c = [i % n[0], (i / n[0]) % n[1], i / (n[0] * n[1])];
            [0, 1, 2].map(|d| c[d] as f64 / n[d] as f64 - 0.5)
        };
        let maps = (0..coils)
            .map(|c| {
                let t = std::f64::consts::TAU * c as f64 / coils as f64;
                (0..len)
                    .map(|i| {
                        let r = pos(i);
                        let mag = 1.0 + 0.8 * (r[0] * t.cos() + r[1] * t.sin());
                        C64::from_polar(mag, t + 1.5 * r[2] + r[0])
                    })
                    .collect()
            })
            .collect();
        let object = (0..len)
            .map(|i| {
                let r = pos(i);
                let s: f64 = r.iter().map(|v| v * v).sum();
                if s < 0.16 {
                    1.0 + r[0]
                } else {
                    0.0
                }
            })
            .collect();
        (maps, object)
    }

    #[test]
    fn maps_from_noiseless_coil_images_agree_with_the_truth() {
        let n = [16, 16, 16];
        let (maps, object) = truth(n, 6);
        let images: Vec<Vec<C64>> = maps
            .iter()
            .map(|m| m.iter().zip(&object).map(|(s, o)| s * *o).collect())
            .collect();
        let est = estimate_maps(n, &images, &MapParams::default()).unwrap();
        let mask: Vec<bool> = object.iter().map(|&o| o > 0.0).collect();
        let a = agreement(&est, &maps, &mask).unwrap();
        // The smoothing box blurs the maps' own variation by about a voxel:
        // agreement close to 1, far above unrelated maps (next check).
        assert!(a > 0.99, "agreement {a}");
        // Unit norm inside the object.
        for i in (0..mask.len()).filter(|&i| mask[i]) {
            let norm: f64 = est.iter().map(|m| m[i].norm_sqr()).sum::<f64>().sqrt();
            assert!((norm - 1.0).abs() < 1e-9 || object[i] < 0.7, "norm {norm}");
        }
        // Outside, far from the object, the maps fade to 0.
        assert!(est.iter().all(|m| m[0].norm() < 1e-3));
        let (other, _) = truth(n, 6);
        let shuffled: Vec<Vec<C64>> = other.into_iter().rev().collect();
        let b = agreement(&shuffled, &maps, &mask).unwrap();
        assert!(b < 0.9, "unrelated maps agree {b}");
    }

    #[test]
    fn smoothing_keeps_constants_and_linear_ramps_inside() {
        let n = [7, 5, 6];
        let len = 7 * 5 * 6;
        let mut x: Vec<C64> = (0..len).map(|_| C64::new(2.0, -1.0)).collect();
        smooth(&mut x, n, 3);
        assert!(x.iter().all(|v| (v - C64::new(2.0, -1.0)).norm() < 1e-12));
        let mut ramp: Vec<C64> = (0..len).map(|i| C64::new((i % 7) as f64, 0.0)).collect();
        smooth(&mut ramp, n, 3);
        for i in 0..len {
            let xi = i % 7;
            if (1..6).contains(&xi) {
                assert!((ramp[i].re - xi as f64).abs() < 1e-12);
            }
        }
    }

    #[test]
    fn bad_inputs_are_named() {
        let n = [4, 4, 4];
        let e = estimate_maps(n, &[vec![C64::default(); 10]], &MapParams::default()).unwrap_err();
        assert!(e.to_string().contains("expected length 64"), "{e}");
        let e = estimate_maps(n, &[], &MapParams::default()).unwrap_err();
        assert!(e.to_string().contains("no coils"), "{e}");
        let e = estimate_maps(n, &[vec![C64::default(); 64]], &MapParams::default()).unwrap_err();
        assert!(e.to_string().contains("no signal"), "{e}");
        let p = MapParams {
            smoothing: 4,
            ..MapParams::default()
        };
        let e = estimate_maps(n, &[vec![C64::new(1.0, 0.0); 64]], &p).unwrap_err();
        assert!(e.to_string().contains("odd"), "{e}");
    }
}
