//! The image grid, its voxel basis phi(k), and regular lattices of points.

use crate::{Error, Result};

/// An image grid: `n = [Nx, Ny, Nz]` voxels over a field of view in mm.
///
/// Voxel centres are `x_i = (i - N/2) FOV / N` along each axis, and k-space
/// positions are in cycles/FOV, so `|k_d| <= N_d / 2` is Nyquist.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Grid {
    pub n: [usize; 3],
    pub fov_mm: [f64; 3],
    /// What a voxel's value multiplies: the image model's basis.
    pub basis: Basis,
}

/// The function each voxel value multiplies in the image model
/// `rho(x) = sum_v rho_v b(x - x_v)`; F weighs the sample at k by its
/// transform phi(k).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Basis {
    /// A uniform box filling the voxel (Haldar, Stone et al.; the default):
    /// `phi(k) = V prod_d sinc(k_d / N_d)`. Exact for an image that is
    /// constant over each voxel, such as voxel averages.
    #[default]
    Box,
    /// A point at the voxel's centre, scaled by its volume: `phi(k) = V`.
    /// The model of NUFFT toolboxes such as SigPy and torchkbnufft.
    Delta,
}

impl Basis {
    /// A short name for cache keys and reports.
    pub fn id(&self) -> &'static str {
        match self {
            Basis::Box => "box-sinc",
            Basis::Delta => "delta",
        }
    }
}

impl Grid {
    /// A grid with checked sizes: `Nx` and `Ny` even, from 2 to
    /// [`crate::MAX_N`]; `Nz` the same, or 1 for a 2-D grid (one plane,
    /// k_z = 0); each FOV finite and positive.
    pub fn new(n: [usize; 3], fov_mm: [f64; 3]) -> Result<Self> {
        for d in 0..3 {
            let flat = d == 2 && n[d] == 1;
            if !flat && (n[d] < 2 || !n[d].is_multiple_of(2) || n[d] > crate::MAX_N) {
                return Err(Error::Invalid {
                    what: "grid matrix",
                    reason: format!(
                        "each size must be even, from 2 to {} (z may be 1: a 2-D grid); got {:?}",
                        crate::MAX_N,
                        n
                    ),
                });
            }
            if !(fov_mm[d].is_finite() && fov_mm[d] > 0.0) {
                return Err(Error::Invalid {
                    what: "grid fov_mm",
                    reason: format!("each FOV must be positive, got {:?}", fov_mm),
                });
            }
        }
        Ok(Grid {
            n,
            fov_mm,
            basis: Basis::Box,
        })
    }

    /// Whether this is a 2-D grid: one plane (`Nz = 1`), sampled at k_z = 0.
    pub fn is_2d(&self) -> bool {
        self.n[2] == 1
    }

    /// Number of voxels.
    pub fn len(&self) -> usize {
        self.n[0] * self.n[1] * self.n[2]
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Voxel size in mm.
    pub fn voxel_mm(&self) -> [f64; 3] {
        [
            self.fov_mm[0] / self.n[0] as f64,
            self.fov_mm[1] / self.n[1] as f64,
            self.fov_mm[2] / self.n[2] as f64,
        ]
    }

    /// Voxel volume in mm^3.
    pub fn voxel_volume(&self) -> f64 {
        let v = self.voxel_mm();
        v[0] * v[1] * v[2]
    }

    /// The doubled grid `(2N)^3` on which Q and the Toeplitz FFTs live; an
    /// axis of one voxel stays one (no displacement but 0 along it).
    pub fn doubled(&self) -> [usize; 3] {
        doubled(self.n)
    }

    /// The index of displacement 0 in Q's lattice ([`Grid::displacements`])
    /// along each axis: N, or 0 along an axis of one voxel.
    pub fn lag_zero(&self) -> [usize; 3] {
        self.n.map(|n| if n == 1 { 0 } else { n })
    }

    /// Voxel centres in FOV units (`x / FOV`), so that `k . x` is in turns;
    /// the one plane of a 2-D grid at 0.
    pub fn voxels(&self) -> Lattice {
        Lattice {
            n: self.n,
            origin: self.n.map(|n| if n == 1 { 0.0 } else { -0.5 }),
            step: [0, 1, 2].map(|d| 1.0 / self.n[d] as f64),
        }
    }

    /// Displacements `y_j = (j - N) FOV / N`, `j = 0 .. 2N`, in FOV units:
    /// the lattice on which Q is sampled (0 alone along an axis of one
    /// voxel).
    pub fn displacements(&self) -> Lattice {
        Lattice {
            n: self.doubled(),
            origin: self.n.map(|n| if n == 1 { 0.0 } else { -1.0 }),
            step: [0, 1, 2].map(|d| 1.0 / self.n[d] as f64),
        }
    }

    /// The same grid with another voxel basis.
    pub fn with_basis(self, basis: Basis) -> Grid {
        Grid { basis, ..self }
    }

    /// The Fourier transform of the voxel basis at k (cycles/FOV), real:
    /// for the box `phi(k) = V prod_d sinc(k_d / N_d)`, with V the voxel
    /// volume in mm^3 and `sinc(u) = sin(pi u) / (pi u)`; for the delta, V.
    pub fn phi(&self, k: [f64; 3]) -> f64 {
        match self.basis {
            Basis::Box => {
                self.voxel_volume()
                    * sinc(k[0] / self.n[0] as f64)
                    * sinc(k[1] / self.n[1] as f64)
                    * sinc(k[2] / self.n[2] as f64)
            }
            Basis::Delta => self.voxel_volume(),
        }
    }
}

/// The doubled shape of an image shape `n`: `2 n` along each axis, 1 along
/// an axis of one voxel (a 2-D grid's z).
pub fn doubled(n: [usize; 3]) -> [usize; 3] {
    n.map(|n| if n == 1 { 1 } else { 2 * n })
}

/// The image shape whose doubled shape is `d` (the inverse of [`doubled`]).
pub fn undoubled(d: [usize; 3]) -> [usize; 3] {
    d.map(|d| if d == 1 { 1 } else { d / 2 })
}

/// The rule `n` breaks, if it cannot be a reconstruction matrix: `Nx` and
/// `Ny` even, from 4 to [`crate::MAX_N`]; `Nz` the same, or 1 (a 2-D grid).
pub fn matrix_problem(n: [usize; 3]) -> Option<String> {
    let ok = |v: usize| (4..=crate::MAX_N).contains(&v) && v.is_multiple_of(2);
    if ok(n[0]) && ok(n[1]) && (ok(n[2]) || n[2] == 1) {
        return None;
    }
    Some(format!(
        "each size must be even, from 4 to {}, or z 1 for a 2-D grid",
        crate::MAX_N
    ))
}

/// The `(x, y, z)` index of linear index `idx` in an `n` array, x fastest.
#[inline]
pub fn index3(n: [usize; 3], idx: usize) -> [usize; 3] {
    [idx % n[0], (idx / n[0]) % n[1], idx / (n[0] * n[1])]
}

/// `sin(pi u) / (pi u)`, with the limit 1 at 0.
pub fn sinc(u: f64) -> f64 {
    if u.abs() < 1e-8 {
        1.0
    } else {
        let a = std::f64::consts::PI * u;
        a.sin() / a
    }
}

/// A regular lattice of points, x fastest: point `(i, j, l)` is at
/// `origin + (i, j, l) * step` (componentwise), in FOV units.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Lattice {
    pub n: [usize; 3],
    pub origin: [f64; 3],
    pub step: [f64; 3],
}

impl Lattice {
    pub fn len(&self) -> usize {
        self.n[0] * self.n[1] * self.n[2]
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Position of the point with linear index `idx` (x fastest).
    #[inline]
    pub fn point(&self, idx: usize) -> [f64; 3] {
        let [i, j, l] = index3(self.n, idx);
        [
            self.origin[0] + i as f64 * self.step[0],
            self.origin[1] + j as f64 * self.step[1],
            self.origin[2] + l as f64 * self.step[2],
        ]
    }
}

/// A real image on its own grid: a reference scan, say, whose matrix and
/// field of view may differ from the reconstruction's (same isocentre).
#[derive(Debug, Clone, PartialEq)]
pub struct Volume {
    pub grid: Grid,
    /// x fastest, one value per voxel.
    pub values: Vec<f64>,
}

impl Volume {
    /// A volume with checked length and finite values.
    pub fn new(grid: Grid, values: Vec<f64>) -> Result<Self> {
        Error::check_len("volume values", grid.len(), values.len())?;
        if let Some(bad) = values.iter().find(|v| !v.is_finite()) {
            return Err(Error::Invalid {
                what: "volume values",
                reason: format!("values must be finite, found {bad}"),
            });
        }
        Ok(Volume { grid, values })
    }
}

/// A volume placed in the scanner by its own voxel-to-RAS transform (a
/// NIfTI image: a reference from another scan, with its own matrix, FOV
/// and orientation).
#[derive(Debug, Clone, PartialEq)]
pub struct Oriented {
    /// Voxels along its axes i, j, k.
    pub n: [usize; 3],
    /// i fastest, one finite value per voxel.
    pub values: Vec<f64>,
    /// Rows of the 3 x 4 matrix taking `(i, j, k, 1)` to RAS mm.
    pub affine: [[f64; 4]; 3],
}

impl Oriented {
    /// A volume with checked length, finite values and an invertible,
    /// finite transform.
    pub fn new(n: [usize; 3], values: Vec<f64>, affine: [[f64; 4]; 3]) -> Result<Self> {
        Error::check_len("oriented volume values", n.iter().product(), values.len())?;
        let invalid = |reason: String| Error::Invalid {
            what: "oriented volume",
            reason,
        };
        if let Some(bad) = values.iter().find(|v| !v.is_finite()) {
            return Err(invalid(format!("values must be finite, found {bad}")));
        }
        if affine.iter().flatten().any(|v| !v.is_finite()) {
            return Err(invalid(format!("its transform {affine:?} is not finite")));
        }
        let o = Oriented { n, values, affine };
        if o.inverse().is_none() {
            return Err(invalid(format!("its transform {affine:?} is singular")));
        }
        Ok(o)
    }

    /// The inverse transform (RAS mm to voxel coordinates), as 3 x 4 rows;
    /// `None` when singular.
    pub fn inverse(&self) -> Option<[[f64; 4]; 3]> {
        invert_affine(&self.affine)
    }

    /// The volume's voxel sizes (mm): the lengths of its axes' columns.
    pub fn voxel_mm(&self) -> [f64; 3] {
        [0, 1, 2].map(|c| {
            (0..3)
                .map(|r| self.affine[r][c].powi(2))
                .sum::<f64>()
                .sqrt()
        })
    }
}

/// The inverse of an affine map given as 3 x 4 rows; `None` when its
/// linear part is singular (relative to its scale).
pub fn invert_affine(a: &[[f64; 4]; 3]) -> Option<[[f64; 4]; 3]> {
    let m = |r: usize, c: usize| a[r][c];
    let det = m(0, 0) * (m(1, 1) * m(2, 2) - m(1, 2) * m(2, 1))
        - m(0, 1) * (m(1, 0) * m(2, 2) - m(1, 2) * m(2, 0))
        + m(0, 2) * (m(1, 0) * m(2, 1) - m(1, 1) * m(2, 0));
    let scale: f64 = (0..3)
        .map(|c| (0..3).map(|r| m(r, c).powi(2)).sum::<f64>().sqrt())
        .product();
    if !(det.abs() > 1e-12 * scale) {
        return None;
    }
    // The adjugate over the determinant.
    let mut inv = [[0.0; 4]; 3];
    for (r, row) in inv.iter_mut().enumerate() {
        for (c, v) in row.iter_mut().take(3).enumerate() {
            let (r1, r2) = ((c + 1) % 3, (c + 2) % 3);
            let (c1, c2) = ((r + 1) % 3, (r + 2) % 3);
            *v = (m(r1, c1) * m(r2, c2) - m(r1, c2) * m(r2, c1)) / det;
        }
    }
    for r in 0..3 {
        inv[r][3] = -(0..3).map(|c| inv[r][c] * a[c][3]).sum::<f64>();
    }
    Some(inv)
}

#[cfg(test)]
mod oriented_tests {
    use super::*;

    #[test]
    fn an_affine_and_its_inverse_compose_to_the_identity() {
        let a = [
            [0.0, -2.0, 0.5, 10.0],
            [3.0, 0.1, 0.0, -4.0],
            [0.2, 0.0, 1.5, 7.0],
        ];
        let inv = invert_affine(&a).unwrap();
        let apply = |m: &[[f64; 4]; 3], p: [f64; 3]| {
            [0, 1, 2].map(|r| (0..3).map(|c| m[r][c] * p[c]).sum::<f64>() + m[r][3])
        };
        for p in [[0.0, 0.0, 0.0], [1.0, -2.0, 3.5], [-7.0, 4.0, 0.25]] {
            let q = apply(&inv, apply(&a, p));
            for d in 0..3 {
                assert!((q[d] - p[d]).abs() < 1e-12, "{q:?} {p:?}");
            }
        }
        let singular = [
            [1.0, 2.0, 3.0, 0.0],
            [2.0, 4.0, 6.0, 0.0],
            [0.0, 0.0, 1.0, 0.0],
        ];
        assert!(invert_affine(&singular).is_none());
        assert!(Oriented::new([1, 1, 1], vec![1.0], singular).is_err());
    }
}
