//! Edge weights of the finite-difference regulariser W.

use crate::{Error, Result};

/// Weights of first-order finite differences along x, y and z.
///
/// `w[d][n]` weighs the edge between voxel `n` and its neighbour `n + e_d`,
/// so that `(W x)_{d,n} = w[d][n] (x[n + e_d] - x[n])`. Entries of voxels on
/// the last plane along `d` have no neighbour there and are ignored. This is
/// the "weighted stencil" format both backends apply; it keeps W^H W sparse
/// (7 points) without building a matrix.
#[derive(Debug, Clone, PartialEq)]
pub struct EdgeWeights {
    pub n: [usize; 3],
    /// Per-axis weights; `None` weighs every edge 1 without storing anything.
    pub w: Option<[Vec<f64>; 3]>,
}

impl EdgeWeights {
    /// Every edge weighted 1: plain first differences.
    pub fn uniform(n: [usize; 3]) -> Self {
        EdgeWeights { n, w: None }
    }

    /// Weights per axis, one per voxel (see the type's docs).
    pub fn weighted(n: [usize; 3], w: [Vec<f64>; 3]) -> Result<Self> {
        let e = EdgeWeights { n, w: Some(w) };
        e.check()?;
        Ok(e)
    }

    /// Checks that each axis has one weight per voxel and all are finite.
    pub fn check(&self) -> Result<()> {
        let len = self.n[0] * self.n[1] * self.n[2];
        for w in self.w.iter().flatten() {
            Error::check_len("edge weights", len, w.len())?;
            if let Some(bad) = w.iter().find(|v| !v.is_finite()) {
                return Err(Error::Invalid {
                    what: "edge weights",
                    reason: format!("weights must be finite, found {bad}"),
                });
            }
        }
        Ok(())
    }

    /// Squared weights in precision `T`, or `None` when uniform.
    pub fn squared<T: crate::Real>(&self) -> Option<[Vec<T>; 3]> {
        self.w
            .as_ref()
            .map(|w| w.clone().map(|v| v.iter().map(|x| T::of(x * x)).collect()))
    }

    /// Linear strides of the three axes (x fastest).
    pub fn strides(&self) -> [usize; 3] {
        [1, self.n[0], self.n[0] * self.n[1]]
    }
}
