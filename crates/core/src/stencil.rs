//! The regulariser W as a weighted stencil: first differences with one weight
//! per edge, plus an optional diagonal.

use crate::{Error, Result};

/// W as a weighted stencil: the sparse format both backends apply.
///
/// W stacks two kinds of rows:
/// - a first difference per voxel `n` and axis `d`:
///   `(W x)_{d,n} = w[d][n] (x[n + e_d] - x[n])`. `w[d][n]` weighs the edge
///   between voxel `n` and its neighbour `n + e_d`; entries of voxels on the
///   last plane along `d` have no neighbour there and are ignored;
/// - optionally a diagonal row per voxel, `(W x)_n = diag[n] x[n]` (a support
///   mask, say: nonzero outside the object).
///
/// Arrays are x fastest, one entry per voxel. So W^H W is the 7-point
/// operator
///
/// ```text
/// (W^H W x)[n] = sum_d w[d][n]^2       (x[n] - x[n + e_d])
///              + sum_d w[d][n - e_d]^2 (x[n] - x[n - e_d])
///              + diag[n]^2 x[n],
/// ```
///
/// applied without building a matrix; it stays sparse whatever the weights.
#[derive(Debug, Clone, PartialEq)]
pub struct Stencil {
    pub n: [usize; 3],
    /// Per-axis edge weights; `None` weighs every edge 1 without storing anything.
    pub w: Option<[Vec<f64>; 3]>,
    /// Diagonal weights; `None` for no diagonal rows.
    pub diag: Option<Vec<f64>>,
}

impl Stencil {
    /// Every edge weighted 1, no diagonal: plain first differences.
    pub fn uniform(n: [usize; 3]) -> Self {
        Stencil {
            n,
            w: None,
            diag: None,
        }
    }

    /// Plain first differences within each z-plane and none between
    /// planes: a batch of 2-D images stacked along z.
    pub fn planes(n: [usize; 3]) -> Self {
        let len = n[0] * n[1] * n[2];
        Stencil {
            n,
            w: Some([vec![1.0; len], vec![1.0; len], vec![0.0; len]]),
            diag: None,
        }
    }

    /// Edge weights per axis, one per voxel (see the type's docs).
    pub fn weighted(n: [usize; 3], w: [Vec<f64>; 3]) -> Result<Self> {
        let e = Stencil {
            n,
            w: Some(w),
            diag: None,
        };
        e.check()?;
        Ok(e)
    }

    /// The same stencil with diagonal rows `diag[n] x[n]` added.
    pub fn with_diag(self, diag: Vec<f64>) -> Result<Self> {
        let e = Stencil {
            diag: Some(diag),
            ..self
        };
        e.check()?;
        Ok(e)
    }

    /// Checks that each array has one weight per voxel and all are finite.
    pub fn check(&self) -> Result<()> {
        let len = self.n[0] * self.n[1] * self.n[2];
        let arrays = self.w.iter().flatten().map(|w| ("edge weights", w));
        for (what, w) in arrays.chain(self.diag.iter().map(|d| ("diagonal weights", d))) {
            Error::check_len(what, len, w.len())?;
            if let Some(bad) = w.iter().find(|v| !v.is_finite()) {
                return Err(Error::Invalid {
                    what,
                    reason: format!("weights must be finite, found {bad}"),
                });
            }
        }
        Ok(())
    }

    /// Squared edge weights in precision `T`, or `None` when uniform.
    pub fn squared<T: crate::Real>(&self) -> Option<[Vec<T>; 3]> {
        self.w.as_ref().map(|w| w.clone().map(|v| square(&v)))
    }

    /// Squared diagonal in precision `T`, or `None` without one.
    pub fn diag_squared<T: crate::Real>(&self) -> Option<Vec<T>> {
        self.diag.as_deref().map(square)
    }

    /// Linear strides of the three axes (x fastest).
    pub fn strides(&self) -> [usize; 3] {
        [1, self.n[0], self.n[0] * self.n[1]]
    }
}

fn square<T: crate::Real>(v: &[f64]) -> Vec<T> {
    v.iter().map(|x| T::of(x * x)).collect()
}
