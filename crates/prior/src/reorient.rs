//! A reference image with its own geometry (a NIfTI from another scan:
//! its own matrix, FOV and orientation) brought onto the reconstruction's
//! grid, whose voxels the reconstruction's own voxel-to-RAS transform
//! places in the scanner.
//!
//! Each voxel of the grid gets the mean of the reference, interpolated
//! trilinearly, at `s^3` points spread evenly over the voxel's box (its
//! slab, along a 2-D grid's z): `s = 1` when the reference is no finer
//! than the grid, and up to [`MAX_POINTS`] per axis when it is, so that
//! detail finer than the grid is averaged away rather than aliased.

use rayon::prelude::*;
use recon_core::{Error, Grid, Oriented, Result};

/// The most sample points per axis of a voxel (64 per voxel).
pub const MAX_POINTS: usize = 4;

/// Where a voxel coordinate of the grid lies in the scanner: `affine`
/// applied to `(i, j, k)`.
fn apply(affine: &[[f64; 4]; 3], p: [f64; 3]) -> [f64; 3] {
    [0, 1, 2].map(|r| (0..3).map(|c| affine[r][c] * p[c]).sum::<f64>() + affine[r][3])
}

/// `Err` naming the first point where the reference does not cover the
/// grid: the grid's outermost voxel centres (and a 2-D grid's slab faces)
/// must lie inside the reference's box (its voxel centres, half a voxel
/// beyond). `affine` places the grid's voxels in RAS mm.
pub fn check_covers(grid: &Grid, affine: &[[f64; 4]; 3], reference: &Oriented) -> Result<()> {
    let inv = reference.inverse().ok_or_else(|| Error::Invalid {
        what: "reference",
        reason: "its transform is singular".into(),
    })?;
    // A flat axis's one plane stands for a slab one voxel thick.
    let ends = |d: usize| -> [f64; 2] {
        if grid.n[d] == 1 {
            [-0.5, 0.5]
        } else {
            [0.0, (grid.n[d] - 1) as f64]
        }
    };
    // The box of grid points is convex: its corners inside is all inside.
    for x in ends(0) {
        for y in ends(1) {
            for z in ends(2) {
                let ras = apply(affine, [x, y, z]);
                let v = apply(&inv, ras);
                // 1e-6 of a voxel: rounding in the transforms.
                let outside = (0..3)
                    .find(|&d| v[d] < -0.5 - 1e-6 || v[d] > reference.n[d] as f64 - 0.5 + 1e-6);
                if let Some(d) = outside {
                    return Err(Error::Invalid {
                        what: "reference",
                        reason: format!(
                            "does not cover the reconstruction's field of view: the grid's corner voxel ({x}, {y}, {z}) lies at RAS ({:.1}, {:.1}, {:.1}) mm, at the reference's voxel {:.2} along its axis {}, outside 0 .. {}",
                            ras[0], ras[1], ras[2], v[d], ["i", "j", "k"][d], reference.n[d] - 1
                        ),
                    });
                }
            }
        }
    }
    Ok(())
}

/// The reference's value at voxel coordinates `v`, trilinearly
/// interpolated (within half a voxel of its edge, the edge's value).
fn trilinear(r: &Oriented, v: [f64; 3]) -> f64 {
    let mut base = [0usize; 3];
    let mut frac = [0.0; 3];
    for d in 0..3 {
        let top = (r.n[d] - 1) as f64;
        let x = v[d].clamp(0.0, top);
        let b = (x.floor() as usize).min(r.n[d].saturating_sub(2));
        base[d] = b;
        frac[d] = if r.n[d] == 1 { 0.0 } else { x - b as f64 };
    }
    let at = |i: usize, j: usize, k: usize| {
        let (i, j, k) = (
            (base[0] + i).min(r.n[0] - 1),
            (base[1] + j).min(r.n[1] - 1),
            (base[2] + k).min(r.n[2] - 1),
        );
        r.values[i + r.n[0] * (j + r.n[1] * k)]
    };
    let mut sum = 0.0;
    for (k, wk) in [(0, 1.0 - frac[2]), (1, frac[2])] {
        for (j, wj) in [(0, 1.0 - frac[1]), (1, frac[1])] {
            for (i, wi) in [(0, 1.0 - frac[0]), (1, frac[0])] {
                let w = wi * wj * wk;
                if w != 0.0 {
                    sum += w * at(i, j, k);
                }
            }
        }
    }
    sum
}

/// Sample points per axis of a grid voxel: enough that they are no
/// further apart than the reference's smallest voxel.
fn points(affine: &[[f64; 4]; 3], reference: &Oriented) -> [usize; 3] {
    let fine = reference
        .voxel_mm()
        .into_iter()
        .fold(f64::INFINITY, f64::min);
    [0, 1, 2].map(|c| {
        let size = (0..3).map(|r| affine[r][c].powi(2)).sum::<f64>().sqrt();
        // (Less a rounding's worth: 3 mm over 1 mm is 3 points.)
        ((size / fine - 1e-9).ceil() as usize).clamp(1, MAX_POINTS)
    })
}

/// `out` (one value per voxel of `grid`, x fastest) = `reference` averaged
/// over each voxel of the grid, which `affine` places in RAS mm (see the
/// module). The reference must cover the grid ([`check_covers`]).
pub fn resample_oriented(
    out: &mut [f64],
    grid: &Grid,
    affine: &[[f64; 4]; 3],
    reference: &Oriented,
) -> Result<()> {
    Error::check_len("resampled reference", grid.len(), out.len())?;
    check_covers(grid, affine, reference)?;
    let inv = reference.inverse().expect("checked by check_covers");
    // Grid voxel coordinates to reference voxel coordinates, composed.
    let mut to_ref = [[0.0; 4]; 3];
    for (r, row) in to_ref.iter_mut().enumerate() {
        for (c, v) in row.iter_mut().enumerate() {
            *v = (0..3).map(|m| inv[r][m] * affine[m][c]).sum::<f64>()
                + if c == 3 { inv[r][3] } else { 0.0 };
        }
    }
    let s = points(affine, reference);
    let offsets = |d: usize| -> Vec<f64> {
        (0..s[d])
            .map(|a| (a as f64 + 0.5) / s[d] as f64 - 0.5)
            .collect()
    };
    let (ox, oy, oz) = (offsets(0), offsets(1), offsets(2));
    let count = (s[0] * s[1] * s[2]) as f64;
    let n = grid.n;
    out.par_iter_mut().enumerate().for_each(|(idx, o)| {
        let c = [idx % n[0], (idx / n[0]) % n[1], idx / (n[0] * n[1])];
        let mut sum = 0.0;
        for dz in &oz {
            for dy in &oy {
                for dx in &ox {
                    let p = [c[0] as f64 + dx, c[1] as f64 + dy, c[2] as f64 + dz];
                    sum += trilinear(reference, apply(&to_ref, p));
                }
            }
        }
        *o = sum / count;
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An oblique grid transform: 45 degrees about z, 3 mm voxels, off centre.
    fn oblique(grid: &Grid) -> [[f64; 4]; 3] {
        let v = grid.voxel_mm();
        let (c, s) = (
            std::f64::consts::FRAC_1_SQRT_2,
            std::f64::consts::FRAC_1_SQRT_2,
        );
        [
            [c * v[0], -s * v[1], 0.0, 5.0],
            [s * v[0], c * v[1], 0.0, -3.0],
            [0.0, 0.0, v[2], 2.0],
        ]
    }

    /// A reference on an axis-aligned 1 mm grid around the origin holding
    /// `f` at its voxels' RAS positions.
    fn reference(f: impl Fn([f64; 3]) -> f64) -> Oriented {
        let n = [80, 80, 40];
        let affine = [
            [1.0, 0.0, 0.0, -40.0],
            [0.0, 1.0, 0.0, -40.0],
            [0.0, 0.0, 1.0, -20.0],
        ];
        let values = (0..n[0] * n[1] * n[2])
            .map(|i| {
                let p = [i % n[0], (i / n[0]) % n[1], i / (n[0] * n[1])].map(|v| v as f64);
                f(apply(&affine, p))
            })
            .collect();
        Oriented::new(n, values, affine).unwrap()
    }

    #[test]
    fn a_linear_reference_resamples_to_its_values_at_the_voxel_centres() {
        // Trilinear interpolation is exact for a linear function, and the
        // mean over points spread symmetrically in a voxel is its centre's.
        let f = |p: [f64; 3]| 2.0 * p[0] - 0.5 * p[1] + 3.0 * p[2] + 7.0;
        let r = reference(f);
        let grid = Grid::new([8, 8, 4], [24.0, 24.0, 12.0]).unwrap();
        let affine = oblique(&grid);
        assert_eq!(points(&affine, &r), [3, 3, 3]);
        let mut out = vec![0.0; grid.len()];
        resample_oriented(&mut out, &grid, &affine, &r).unwrap();
        for (idx, v) in out.iter().enumerate() {
            let c = [idx % 8, (idx / 8) % 8, idx / 64].map(|v| v as f64);
            let want = f(apply(&affine, c));
            assert!((v - want).abs() < 1e-9, "voxel {idx}: {v} vs {want}");
        }
    }

    #[test]
    fn detail_finer_than_the_grid_is_averaged_not_aliased() {
        // A 1 mm checkerboard seen by 3 mm voxels: each voxel's 27 points
        // average nine 1 mm cells of each sign but one, so the mean is +-1/27;
        // one point per voxel would alias it to the full +-1.
        let r = reference(|p| {
            let s = (p[0].floor() + p[1].floor() + p[2].floor()) as i64;
            if s % 2 == 0 {
                1.0
            } else {
                -1.0
            }
        });
        let grid = Grid::new([8, 8, 4], [24.0, 24.0, 12.0]).unwrap();
        let v = grid.voxel_mm();
        let straight = [
            [v[0], 0.0, 0.0, -12.0],
            [0.0, v[1], 0.0, -12.0],
            [0.0, 0.0, v[2], -6.0],
        ];
        let mut out = vec![0.0; grid.len()];
        resample_oriented(&mut out, &grid, &straight, &r).unwrap();
        for v in &out {
            assert!(v.abs() <= 1.0 / 27.0 + 1e-9, "{v}");
        }
    }

    #[test]
    fn a_reference_that_misses_part_of_the_grid_is_refused() {
        let r = reference(|_| 1.0);
        // 240 mm of grid against an 80 mm reference.
        let grid = Grid::new([8, 8, 4], [240.0, 240.0, 12.0]).unwrap();
        let v = grid.voxel_mm();
        let affine = [
            [v[0], 0.0, 0.0, -120.0],
            [0.0, v[1], 0.0, -120.0],
            [0.0, 0.0, v[2], -6.0],
        ];
        let e = check_covers(&grid, &affine, &r).unwrap_err().to_string();
        assert!(e.contains("does not cover"), "{e}");
        let mut out = vec![0.0; grid.len()];
        assert!(resample_oriented(&mut out, &grid, &affine, &r).is_err());
        // Shifted 30 mm along z, the grid leaves the 40 mm slab.
        let small = Grid::new([8, 8, 4], [24.0, 24.0, 12.0]).unwrap();
        let mut shifted = oblique(&small);
        shifted[2][3] = 30.0;
        assert!(check_covers(&small, &shifted, &r).is_err());
        assert!(check_covers(&small, &oblique(&small), &r).is_ok());
    }
}
