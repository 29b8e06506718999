//! The coarse cells maps may be estimated on ([`crate::MapParams::cell`]):
//! images averaged over cells of `f` voxels per axis (the last cell of an
//! axis holds what is left), and values on the cells interpolated back to
//! the voxels, linearly along each axis in turn between the cells'
//! centres (held constant beyond the outermost centres).

use crate::C64;
use rayon::prelude::*;

/// Cells per axis of the grid `n`.
pub fn shape(n: [usize; 3], f: usize) -> [usize; 3] {
    n.map(|v| v.div_ceil(f))
}

/// The box width on the cells nearest `w / f` voxels: odd, at least 1.
pub fn width(w: usize, f: usize) -> usize {
    let cells = w as f64 / f as f64;
    2 * ((cells - 1.0) / 2.0).round().max(0.0) as usize + 1
}

/// The mean of `x` (the grid `n`, x fastest) over each cell, plane of
/// cells by plane in parallel.
pub fn mean(x: &[C64], n: [usize; 3], f: usize) -> Vec<C64> {
    let nc = shape(n, f);
    let plane = nc[0] * nc[1];
    let mut out = vec![C64::default(); plane * nc[2]];
    out.par_chunks_mut(plane).enumerate().for_each(|(zc, sum)| {
        let mut count = vec![0u32; plane];
        for z in zc * f..((zc + 1) * f).min(n[2]) {
            for y in 0..n[1] {
                let row = &x[(z * n[1] + y) * n[0]..][..n[0]];
                let base = (y / f) * nc[0];
                for (i, v) in row.iter().enumerate() {
                    sum[base + i / f] += v;
                    count[base + i / f] += 1;
                }
            }
        }
        sum.iter_mut()
            .zip(&count)
            .for_each(|(s, &c)| *s /= c as f64);
    });
    out
}

/// `a` on the cells of the grid `n` interpolated to its voxels.
pub fn interpolate(a: &[C64], n: [usize; 3], f: usize) -> Vec<C64> {
    let mut shape = shape(n, f);
    let mut x = a.to_vec();
    for d in 0..3 {
        let table = weights(n[d], f);
        let inner: usize = shape[..d].iter().product();
        let (len, outer): (usize, usize) = (shape[d], shape[d + 1..].iter().product());
        let mut out = vec![C64::default(); inner * n[d] * outer];
        for o in 0..outer {
            let src = &x[o * len * inner..][..len * inner];
            let dst = &mut out[o * n[d] * inner..][..n[d] * inner];
            for (i, &(j0, j1, t)) in table.iter().enumerate() {
                let (r0, r1) = (&src[j0 * inner..][..inner], &src[j1 * inner..][..inner]);
                for ((v, a), b) in dst[i * inner..][..inner].iter_mut().zip(r0).zip(r1) {
                    *v = a * (1.0 - t) + b * t;
                }
            }
        }
        shape[d] = n[d];
        x = out;
    }
    x
}

/// Per voxel of an axis of `n` voxels in cells of `f`: the two cells whose
/// centres bracket it and the second one's weight.
fn weights(n: usize, f: usize) -> Vec<(usize, usize, f64)> {
    let cells = n.div_ceil(f);
    // The centre of cell j, in voxels: its first voxel plus half its extent.
    let centre = |j: usize| (j * f) as f64 + ((f.min(n - j * f)) as f64 - 1.0) / 2.0;
    (0..n)
        .map(|i| {
            let p = i as f64;
            let j = (i / f).min(cells - 1);
            // The bracketing pair: j and j + 1 past the centre, else j - 1 and j.
            let j0 = if p >= centre(j) {
                j
            } else {
                j.saturating_sub(1)
            };
            let j1 = (j0 + 1).min(cells - 1);
            if j0 == j1 {
                return (j0, j1, 0.0);
            }
            let t = ((p - centre(j0)) / (centre(j1) - centre(j0))).clamp(0.0, 1.0);
            (j0, j1, t)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn means_cover_partial_cells_and_widths_stay_odd() {
        // 5 voxels in cells of 2: the last cell holds one voxel.
        let n = [5, 1, 1];
        let x: Vec<C64> = (0..5).map(|i| C64::new(i as f64, 0.0)).collect();
        let m = mean(&x, n, 2);
        assert_eq!(
            m,
            vec![C64::new(0.5, 0.0), C64::new(2.5, 0.0), C64::new(4.0, 0.0)]
        );
        assert_eq!(shape([5, 4, 7], 2), [3, 2, 4]);
        assert_eq!(
            [
                width(5, 1),
                width(5, 2),
                width(5, 3),
                width(5, 5),
                width(1, 4)
            ],
            [5, 3, 1, 1, 1]
        );
    }

    #[test]
    fn interpolation_keeps_linear_ramps_between_the_centres() {
        // A function linear in each axis, averaged over cells, is its value
        // at the cells' centres; interpolated back it is exact between the
        // outermost centres.
        let (n, f) = ([12, 8, 9], 3);
        let ramp = |x: f64, y: f64, z: f64| C64::new(1.0 + 0.5 * x - 0.25 * y, 2.0 * z - x);
        let mut fine = Vec::new();
        for z in 0..n[2] {
            for y in 0..n[1] {
                for x in 0..n[0] {
                    fine.push(ramp(x as f64, y as f64, z as f64));
                }
            }
        }
        let cells = mean(&fine, n, f);
        let back = interpolate(&cells, n, f);
        // Centres at 1, 4, 7, 10 (x), 1, 4, 6.5 (y: a last cell of 2) and 1, 4, 7 (z).
        for z in 1..=7 {
            for y in 1..=6 {
                for x in 1..=10 {
                    let i = (z * n[1] + y) * n[0] + x;
                    let e = (back[i] - fine[i]).norm();
                    assert!(e < 1e-12, "({x}, {y}, {z}): {e:e}");
                }
            }
        }
        // Beyond the outermost centres, the nearest centre's value along that axis.
        assert!((back[0] - cells[0]).norm() < 1e-12);
    }
}
