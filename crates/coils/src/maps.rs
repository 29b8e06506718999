//! Sensitivity maps from the data: Inati's iteration on low-resolution
//! coil images, and how well two sets of maps agree.

use crate::{cells, check, rss, MapParams, C64};
use rayon::prelude::*;
use recon_core::{Error, Result};

/// Sensitivity maps from low-resolution coil images on the grid `n`
/// (Inati's iteration; see the crate's notes). With `p.cell` > 1 the
/// iteration runs on cells of that many voxels per axis: see
/// [`MapParams::cell`] and [`estimate_maps_from_cells`].
pub fn estimate_maps(n: [usize; 3], images: &[Vec<C64>], p: &MapParams) -> Result<Vec<Vec<C64>>> {
    check(
        "coil image (one value per voxel)",
        images,
        n.iter().product(),
    )?;
    check_params(p)?;
    if p.cell == 1 {
        return estimate_maps_from_cells(n, images, p);
    }
    let coarse: Vec<Vec<C64>> = images.iter().map(|im| cells::mean(im, n, p.cell)).collect();
    estimate_maps_from_cells(n, &coarse, p)
}

/// A coil image on the grid `n` averaged over cells of `cell` voxels per
/// axis (the last cell of an axis holds what is left), for
/// [`estimate_maps_from_cells`]: a caller with many coils keeps only these.
/// With cells of one voxel, the image itself.
pub fn cell_means(image: Vec<C64>, n: [usize; 3], cell: usize) -> Vec<C64> {
    if cell <= 1 {
        image
    } else {
        cells::mean(&image, n, cell)
    }
}

/// [`estimate_maps`] from coil images already averaged over cells of
/// `p.cell` voxels ([`cell_means`]; the images themselves when `p.cell` is
/// 1): Inati's iteration on the cells, its last numerators `A_c`
/// interpolated back to the voxels of `n`, then divided there by their
/// root sum of squares.
pub fn estimate_maps_from_cells(
    n: [usize; 3],
    images: &[Vec<C64>],
    p: &MapParams,
) -> Result<Vec<Vec<C64>>> {
    check_params(p)?;
    let nc = cells::shape(n, p.cell);
    check(
        "coil image on cells (one value per cell)",
        images,
        nc.iter().product(),
    )?;
    let a = numerators(nc, images, cells::width(p.smoothing, p.cell), p)?;
    let mut maps = if p.cell == 1 {
        a
    } else {
        a.par_iter()
            .map(|a| cells::interpolate(a, n, p.cell))
            .collect()
    };
    divide(&mut maps, p.floor)?;
    Ok(maps)
}

fn check_params(p: &MapParams) -> Result<()> {
    if p.smoothing.is_multiple_of(2)
        || p.cell == 0
        || !(p.floor.is_finite() && p.floor >= 0.0 && p.floor < 1.0)
    {
        return Err(Error::Invalid {
            what: "coil map settings",
            reason: format!(
                "smoothing must be odd, cell positive and floor in [0, 1), got {}, {} and {}",
                p.smoothing, p.cell, p.floor
            ),
        });
    }
    Ok(())
}

/// Inati's iteration on `images` over the grid `n` with a box of width
/// `w`: the last iteration's `A_c = smooth(I_c conj(rho))`, before the
/// division that makes them maps.
fn numerators(
    n: [usize; 3],
    images: &[Vec<C64>],
    w: usize,
    p: &MapParams,
) -> Result<Vec<Vec<C64>>> {
    let len: usize = n.iter().product();
    // rho = sum_c conj(u_c) I_c
    let u = dominant_direction(images);
    let mut rho = combine(images, |c, _| u[c].conj());
    let mut maps = vec![vec![C64::default(); len]; images.len()];
    let iterations = p.iterations.max(1);
    for it in 0..iterations {
        // A_c = smooth(I_c conj(rho))
        maps.par_iter_mut().zip(images).for_each(|(a, im)| {
            for ((a, i), r) in a.iter_mut().zip(im).zip(&rho) {
                *a = i * r.conj();
            }
            smooth(a, n, w);
        });
        if it + 1 == iterations {
            break;
        }
        divide(&mut maps, p.floor)?;
        // rho = sum_c conj(S_c) I_c
        rho = combine(images, |c, i| maps[c][i].conj());
    }
    Ok(maps)
}

/// `S_c = A_c / max(||A||, floor^2 peak)`, in place: A grows like the
/// signal squared, so the floor on the amplitude is squared.
fn divide(maps: &mut [Vec<C64>], floor: f64) -> Result<()> {
    let norm = rss(maps);
    let peak = norm.iter().copied().fold(0.0, f64::max);
    if !(peak > 0.0 && peak.is_finite()) {
        return Err(Error::Invalid {
            what: "coil images",
            reason: format!("they hold no signal to estimate maps from (peak {peak})"),
        });
    }
    let least = floor * floor * peak;
    maps.par_iter_mut().for_each(|a| {
        for (a, s) in a.iter_mut().zip(&norm) {
            *a /= s.max(least);
        }
    });
    Ok(())
}

/// `sum_c w(c, i) I_c[i]` per voxel i, block by block of voxels, coil
/// after coil (each image read in order).
fn combine(images: &[Vec<C64>], w: impl Fn(usize, usize) -> C64 + Sync) -> Vec<C64> {
    let mut out = vec![C64::default(); images[0].len()];
    out.par_chunks_mut(BLOCK).enumerate().for_each(|(b, out)| {
        let lo = b * BLOCK;
        for (c, im) in images.iter().enumerate() {
            for (k, (o, v)) in out.iter_mut().zip(&im[lo..]).enumerate() {
                *o += w(c, lo + k) * v;
            }
        }
    });
    out
}

/// Voxels per task of the covariance: the coils' values of one block stay
/// in cache while every pair of coils is summed over it.
const BLOCK: usize = 2048;

/// The dominant eigenvector of `sum_x I(x) I(x)^H` (C x C), by power
/// iteration: the coils' combination that carries most of the signal.
fn dominant_direction(images: &[Vec<C64>]) -> Vec<C64> {
    let c = images.len();
    let len = images[0].len();
    // The lower triangle, block by block: the images are read once.
    let cov = (0..len.div_ceil(BLOCK))
        .into_par_iter()
        .map(|blk| {
            let r = blk * BLOCK..((blk + 1) * BLOCK).min(len);
            let mut part = vec![C64::default(); c * c];
            for a in 0..c {
                let ia = &images[a][r.clone()];
                for b in 0..=a {
                    part[a * c + b] += ia
                        .iter()
                        .zip(&images[b][r.clone()])
                        .map(|(x, y)| x * y.conj())
                        .sum::<C64>();
                }
            }
            part
        })
        .reduce(
            || vec![C64::default(); c * c],
            |mut s, p| {
                s.iter_mut().zip(&p).for_each(|(s, p)| *s += p);
                s
            },
        );
    let at = |a: usize, b: usize| {
        if b <= a {
            cov[a * c + b]
        } else {
            cov[b * c + a].conj()
        }
    };
    let mut u = vec![C64::new(1.0, 0.0); c];
    for _ in 0..50 {
        let mut v: Vec<C64> = (0..c)
            .map(|a| (0..c).map(|b| at(a, b) * u[b]).sum())
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
/// edges the box holds only the voxels inside. Each axis is a sliding sum
/// over whole rows (x), rows of x (y) or planes (z), so that every step
/// reads and writes contiguous memory.
fn smooth(x: &mut [C64], n: [usize; 3], w: usize) {
    let h = w / 2;
    if h == 0 {
        return;
    }
    let mut out = Vec::new();
    let mut acc = Vec::new();
    // Axis d: blocks of n[d] rows of `inner` values, one block per outer index.
    for (inner, len) in [(1, n[0]), (n[0], n[1]), (n[0] * n[1], n[2])] {
        for block in x.chunks_exact_mut(inner * len) {
            box_rows(block, inner, len, h, &mut out, &mut acc);
        }
    }
}

/// The box of half-width `h` along `len` rows of `inner` values (`block`,
/// row after row), in place; `out` and `acc` are scratch.
fn box_rows(
    block: &mut [C64],
    inner: usize,
    len: usize,
    h: usize,
    out: &mut Vec<C64>,
    acc: &mut Vec<C64>,
) {
    let row = |k: usize| k * inner..(k + 1) * inner;
    out.clear();
    out.resize(block.len(), C64::default());
    acc.clear();
    acc.resize(inner, C64::default());
    // acc = the sum of rows lo .. hi, the box of row k.
    let (mut lo, mut hi) = (0, 0);
    for k in 0..len {
        let (want_lo, want_hi) = (k.saturating_sub(h), (k + h + 1).min(len));
        while hi < want_hi {
            acc.iter_mut()
                .zip(&block[row(hi)])
                .for_each(|(a, v)| *a += v);
            hi += 1;
        }
        while lo < want_lo {
            acc.iter_mut()
                .zip(&block[row(lo)])
                .for_each(|(a, v)| *a -= v);
            lo += 1;
        }
        let count = (hi - lo) as f64;
        out[row(k)]
            .iter_mut()
            .zip(acc.iter())
            .for_each(|(o, a)| *o = a / count);
    }
    block.copy_from_slice(out);
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

    /// Noiseless coil images: each map times the object.
    fn seen(maps: &[Vec<C64>], object: &[f64]) -> Vec<Vec<C64>> {
        maps.iter()
            .map(|m| m.iter().zip(object).map(|(s, o)| s * *o).collect())
            .collect()
    }

    #[test]
    fn maps_from_noiseless_coil_images_agree_with_the_truth() {
        let n = [16, 16, 16];
        let (maps, object) = truth(n, 6);
        let images = seen(&maps, &object);
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
    fn maps_on_cells_agree_with_maps_on_voxels_and_the_truth() {
        let n = [32, 32, 32];
        let (maps, object) = truth(n, 6);
        let images = seen(&maps, &object);
        let mask: Vec<bool> = object.iter().map(|&o| o > 0.0).collect();
        let voxels = estimate_maps(n, &images, &MapParams::default()).unwrap();
        for cell in [2, 4] {
            let p = MapParams {
                cell,
                ..MapParams::default()
            };
            let est = estimate_maps(n, &images, &p).unwrap();
            let (a, b) = (
                agreement(&est, &maps, &mask).unwrap(),
                agreement(&est, &voxels, &mask).unwrap(),
            );
            println!(
                "cell {cell}: agreement with the truth {a:.5}, with the maps on voxels {b:.5}"
            );
            // The maps vary over the field of view, not over a cell: the
            // cells cost a little of the voxels' agreement (0.99 above).
            assert!(a > 0.99 && b > 0.99, "cell {cell}: {a}, {b}");
            // The division on the voxels keeps unit norm inside the object.
            for i in (0..mask.len()).filter(|&i| mask[i] && object[i] >= 0.7) {
                let norm: f64 = est.iter().map(|m| m[i].norm_sqr()).sum::<f64>().sqrt();
                assert!((norm - 1.0).abs() < 1e-9, "cell {cell}: norm {norm}");
            }
        }
        let p = MapParams {
            cell: 0,
            ..MapParams::default()
        };
        let e = estimate_maps(n, &images, &p).unwrap_err();
        assert!(e.to_string().contains("cell positive"), "{e}");
        // Images on cells must match the cells' shape (16^3 for cells of 2).
        let p = MapParams {
            cell: 2,
            ..MapParams::default()
        };
        let e = estimate_maps_from_cells(n, &images, &p).unwrap_err();
        assert!(e.to_string().contains("one value per cell"), "{e}");
        let on_cells: Vec<Vec<C64>> = images
            .iter()
            .map(|im| cell_means(im.clone(), n, 2))
            .collect();
        assert_eq!(
            estimate_maps_from_cells(n, &on_cells, &p).unwrap(),
            estimate_maps(n, &images, &p).unwrap()
        );
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

    /// The box by its definition: the mean over the voxels inside the
    /// box around each voxel.
    fn naive_box(x: &[C64], n: [usize; 3], w: usize) -> Vec<C64> {
        let h = (w / 2) as i64;
        let idx = |p: [i64; 3]| (p[0] + n[0] as i64 * (p[1] + n[1] as i64 * p[2])) as usize;
        let inside = |p: [i64; 3]| (0..3).all(|d| p[d] >= 0 && p[d] < n[d] as i64);
        let mut out = vec![C64::default(); x.len()];
        for z in 0..n[2] as i64 {
            for y in 0..n[1] as i64 {
                for xx in 0..n[0] as i64 {
                    let (mut sum, mut count) = (C64::default(), 0.0);
                    for dz in -h..=h {
                        for dy in -h..=h {
                            for dx in -h..=h {
                                let p = [xx + dx, y + dy, z + dz];
                                if inside(p) {
                                    sum += x[idx(p)];
                                    count += 1.0;
                                }
                            }
                        }
                    }
                    out[idx([xx, y, z])] = sum / count;
                }
            }
        }
        out
    }

    #[test]
    fn smoothing_is_the_box_mean_of_the_voxels_inside() {
        // A box along each axis in turn is the 3-D box: the count inside
        // factorises by axis. Axes shorter than the box are covered too.
        let n = [9, 4, 7];
        let len = 9 * 4 * 7;
        let x: Vec<C64> = (0..len)
            .map(|i| C64::new(((i * 37) % 11) as f64 - 5.0, ((i * 17) % 7) as f64))
            .collect();
        for w in [1, 3, 5, 11] {
            let mut got = x.clone();
            smooth(&mut got, n, w);
            let want = naive_box(&x, n, w);
            let err = got
                .iter()
                .zip(&want)
                .map(|(a, b)| (a - b).norm())
                .fold(0.0, f64::max);
            // Sums of at most 11^3 values of size 5: rounding alone.
            assert!(err < 1e-12, "width {w}: {err:e}");
        }
    }

    #[test]
    fn the_dominant_direction_is_the_covariance_eigenvector() {
        // Two coils seeing one image with weights (2, i): the covariance
        // is rank one, its eigenvector (2, i) / sqrt(5) up to a phase.
        let len = 5000; // more than one block of the covariance
        let img: Vec<C64> = (0..len).map(|i| C64::new((i % 13) as f64, 1.0)).collect();
        let images = vec![
            img.iter().map(|v| v * 2.0).collect::<Vec<_>>(),
            img.iter().map(|v| v * C64::new(0.0, 1.0)).collect(),
        ];
        let u = dominant_direction(&images);
        let want = [
            C64::new(2.0, 0.0) / 5f64.sqrt(),
            C64::new(0.0, 1.0) / 5f64.sqrt(),
        ];
        let overlap: C64 = u.iter().zip(&want).map(|(a, b)| a.conj() * b).sum();
        assert!((overlap.norm() - 1.0).abs() < 1e-12, "overlap {overlap}");
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
