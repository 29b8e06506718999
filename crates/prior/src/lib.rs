//! The anatomical prior: W built from a proton-density reference image, as in
//! the sodium application of the iterative method (Haldar et al., "Anatomically
//! constrained reconstruction from noisy data", MRM 2008).
//!
//! Sodium images are noisy; a proton (water) scan of the same patient is not,
//! and shows where tissue boundaries are. The regulariser smooths across every
//! edge of the grid except those that cross a boundary of the reference: each
//! first difference gets weight 1 inside smooth regions and a small weight
//! where the reference's gradient magnitude exceeds a threshold. The result is
//! a [`Stencil`] (per-edge weights plus an optional diagonal support mask), the
//! sparse format both backends apply.
//!
//! The key design decision is that the prior only ever *relaxes* smoothing:
//! weights are at most 1, and nothing in W pulls the image towards the
//! reference's intensities. So a boundary the reference shows but the sodium
//! image lacks is merely not smoothed across: the data decide there, and no
//! structure is invented. The opposite mismatch, a sodium structure the
//! reference lacks (a lesion), would be smoothed away at the strong lambda
//! the anatomical W favours; [`relax_data_edges`] guards against that: after
//! a first solve, edges where the image itself changes by much more than its
//! noise are relaxed too ([`Prior::relaxed`]), and the caller solves again
//! (two passes in all). This crate builds W and never solves: the solve
//! driver lives with the pipeline.
//!
//! The reference may come on a finer (or coarser) grid than the
//! reconstruction; [`resample`] averages it onto the grid by box overlap,
//! once, and everything else works on that image.

mod reorient;
pub use reorient::{check_covers, resample_oriented};

use rayon::prelude::*;
use recon_core::{index3, Error, Grid, Result, Stencil, Volume};
use serde::Serialize;

/// How W is derived from the reference.
#[derive(Debug, Clone, PartialEq)]
pub struct Params {
    /// An edge of the grid crosses a reference boundary when the reference's
    /// gradient magnitude at the edge exceeds this fraction of its largest
    /// gradient magnitude (0 < t <= 1).
    pub edge_threshold: f64,
    /// The weight of a difference across a reference boundary (0 <= w <= 1);
    /// every other difference weighs 1.
    pub edge_weight: f64,
    /// Support mask: voxels where the reference is below this fraction of its
    /// peak are outside the object and get a diagonal row of weight
    /// `support_weight`. `None`: no diagonal.
    pub support_threshold: Option<f64>,
    /// Weight of the support mask's diagonal rows.
    pub support_weight: f64,
    /// Data edges: after a first solve, differences of the image larger
    /// than this many noise deviations are relaxed too (see
    /// [`relax_data_edges`]) before a second solve. `None`: one solve.
    pub data_threshold: Option<f64>,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            edge_threshold: 0.1,
            edge_weight: 0.1,
            support_threshold: None,
            support_weight: 1.0,
            // tests/prior.rs: 4 deviations keep a lesion absent from the
            // reference within 5% of its contrast and raise the PSNR; more
            // passes than two lower the PSNR again.
            data_threshold: Some(4.0),
        }
    }
}

impl Params {
    /// Checks the ranges named in the fields' docs.
    pub fn check(&self) -> Result<()> {
        let bad = |what: &'static str, reason: String| Err(Error::Invalid { what, reason });
        let t = self.edge_threshold;
        if !(t.is_finite() && t > 0.0 && t <= 1.0) {
            return bad("edge_threshold", format!("must be in (0, 1], got {t}"));
        }
        let w = self.edge_weight;
        if !(w.is_finite() && (0.0..=1.0).contains(&w)) {
            return bad("edge_weight", format!("must be in [0, 1], got {w}"));
        }
        if let Some(s) = self.support_threshold {
            if !(s.is_finite() && s > 0.0 && s < 1.0) {
                return bad("support_threshold", format!("must be in (0, 1), got {s}"));
            }
        }
        let s = self.support_weight;
        if !(s.is_finite() && s >= 0.0) {
            return bad(
                "support_weight",
                format!("must be zero or positive, got {s}"),
            );
        }
        if let Some(k) = self.data_threshold {
            if !(k.is_finite() && k > 0.0) {
                return bad("data_threshold", format!("must be positive, got {k}"));
            }
        }
        Ok(())
    }
}

/// What the prior found in the reference.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Info {
    /// Edges of the grid (pairs of neighbouring voxels).
    pub edges: usize,
    /// Of those, the ones crossing a reference boundary (weighted `edge_weight`).
    pub boundary_edges: usize,
    /// Voxels outside the support mask (0 without one).
    pub outside_support: usize,
    /// Edges relaxed because the first pass's image shows an edge there
    /// (see [`relax_data_edges`]); `None` when that pass is off.
    pub data_edges: Option<usize>,
}

/// An anatomical W ready to solve with.
#[derive(Debug, Clone, PartialEq)]
pub struct Prior {
    pub stencil: Stencil,
    pub params: Params,
    pub info: Info,
}

impl Prior {
    /// The anatomical W on `grid` from the reference averaged onto it (see
    /// [`anatomical`]).
    pub fn new(grid: &Grid, reference: &[f64], params: &Params) -> Result<Self> {
        let (stencil, info) = anatomical(grid, reference, params)?;
        Ok(Prior {
            stencil,
            params: params.clone(),
            info,
        })
    }

    /// CG solves: two when data edges are relaxed between them.
    pub fn passes(&self) -> usize {
        if self.params.data_threshold.is_some() {
            2
        } else {
            1
        }
    }

    /// W for the second pass, from the first pass's image magnitude: its
    /// edges beyond the noise relaxed too ([`relax_data_edges`]), counted
    /// in `info.data_edges`. `None` when data edges are off (one pass).
    pub fn relaxed(&self, image: &[f64]) -> Result<Option<Prior>> {
        let Some(k) = self.params.data_threshold else {
            return Ok(None);
        };
        let mut used = self.clone();
        let relaxed = relax_data_edges(&mut used.stencil, image, k, self.params.edge_weight)?;
        used.info.data_edges = Some(relaxed);
        Ok(Some(used))
    }
}

/// The anatomical W on `grid` from the reference `a` already averaged onto
/// the grid ([`resample`]), and what it found.
pub fn anatomical(grid: &Grid, a: &[f64], p: &Params) -> Result<(Stencil, Info)> {
    p.check()?;
    Error::check_len("anatomical reference on the grid", grid.len(), a.len())?;
    let g = edge_gradients(grid, a);
    let gmax = g.iter().flatten().fold(0.0f64, |m, v| m.max(*v));
    // A flat reference has no boundaries: every weight stays 1.
    let cut = p.edge_threshold * gmax;
    let mut boundary_edges = 0;
    let w = g.map(|gd| {
        gd.iter()
            .map(|&v| {
                if gmax > 0.0 && v > cut {
                    boundary_edges += 1;
                    p.edge_weight
                } else {
                    1.0
                }
            })
            .collect::<Vec<f64>>()
    });
    let n = grid.n;
    let edges = (n[0] - 1) * n[1] * n[2] + n[0] * (n[1] - 1) * n[2] + n[0] * n[1] * (n[2] - 1);
    let mut stencil = Stencil::weighted(n, w)?;
    let mut outside_support = 0;
    if let Some(s) = p.support_threshold {
        let peak = a.iter().fold(0.0f64, |m, v| m.max(*v));
        let diag: Vec<f64> = a
            .iter()
            .map(|&v| {
                if v < s * peak {
                    outside_support += 1;
                    p.support_weight
                } else {
                    0.0
                }
            })
            .collect();
        stencil = stencil.with_diag(diag)?;
    }
    Ok((
        stencil,
        Info {
            edges,
            boundary_edges,
            outside_support,
            data_edges: None,
        },
    ))
}

/// Relaxes `w` where the reconstruction itself shows an edge: each first
/// difference of `image` larger than `sigmas` times the noise of the
/// differences gets weight `edge_weight`, unless it is already smaller. The
/// noise is estimated robustly, as the median absolute difference over
/// 0.6745 (most edges of an image lie in smooth regions). This is what
/// keeps a lesion the reference lacks: solve, relax its edges, solve again.
/// Returns how many edges it relaxed.
pub fn relax_data_edges(
    w: &mut Stencil,
    image: &[f64],
    sigmas: f64,
    edge_weight: f64,
) -> Result<usize> {
    let n = w.n;
    Error::check_len("image for data edges", n[0] * n[1] * n[2], image.len())?;
    let stride = w.strides();
    let len = image.len();
    // |image[i + e_d] - image[i]|, or None on the last plane along d.
    let diffs: [Vec<Option<f64>>; 3] = [0, 1, 2].map(|d| {
        (0..len)
            .map(|i| (index3(n, i)[d] + 1 < n[d]).then(|| (image[i + stride[d]] - image[i]).abs()))
            .collect()
    });
    let mut all: Vec<f64> = diffs.iter().flatten().flatten().copied().collect();
    if all.is_empty() {
        return Ok(0);
    }
    let mid = all.len() / 2;
    let median = *all.select_nth_unstable_by(mid, f64::total_cmp).1;
    let cut = sigmas * median / 0.6745;
    let weights = w.w.get_or_insert_with(|| [0, 1, 2].map(|_| vec![1.0; len]));
    let mut relaxed = 0;
    for (wd, dd) in weights.iter_mut().zip(&diffs) {
        for (wi, di) in wd.iter_mut().zip(dd) {
            if di.is_some_and(|v| v > cut) && *wi > edge_weight {
                *wi = edge_weight;
                relaxed += 1;
            }
        }
    }
    Ok(relaxed)
}

/// The reference's gradient magnitude (per mm) at the midpoint of each edge
/// `(n, n + e_d)`, in the stencil's layout (`g[d][n]`; 0 on the last plane
/// along `d`, which has no such edge). The component along `d` is the edge's
/// own difference; the other two are central differences (one-sided at the
/// borders) averaged over the edge's two voxels.
pub fn edge_gradients(grid: &Grid, a: &[f64]) -> [Vec<f64>; 3] {
    let n = grid.n;
    let h = grid.voxel_mm();
    let stride = [1, n[0], n[0] * n[1]];
    // Central difference of `a` along axis k at voxel idx, per mm.
    let central = |idx: usize, k: usize| {
        let c = index3(n, idx)[k];
        let lo = if c > 0 { idx - stride[k] } else { idx };
        let hi = if c + 1 < n[k] { idx + stride[k] } else { idx };
        let span = (hi - lo) / stride[k];
        if span == 0 {
            0.0
        } else {
            (a[hi] - a[lo]) / (span as f64 * h[k])
        }
    };
    [0, 1, 2].map(|d| {
        (0..grid.len())
            .into_par_iter()
            .map(|idx| {
                if index3(n, idx)[d] + 1 >= n[d] {
                    return 0.0;
                }
                let j = idx + stride[d];
                let mut g2 = ((a[j] - a[idx]) / h[d]).powi(2);
                for k in (0..3).filter(|&k| k != d) {
                    g2 += (0.5 * (central(idx, k) + central(j, k))).powi(2);
                }
                g2.sqrt()
            })
            .collect()
    })
}

/// Averages `reference` onto `grid` by box overlap: each voxel of the grid
/// gets the mean of the reference over its box, each reference voxel counted
/// by the volume it shares with the box. Both grids share the isocentre
/// (voxel centres at `(i - N/2) FOV / N`). Refining by an integer factor
/// this is exact box averaging; on a coarser reference it is piecewise
/// constant. Every voxel of the grid must overlap the reference's field of
/// view; voxels only partly inside it are averaged over the part inside.
pub fn resample(out: &mut [f64], grid: &Grid, reference: &Volume) -> Result<()> {
    Error::check_len("resampled reference", grid.len(), out.len())?;
    Error::check_len(
        "reference values",
        reference.grid.len(),
        reference.values.len(),
    )?;
    let src = &reference.grid;
    // One axis at a time: weights[d][j] lists (i, weight) for target j.
    let mut weights = Vec::with_capacity(3);
    for d in 0..3 {
        weights.push(axis_weights(src, grid, d)?);
    }
    let mut shape = src.n;
    let mut cur = reference.values.clone();
    for (d, wd) in weights.iter().enumerate() {
        let mut next_shape = shape;
        next_shape[d] = grid.n[d];
        let stride = [1, shape[0], shape[0] * shape[1]];
        let next_len = next_shape.iter().product();
        let next: Vec<f64> = (0..next_len)
            .into_par_iter()
            .map(|idx| {
                let c = index3(next_shape, idx);
                let mut base = c;
                base[d] = 0;
                let b = base[0] + base[1] * stride[1] + base[2] * stride[2];
                wd[c[d]]
                    .iter()
                    .map(|&(i, w)| w * cur[b + i * stride[d]])
                    .sum()
            })
            .collect();
        cur = next;
        shape = next_shape;
    }
    out.copy_from_slice(&cur);
    Ok(())
}

/// Box-overlap weights along axis `d` from `src` voxels to `dst` voxels,
/// normalised to sum to 1 for each `dst` voxel.
fn axis_weights(src: &Grid, dst: &Grid, d: usize) -> Result<Vec<Vec<(usize, f64)>>> {
    let (m, n) = (src.n[d], dst.n[d]);
    let (hs, ht) = (src.voxel_mm()[d], dst.voxel_mm()[d]);
    // Voxel i of a grid with N voxels of size h spans (i - N/2 -+ 1/2) h.
    let span = |i: usize, count: usize, h: f64| {
        let c = (i as f64 - count as f64 / 2.0) * h;
        (c - 0.5 * h, c + 0.5 * h)
    };
    (0..n)
        .map(|j| {
            let (t0, t1) = span(j, n, ht);
            // The source voxels that can overlap [t0, t1].
            let first = ((t0 / hs + m as f64 / 2.0 - 0.5).floor().max(0.0)) as usize;
            let mut row = Vec::new();
            for i in first..m {
                let (s0, s1) = span(i, m, hs);
                if s0 >= t1 {
                    break;
                }
                let overlap = t1.min(s1) - t0.max(s0);
                if overlap > 1e-12 * ht {
                    row.push((i, overlap));
                }
            }
            let total: f64 = row.iter().map(|(_, w)| w).sum();
            if total <= 0.0 {
                return Err(Error::Invalid {
                    what: "anatomical reference",
                    reason: format!(
                        "its field of view ({:?} mm, matrix {:?}) does not cover the reconstruction's \
                         ({:?} mm, matrix {:?}): voxel {j} along {} lies outside it",
                        src.fov_mm,
                        src.n,
                        dst.fov_mm,
                        dst.n,
                        ["x", "y", "z"][d]
                    ),
                });
            }
            Ok(row.into_iter().map(|(i, w)| (i, w / total)).collect())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grid(n: usize, fov: f64) -> Grid {
        Grid::new([n; 3], [fov; 3]).unwrap()
    }

    /// Against the obvious reference: for every grid voxel, the sum over all
    /// reference voxels of value times shared volume, over the volume.
    /// Covers refinement by 3, a non-integer ratio and a wider reference FOV.
    #[test]
    fn resampling_matches_brute_force_overlap_volumes() {
        let overlap = |g: &Grid, i: [usize; 3], r: &Grid, j: [usize; 3]| -> f64 {
            let (hg, hr) = (g.voxel_mm(), r.voxel_mm());
            (0..3)
                .map(|d| {
                    let cg = (i[d] as f64 - g.n[d] as f64 / 2.0) * hg[d];
                    let cr = (j[d] as f64 - r.n[d] as f64 / 2.0) * hr[d];
                    let lo = (cg - hg[d] / 2.0).max(cr - hr[d] / 2.0);
                    let hi = (cg + hg[d] / 2.0).min(cr + hr[d] / 2.0);
                    (hi - lo).max(0.0)
                })
                .product()
        };
        let g = Grid::new([6, 4, 6], [120.0, 80.0, 120.0]).unwrap();
        for r in [
            Grid::new([18, 12, 18], [120.0, 80.0, 120.0]).unwrap(),
            Grid::new([10, 6, 8], [130.0, 90.0, 140.0]).unwrap(),
        ] {
            let values: Vec<f64> = (0..r.len())
                .map(|i| ((i * 7919) % 101) as f64 / 7.0)
                .collect();
            let mut out = vec![0.0; g.len()];
            resample(&mut out, &g, &Volume::new(r, values.clone()).unwrap()).unwrap();
            for (i, v) in out.iter().enumerate() {
                let (mut s, mut vol) = (0.0, 0.0);
                for (j, x) in values.iter().enumerate() {
                    let o = overlap(&g, index3(g.n, i), &r, index3(r.n, j));
                    s += o * x;
                    vol += o;
                }
                // Same sums in another order: rounding only.
                assert!(
                    (v - s / vol).abs() < 1e-9,
                    "voxel {i}: {v} against {}",
                    s / vol
                );
            }
        }
    }

    /// Resampling onto the same grid is the identity, and averaging keeps
    /// the mean of a reference that covers the grid exactly.
    #[test]
    fn identity_on_the_same_grid() {
        let g = grid(8, 200.0);
        let values: Vec<f64> = (0..g.len()).map(|i| ((i * 7919) % 13) as f64).collect();
        let mut out = vec![0.0; g.len()];
        resample(&mut out, &g, &Volume::new(g, values.clone()).unwrap()).unwrap();
        // Each box overlaps only itself (neighbours touch at a point).
        assert!(out.iter().zip(&values).all(|(a, b)| (a - b).abs() < 1e-12));
    }

    #[test]
    fn a_reference_that_misses_the_grid_is_an_error() {
        let g = grid(8, 240.0);
        let small = grid(4, 60.0);
        let r = Volume::new(small, vec![1.0; small.len()]).unwrap();
        let err = resample(&mut vec![0.0; g.len()], &g, &r).unwrap_err();
        assert!(err.to_string().contains("does not cover"), "{err}");
    }

    /// A planar boundary normal to x: exactly the x-edges crossing it are
    /// boundary edges, and a support mask marks the empty half.
    #[test]
    fn a_step_gives_small_weights_across_it_only() {
        let g = grid(8, 80.0);
        let values: Vec<f64> = (0..g.len())
            .map(|i| if i % 8 < 4 { 0.0 } else { 1.0 })
            .collect();
        let p = Params {
            edge_threshold: 0.6,
            edge_weight: 0.05,
            support_threshold: Some(0.5),
            support_weight: 2.0,
            data_threshold: None,
        };
        let (s, info) = anatomical(&g, &values, &p).unwrap();
        let w = s.w.as_ref().unwrap();
        for idx in 0..g.len() {
            let x = idx % 8;
            let want_x = if x == 3 { 0.05 } else { 1.0 };
            assert_eq!(w[0][idx], want_x, "x-edge at {idx}");
            // along y and z, next to the step, the central differences
            // along x give half the step's gradient: below the threshold
            assert_eq!(w[1][idx], 1.0);
            assert_eq!(w[2][idx], 1.0);
        }
        assert_eq!(info.boundary_edges, 64);
        assert_eq!(info.edges, 3 * 7 * 64);
        let d = s.diag.as_ref().unwrap();
        assert!((0..g.len()).all(|i| d[i] == if i % 8 < 4 { 2.0 } else { 0.0 }));
        assert_eq!(info.outside_support, 256);
    }

    /// A step of 10 in noise of about 0.1: only the step's edges are relaxed,
    /// and a weight already below `edge_weight` stays.
    #[test]
    fn data_edges_are_the_image_steps_beyond_its_noise() {
        let g = grid(8, 80.0);
        let mut seed = 1u64;
        let mut noise = || {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((seed >> 33) as f64 / (1u64 << 31) as f64 - 0.5) * 0.3
        };
        let image: Vec<f64> = (0..g.len())
            .map(|i| if i % 8 < 5 { 0.0 } else { 10.0 } + noise())
            .collect();
        let mut w = Stencil::uniform(g.n);
        let mut x = vec![1.0; g.len()];
        x[4] = 0.01; // (4, 0, 0) -> (5, 0, 0): already below the relaxed weight
        w.w = Some([x, vec![1.0; g.len()], vec![1.0; g.len()]]);
        let relaxed = relax_data_edges(&mut w, &image, 4.0, 0.1).unwrap();
        let ww = w.w.as_ref().unwrap();
        for idx in 0..g.len() {
            let want = match (idx % 8, idx) {
                (_, 4) => 0.01,
                (4, _) => 0.1,
                _ => 1.0,
            };
            assert_eq!(ww[0][idx], want, "x-edge {idx}");
            assert_eq!(ww[1][idx], 1.0);
            assert_eq!(ww[2][idx], 1.0);
        }
        assert_eq!(relaxed, 63);
    }

    #[test]
    fn a_flat_reference_gives_uniform_weights() {
        let g = grid(4, 40.0);
        let (s, info) = anatomical(&g, &[3.0; 64], &Params::default()).unwrap();
        assert!(s.w.unwrap().iter().flatten().all(|&w| w == 1.0));
        assert_eq!(info.boundary_edges, 0);
    }

    #[test]
    fn parameters_out_of_range_are_named() {
        for (p, name) in [
            (
                Params {
                    edge_threshold: 0.0,
                    ..Default::default()
                },
                "edge_threshold",
            ),
            (
                Params {
                    edge_weight: 1.5,
                    ..Default::default()
                },
                "edge_weight",
            ),
            (
                Params {
                    support_threshold: Some(1.0),
                    ..Default::default()
                },
                "support_threshold",
            ),
            (
                Params {
                    support_weight: f64::NAN,
                    ..Default::default()
                },
                "support_weight",
            ),
            (
                Params {
                    data_threshold: Some(-1.0),
                    ..Default::default()
                },
                "data_threshold",
            ),
        ] {
            let e = p.check().unwrap_err().to_string();
            assert!(e.starts_with(name), "{e}");
        }
    }
}
