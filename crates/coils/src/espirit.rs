//! ESPIRiT coil maps (Uecker, Lai, Murphy et al., MRM 2014; BART's
//! `ecalib`), from the Cartesian k-space centre of each coil.
//!
//! ```text
//! A        calibration matrix: a row per k x k (x k) patch of the centre,
//!          a column per coil and kernel offset (C K columns)
//! V        the right singular vectors of A with sigma > t sigma_max
//!          (eigenvectors of A^H A): the kernels that span the data
//! G(x)     = 1/K sum_i v_i(x) v_i(x)^H, C x C per voxel, where
//!          v_i,c(x) = sum_m v_i[c, m] exp(-i 2pi m.x / N) (the kernel's
//!          transform; G is the image-space form of the projection onto V)
//! S(x)     the eigenvector of G(x) with the largest eigenvalue lambda(x):
//!          lambda ~ 1 where the coils see signal, and S is then the coils'
//!          sensitivities up to a phase; 0 where lambda < c (the crop).
//! ```
//!
//! G's entries are sums of `(2k - 1)^d` complex exponentials (the
//! correlations of the kernels), so they are evaluated by separable DFTs,
//! on a grid coarser than the image when the image is large (the maps are
//! as smooth as G), and interpolated back. Each voxel's eigenvector is
//! rotated so that the coil with the most energy has phase 0, which makes
//! the maps' phase as smooth as that coil's. Everything is f64 on the host.

use crate::{cells, C64};
use nalgebra::{DMatrix, SymmetricEigen};
use rayon::prelude::*;
use recon_core::{Error, Result};

/// ESPIRiT's settings: BART's `ecalib` defaults but for the threshold
/// (a centre gridded from non-Cartesian data is noisier than a Cartesian
/// calibration scan: on the sodium brain at SNR 30, 8 coils, BART's 0.001
/// keeps noise and the maps' agreement with the true ones falls to 0.44;
/// from 0.005 to 0.05 it is 0.999) and, in the pipeline, the kernel of a
/// 3-D grid (5 rather than 6 keeps A^H A at 125 C columns).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EspiritParams {
    /// Kernel width k per axis (a flat axis: 1).
    pub kernel: usize,
    /// Singular values kept: those above `threshold` times the largest.
    pub threshold: f64,
    /// Maps are 0 where the largest eigenvalue of G is below this.
    pub crop: f64,
    /// Voxels per axis of the cells the eigenvectors are computed on (1:
    /// every voxel); the maps are interpolated from the cells' centres.
    pub cell: usize,
}

impl Default for EspiritParams {
    fn default() -> Self {
        EspiritParams {
            kernel: 6,
            threshold: 0.02,
            crop: 0.8,
            cell: 1,
        }
    }
}

/// The most columns of the calibration matrix (C K): its Gram matrix's
/// eigendecomposition costs (C K)^3 (about 10 s for 2000 in pure Rust).
pub const MAX_COLUMNS: usize = 2048;

/// A separable DFT along `axis` of `x` (shape `n`, x fastest): output
/// length `m` along that axis, `out[j] = sum_i w(j, i) x[i]`.
fn along(x: &[C64], n: [usize; 3], axis: usize, m: usize, w: &[C64]) -> (Vec<C64>, [usize; 3]) {
    let mut shape = n;
    shape[axis] = m;
    let stride = [1, n[0], n[0] * n[1]];
    let len: usize = shape.iter().product();
    let out: Vec<C64> = (0..len)
        .into_par_iter()
        .map(|o| {
            let c = [
                o % shape[0],
                (o / shape[0]) % shape[1],
                o / (shape[0] * shape[1]),
            ];
            let j = c[axis];
            let mut base = c;
            base[axis] = 0;
            let b = base[0] * stride[0] + base[1] * stride[1] + base[2] * stride[2];
            (0..n[axis])
                .map(|i| w[j * n[axis] + i] * x[b + i * stride[axis]])
                .sum()
        })
        .collect();
    (out, shape)
}

/// The twiddles `exp(sign i 2pi k (i - N/2) / N)` for `k` in `ks` and
/// voxel `i` of `n`.
fn twiddles(ks: &[f64], n: usize, sign: f64) -> Vec<C64> {
    let mut w = Vec::with_capacity(ks.len() * n);
    for &k in ks {
        for i in 0..n {
            let x = i as f64 - (n / 2) as f64;
            w.push(C64::from_polar(
                1.0,
                sign * 2.0 * std::f64::consts::PI * k * x / n as f64,
            ));
        }
    }
    w
}

/// Integer frequencies `-r/2 .. r/2 - 1` (0 for r = 1).
fn centred(r: usize) -> Vec<f64> {
    (0..r).map(|j| j as f64 - (r / 2) as f64).collect()
}

/// Each coil image's k-space centre of `r` points per axis (`1` along a
/// flat axis): `D(k) = sum_x I(x) exp(-i 2pi k.x / N)` at integer `k`,
/// `x_i = i - N/2`, the grid's own convention.
pub fn calibration(images: &[Vec<C64>], n: [usize; 3], r: [usize; 3]) -> Result<Vec<Vec<C64>>> {
    crate::check(
        "coil image (one value per voxel)",
        images,
        n.iter().product(),
    )?;
    for d in 0..3 {
        if r[d] == 0 || r[d] > n[d] {
            return Err(Error::Invalid {
                what: "ESPIRiT calibration region",
                reason: format!("{r:?} points do not fit the grid {n:?}"),
            });
        }
    }
    let w: Vec<Vec<C64>> = (0..3)
        .map(|d| twiddles(&centred(r[d]), n[d], -1.0))
        .collect();
    Ok(images
        .iter()
        .map(|im| {
            let (mut x, mut s) = (im.clone(), n);
            for d in 0..3 {
                (x, s) = along(&x, s, d, r[d], &w[d]);
            }
            x
        })
        .collect())
}

/// The kernels that span the calibration data: eigenvectors of A^H A
/// whose singular values exceed `threshold` times the largest, each `C K`
/// long (coil-major: `v[c K + m]`).
fn kernels(
    calib: &[Vec<C64>],
    r: [usize; 3],
    k: [usize; 3],
    threshold: f64,
) -> Result<Vec<Vec<C64>>> {
    let coils = calib.len();
    let kk: usize = k.iter().product();
    let cols = coils * kk;
    if cols > MAX_COLUMNS {
        return Err(Error::Invalid {
            what: "ESPIRiT calibration",
            reason: format!(
                "{coils} coils of {kk}-point kernels make {cols} columns (at most {MAX_COLUMNS}): compress the coils (sense.compress_coils)"
            ),
        });
    }
    let positions: Vec<[usize; 3]> = (0..=r[2] - k[2])
        .flat_map(|z| {
            (0..=r[1] - k[1]).flat_map(move |y| (0..=r[0] - k[0]).map(move |x| [x, y, z]))
        })
        .collect();
    let offsets: Vec<[usize; 3]> = (0..k[2])
        .flat_map(|z| (0..k[1]).flat_map(move |y| (0..k[0]).map(move |x| [x, y, z])))
        .collect();
    // A^H A, summed over the patches in parallel.
    let row = |p: &[usize; 3]| -> Vec<C64> {
        let mut v = Vec::with_capacity(cols);
        for c in calib {
            for o in &offsets {
                let q = [p[0] + o[0], p[1] + o[1], p[2] + o[2]];
                v.push(c[q[0] + r[0] * (q[1] + r[1] * q[2])]);
            }
        }
        v
    };
    let gram = positions
        .par_chunks(64)
        .map(|chunk| {
            let mut g = DMatrix::<C64>::zeros(cols, cols);
            for p in chunk {
                let a = row(p);
                for i in 0..cols {
                    let ai = a[i].conj();
                    if ai == C64::default() {
                        continue;
                    }
                    for j in 0..cols {
                        g[(i, j)] += ai * a[j];
                    }
                }
            }
            g
        })
        .reduce(|| DMatrix::<C64>::zeros(cols, cols), |a, b| a + b);
    let eig = SymmetricEigen::new(gram);
    let largest = eig.eigenvalues.iter().cloned().fold(0.0, f64::max);
    if !(largest > 0.0) {
        return Err(Error::Invalid {
            what: "ESPIRiT calibration",
            reason: "the k-space centre holds no signal".into(),
        });
    }
    // sigma_i > t sigma_max, in eigenvalues sigma^2.
    let floor = threshold * threshold * largest;
    Ok((0..cols)
        .filter(|&i| eig.eigenvalues[i] > floor)
        // A's rows are combinations of the conjugates of A^H A's
        // eigenvectors: the kernels, as patches, are those conjugates.
        .map(|i| {
            eig.eigenvectors
                .column(i)
                .iter()
                .map(|v| v.conj())
                .collect()
        })
        .collect())
}

/// ESPIRiT maps on the grid `n` from the coils' k-space centre `calib`
/// (`r` points per axis, from [`calibration`]), one per coil, unit norm
/// where the coils see signal and 0 elsewhere.
pub fn espirit_maps(
    calib: &[Vec<C64>],
    r: [usize; 3],
    n: [usize; 3],
    p: &EspiritParams,
) -> Result<Vec<Vec<C64>>> {
    crate::check(
        "ESPIRiT calibration (r points per axis)",
        calib,
        r.iter().product(),
    )?;
    let coils = calib.len();
    let k = [0, 1, 2].map(|d| if n[d] == 1 { 1 } else { p.kernel.min(r[d]) });
    if (0..3).any(|d| n[d] > 1 && k[d] < 2) {
        return Err(Error::Invalid {
            what: "ESPIRiT kernel",
            reason: format!(
                "kernel {k:?} on calibration region {r:?}: at least 2 points per resolved axis"
            ),
        });
    }
    let v = kernels(calib, r, k, p.threshold)?;
    let kk: usize = k.iter().product();
    // Correlations R_cd[delta] = sum_i sum_{m - m' = delta} v_i[c, m] conj(v_i[d, m']),
    // delta in -(k-1) .. k-1 per axis, stored at delta + k - 1.
    let span = k.map(|k| 2 * k - 1);
    let slen: usize = span.iter().product();
    let offsets: Vec<[usize; 3]> = (0..k[2])
        .flat_map(|z| (0..k[1]).flat_map(move |y| (0..k[0]).map(move |x| [x, y, z])))
        .collect();
    let pairs: Vec<(usize, usize)> = (0..coils)
        .flat_map(|c| (c..coils).map(move |d| (c, d)))
        .collect();
    let corr: Vec<Vec<C64>> = pairs
        .par_iter()
        .map(|&(c, d)| {
            let mut out = vec![C64::default(); slen];
            for vi in &v {
                for (a, m) in offsets.iter().enumerate() {
                    let x = vi[c * kk + a];
                    if x == C64::default() {
                        continue;
                    }
                    for (b, m2) in offsets.iter().enumerate() {
                        let delta = [0, 1, 2].map(|e| m[e] + k[e] - 1 - m2[e]);
                        out[delta[0] + span[0] * (delta[1] + span[1] * delta[2])] +=
                            x * vi[d * kk + b].conj();
                    }
                }
            }
            out
        })
        .collect();
    // G on the cells' grid: the cells' centres are voxels
    // (i + 1/2) f - 1/2 of the image.
    let f = p.cell.max(1);
    let m = cells::shape(n, f);
    let w: Vec<Vec<C64>> = (0..3)
        .map(|d| {
            let deltas: Vec<f64> = (0..span[d]).map(|j| j as f64 - (k[d] - 1) as f64).collect();
            let mut w = Vec::with_capacity(m[d] * span[d]);
            for i in 0..m[d] {
                let x = if n[d] == 1 {
                    0.0
                } else {
                    (i as f64 + 0.5) * f as f64 - 0.5 - (n[d] / 2) as f64
                };
                for &delta in &deltas {
                    let phase = 2.0 * std::f64::consts::PI * delta * x / n[d] as f64;
                    // The 1/K of G rides on the first axis.
                    w.push(C64::from_polar(
                        if d == 0 { 1.0 / kk as f64 } else { 1.0 },
                        phase,
                    ));
                }
            }
            w
        })
        .collect();
    let g: Vec<Vec<C64>> = corr
        .iter()
        .map(|r| {
            let (mut x, mut s) = (r.clone(), span);
            for d in 0..3 {
                (x, s) = along(&x, s, d, m[d], &w[d]);
            }
            x
        })
        .collect();
    // The coil with the most energy in the calibration data sets the phase.
    let energy: Vec<f64> = calib
        .iter()
        .map(|c| c.iter().map(|v| v.norm_sqr()).sum())
        .collect();
    let reference = (0..coils)
        .max_by(|&a, &b| energy[a].total_cmp(&energy[b]))
        .expect("a coil");
    let cells_len: usize = m.iter().product();
    let per_cell: Vec<Vec<C64>> =
        (0..cells_len)
            .into_par_iter()
            .map(|x| {
                let mut gm = DMatrix::<C64>::zeros(coils, coils);
                for (pi, &(c, d)) in pairs.iter().enumerate() {
                    gm[(c, d)] = g[pi][x];
                    gm[(d, c)] = g[pi][x].conj();
                }
                let eig = SymmetricEigen::new(gm);
                let (top, lambda) = eig.eigenvalues.iter().enumerate().fold(
                    (0, f64::NEG_INFINITY),
                    |b, (i, &l)| if l > b.1 { (i, l) } else { b },
                );
                if lambda < p.crop {
                    return vec![C64::default(); coils];
                }
                let mut s: Vec<C64> = eig.eigenvectors.column(top).iter().copied().collect();
                let rf = s[reference];
                let rot = if rf.norm() > 0.0 {
                    rf.conj() / rf.norm()
                } else {
                    C64::new(1.0, 0.0)
                };
                s.iter_mut().for_each(|v| *v *= rot);
                s
            })
            .collect();
    // Back to the voxels, coil by coil, unit norm where the cells are.
    let mut maps: Vec<Vec<C64>> = (0..coils)
        .map(|c| {
            let cellwise: Vec<C64> = per_cell.iter().map(|s| s[c]).collect();
            if f == 1 {
                cellwise
            } else {
                cells::interpolate(&cellwise, n, f)
            }
        })
        .collect();
    let len: usize = n.iter().product();
    for x in 0..len {
        let norm = maps.iter().map(|m| m[x].norm_sqr()).sum::<f64>().sqrt();
        // Inside the crop's support the interpolated vectors stay near unit
        // norm: make it exact; at its edge they fade to 0, as the cells do.
        if norm >= 0.5 {
            maps.iter_mut().for_each(|m| m[x] /= norm);
        }
    }
    Ok(maps)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Coil images of an ellipse seen by `coils` Gaussian coils around
    /// it, each with its own linear phase; the true maps (unit norm) and
    /// the object's mask.
    fn scene(n: [usize; 3], coils: usize) -> (Vec<Vec<C64>>, Vec<Vec<C64>>, Vec<bool>) {
        let len: usize = n.iter().product();
        let pos = |i: usize| -> [f64; 3] {
            let c = [i % n[0], (i / n[0]) % n[1], i / (n[0] * n[1])];
            [0, 1, 2].map(|d| (c[d] as f64 - (n[d] / 2) as f64) / n[d] as f64)
        };
        let object: Vec<f64> = (0..len)
            .map(|i| {
                let p = pos(i);
                let r2 = (p[0] / 0.35).powi(2) + (p[1] / 0.28).powi(2) + (p[2] / 0.3).powi(2);
                if r2 < 1.0 {
                    1.0 + 0.5 * (p[0] > 0.1) as u8 as f64
                } else {
                    0.0
                }
            })
            .collect();
        let truth: Vec<Vec<C64>> = (0..coils)
            .map(|c| {
                let a = 2.0 * std::f64::consts::PI * c as f64 / coils as f64;
                let centre = [0.6 * a.cos(), 0.6 * a.sin(), 0.0];
                (0..len)
                    .map(|i| {
                        let p = pos(i);
                        let d2: f64 = (0..3).map(|d| (p[d] - centre[d]).powi(2)).sum();
                        let phase = 1.5 * p[0] * (c as f64 + 1.0) - 2.0 * p[1] + c as f64;
                        C64::from_polar((-d2 / (2.0 * 0.4 * 0.4)).exp(), phase)
                    })
                    .collect()
            })
            .collect();
        let images = truth
            .iter()
            .map(|s| s.iter().zip(&object).map(|(s, o)| s * o).collect())
            .collect();
        let mask = object.iter().map(|&o| o > 0.0).collect();
        (images, crate::unit_norm(&truth), mask)
    }

    fn agreement_of(n: [usize; 3], r: [usize; 3], p: &EspiritParams) -> f64 {
        let (images, truth, mask) = scene(n, 4);
        let calib = calibration(&images, n, r).unwrap();
        let maps = espirit_maps(&calib, r, n, p).unwrap();
        let a = crate::agreement(&maps, &truth, &mask).unwrap();
        println!("ESPIRiT on {n:?}: agreement {a:.5}");
        a
    }

    #[test]
    fn the_calibration_is_the_dft_of_the_image_at_integer_frequencies() {
        let n = [6, 4, 1];
        let im: Vec<C64> = (0..24)
            .map(|i| C64::new(i as f64, (i % 5) as f64))
            .collect();
        let r = [4, 2, 1];
        let c = calibration(std::slice::from_ref(&im), n, r).unwrap();
        // Direct sum for one frequency: k = (1, -1, 0) sits at (3, 0, 0).
        let k = [1.0, -1.0];
        let mut want = C64::default();
        for (i, v) in im.iter().enumerate() {
            let x = [(i % 6) as f64 - 3.0, (i / 6) as f64 - 2.0];
            let phase = -2.0 * std::f64::consts::PI * (k[0] * x[0] / 6.0 + k[1] * x[1] / 4.0);
            want += v * C64::from_polar(1.0, phase);
        }
        assert!(
            (c[0][3] - want).norm() < 1e-9 * want.norm(),
            "{} vs {want}",
            c[0][3]
        );
    }

    #[test]
    fn espirit_finds_the_true_maps_of_a_2d_scene() {
        let a = agreement_of([32, 32, 1], [24, 24, 1], &EspiritParams::default());
        // The issue's bound for synthetic maps: at least 0.99.
        assert!(a >= 0.99, "agreement {a:.5}");
    }

    #[test]
    fn espirit_finds_the_true_maps_of_a_3d_scene_on_cells() {
        let p = EspiritParams {
            kernel: 5,
            cell: 2,
            ..Default::default()
        };
        let a = agreement_of([16, 16, 16], [12, 12, 12], &p);
        assert!(a >= 0.99, "agreement {a:.5}");
    }

    #[test]
    fn too_many_columns_and_empty_data_are_refused() {
        let n = [8, 8, 8];
        let r = [8, 8, 8];
        let calib = vec![vec![C64::new(1.0, 0.0); 512]; 20];
        // 20 coils of 125-point kernels: 2500 columns.
        let p = EspiritParams {
            kernel: 5,
            ..Default::default()
        };
        let e = espirit_maps(&calib, r, n, &p).unwrap_err().to_string();
        assert!(e.contains("compress"), "{e}");
        let zero = vec![vec![C64::default(); 512]; 2];
        assert!(espirit_maps(&zero, r, n, &p).is_err());
    }
}
