//! Coil compression: the data's dominant coil combinations, by the
//! eigenvectors of the coils' Gram matrix `D D^H` (the left singular
//! vectors of the C x M data matrix, without forming the SVD of M columns).

use crate::{Mix, C64};
use nalgebra::DMatrix;
use recon_core::{Error, Result};

/// How many virtual coils to keep.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Keep {
    /// Exactly this many.
    Coils(usize),
    /// The fewest whose share of the data's energy reaches this fraction.
    Energy(f64),
}

/// The K x C compression mix of `data` (`[C, M]`) and the fraction of
/// the energy the K virtual coils keep.
pub fn compression(data: &[C64], coils: usize, keep: Keep) -> Result<(Mix, f64)> {
    if coils == 0 || !data.len().is_multiple_of(coils) || data.is_empty() {
        return Err(Error::Invalid {
            what: "coil compression",
            reason: format!("{} values are not {coils} coils of samples", data.len()),
        });
    }
    let m = data.len() / coils;
    let mut g = DMatrix::<C64>::zeros(coils, coils);
    for a in 0..coils {
        for b in 0..=a {
            let v: C64 = data[a * m..][..m]
                .iter()
                .zip(&data[b * m..][..m])
                .map(|(x, y)| x * y.conj())
                .sum();
            g[(a, b)] = v;
            g[(b, a)] = v.conj();
        }
    }
    let eig = nalgebra::SymmetricEigen::new(g);
    let mut order: Vec<usize> = (0..coils).collect();
    order.sort_by(|&i, &j| eig.eigenvalues[j].total_cmp(&eig.eigenvalues[i]));
    let total: f64 = eig.eigenvalues.iter().map(|v| v.max(0.0)).sum();
    if !(total > 0.0 && total.is_finite()) {
        return Err(Error::Invalid {
            what: "coil compression",
            reason: "the data hold no energy to compress".into(),
        });
    }
    let k = match keep {
        Keep::Coils(k) if (1..=coils).contains(&k) => k,
        Keep::Coils(k) => {
            return Err(Error::Invalid {
                what: "coil compression",
                reason: format!("{k} virtual coils from {coils}: must be 1 to {coils}"),
            })
        }
        Keep::Energy(f) if f > 0.0 && f <= 1.0 => {
            let mut acc = 0.0;
            order
                .iter()
                .position(|&i| {
                    acc += eig.eigenvalues[i].max(0.0);
                    acc >= f * total * (1.0 - 1e-12)
                })
                .map_or(coils, |p| p + 1)
        }
        Keep::Energy(f) => {
            return Err(Error::Invalid {
                what: "coil compression",
                reason: format!("energy fraction {f}: must lie in (0, 1]"),
            })
        }
    };
    let kept: f64 = order[..k]
        .iter()
        .map(|&i| eig.eigenvalues[i].max(0.0))
        .sum::<f64>()
        / total;
    // Row r: the conjugate of the r-th eigenvector, so out_r = u_r^H d.
    let mut mix = Vec::with_capacity(k * coils);
    for &i in &order[..k] {
        for c in 0..coils {
            mix.push(eig.eigenvectors[(c, i)].conj());
        }
    }
    Ok((
        Mix {
            rows: k,
            cols: coils,
            m: mix,
        },
        kept,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_of_rank_two_compress_to_two_coils_without_loss() {
        // Six coils that are combinations of two sources: two virtual coils
        // keep all the energy, and the compressed data's Gram matrix keeps
        // the energy of the original.
        let m = 50;
        let s1: Vec<C64> = (0..m).map(|i| C64::new((i as f64).sin(), 0.3)).collect();
        let s2: Vec<C64> = (0..m)
            .map(|i| C64::new(0.2, (i as f64 * 0.5).cos()))
            .collect();
        let mut data = Vec::new();
        for c in 0..6 {
            let (a, b) = (
                C64::new(1.0 + c as f64, 0.5),
                C64::new(-0.3, c as f64 * 0.2),
            );
            data.extend(s1.iter().zip(&s2).map(|(x, y)| a * x + b * y));
        }
        let (mix, kept) = compression(&data, 6, Keep::Energy(0.999_999)).unwrap();
        assert_eq!(mix.rows, 2);
        assert!((kept - 1.0).abs() < 1e-9, "{kept}");
        let out = mix.data(&data).unwrap();
        let e = |v: &[C64]| v.iter().map(|x| x.norm_sqr()).sum::<f64>();
        assert!((e(&out) - e(&data)).abs() < 1e-9 * e(&data));
        let (one, kept1) = compression(&data, 6, Keep::Coils(1)).unwrap();
        assert_eq!(one.rows, 1);
        assert!(kept1 < 1.0 && kept1 > 0.5);
        let e = compression(&data, 6, Keep::Coils(7))
            .unwrap_err()
            .to_string();
        assert!(e.contains("must be 1 to 6"), "{e}");
        let e = compression(&data, 6, Keep::Energy(1.5))
            .unwrap_err()
            .to_string();
        assert!(e.contains("(0, 1]"), "{e}");
    }
}
