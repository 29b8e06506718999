//! Finite differences: total variation's 3-D gradient, the directional
//! weighting of structure-guided total variation, and the quadratic prior's
//! weighted differences W.

use crate::{check, Compose, Diagonal, LinearOp, Map, Stack};
use rayon::prelude::*;
use recon_core::{Backend, Complex, Error, Real, Result, Stencil};

/// The forward differences of a 3-D image of shape `n` along x, y and z:
/// a field of three components (see [`Backend::grad`]). Isotropic total
/// variation is the sum over voxels of the norm of this field.
pub struct Gradient<B: Backend> {
    n: [usize; 3],
    field: B::Vector,
}

impl<B: Backend> Gradient<B> {
    pub fn new(backend: &B, n: [usize; 3]) -> Result<Self> {
        let len: usize = n.iter().product();
        Ok(Gradient {
            n,
            field: backend.zeros(3 * len)?,
        })
    }

    /// `4 sum_a sin^2(pi (n_a - 1) / (2 n_a))`, below 12: the largest
    /// eigenvalue of `grad^H grad`, a sum over axes of the 1-D difference
    /// operator's largest, `2 - 2 cos(pi (n - 1) / n)`.
    pub fn norm_squared(&self) -> f64 {
        self.n
            .iter()
            .map(|&n| {
                let s = (std::f64::consts::PI * (n as f64 - 1.0) / (2.0 * n as f64)).sin();
                4.0 * s * s
            })
            .sum()
    }
}

impl<B: Backend> LinearOp<B> for Gradient<B> {
    fn shape(&self) -> [usize; 2] {
        let len: usize = self.n.iter().product();
        [3 * len, len]
    }
    fn forward(&mut self, backend: &B, out: &mut B::Vector, x: &B::Vector) -> Result<()> {
        check(backend, "gradient", self.shape(), Map::Forward, out, x)?;
        backend.grad(out, x, self.n)
    }
    fn adjoint(&mut self, backend: &B, out: &mut B::Vector, y: &B::Vector) -> Result<()> {
        check(backend, "gradient", self.shape(), Map::Adjoint, out, y)?;
        backend.grad_adjoint(out, y, self.n)
    }
    fn normal(&mut self, backend: &B, out: &mut B::Vector, x: &B::Vector) -> Result<()> {
        check(backend, "gradient", self.shape(), Map::Normal, out, x)?;
        // out = grad^H grad x, the negative Laplacian
        backend.grad(&mut self.field, x, self.n)?;
        backend.grad_adjoint(out, &self.field, self.n)
    }
}

/// `P v = v - xi (xi . v)` per voxel, on a 3-component field: the
/// weighting of directional total variation. `xi` is the reference's
/// normalised gradient, `grad r / sqrt(|grad r|^2 + eta^2)`, so where the
/// reference has an edge the image's gradient along the edge's normal is
/// not penalised, and where the reference is flat (`|grad r| << eta`)
/// `P` is nearly the identity and the prior is total variation. `P` is
/// symmetric, so it is its own adjoint.
pub struct Directional<B: Backend> {
    len: usize,
    xi: B::Vector,
}

impl<B: Backend> Directional<B> {
    /// From the reference image `r` on the grid `n` (real, finite) and
    /// `eta_rel`, eta as a fraction of the reference's largest gradient
    /// norm (`> 0`). A reference without edges gives `xi = 0`: total
    /// variation.
    pub fn from_reference(backend: &B, n: [usize; 3], r: &[f64], eta_rel: f64) -> Result<Self> {
        let len: usize = n.iter().product();
        Error::check_len(
            "directional TV reference (one value per voxel)",
            len,
            r.len(),
        )?;
        if !(eta_rel.is_finite() && eta_rel > 0.0) {
            return Err(Error::Invalid {
                what: "eta",
                reason: format!("must be finite and positive, got {eta_rel}"),
            });
        }
        if let Some(i) = r.iter().position(|v| !v.is_finite()) {
            return Err(Error::Invalid {
                what: "directional TV reference",
                reason: format!("voxel {i} is not finite ({})", r[i]),
            });
        }
        let g = reference_gradient(r, n);
        let norm = |i: usize| (0..3).map(|a| g[a * len + i].powi(2)).sum::<f64>();
        let peak = (0..len)
            .into_par_iter()
            .map(norm)
            .reduce(|| 0.0, f64::max)
            .sqrt();
        let eta2 = (eta_rel * peak).powi(2);
        let mut xi = vec![Complex::default(); 3 * len];
        if peak > 0.0 {
            // component a of voxel i: g_a / sqrt(|g|^2 + eta^2)
            xi.par_iter_mut().enumerate().for_each(|(k, v)| {
                let d = (norm(k % len) + eta2).sqrt();
                *v = Complex::new(B::Real::of(g[k] / d), B::Real::of(0.0));
            });
        }
        Ok(Directional {
            len: 3 * len,
            xi: backend.upload(&xi)?,
        })
    }
}

/// Forward differences of a real image, as [`Backend::grad`] takes them.
fn reference_gradient(r: &[f64], n: [usize; 3]) -> Vec<f64> {
    let len = r.len();
    let stride = [1, n[0], n[0] * n[1]];
    let mut g = vec![0.0; 3 * len];
    g.par_iter_mut().enumerate().for_each(|(k, out)| {
        let (a, i) = (k / len, k % len);
        if recon_core::index3(n, i)[a] + 1 < n[a] {
            *out = r[i + stride[a]] - r[i];
        }
    });
    g
}

impl<B: Backend> LinearOp<B> for Directional<B> {
    fn shape(&self) -> [usize; 2] {
        [self.len; 2]
    }
    fn forward(&mut self, backend: &B, out: &mut B::Vector, x: &B::Vector) -> Result<()> {
        check(
            backend,
            "directional weighting",
            self.shape(),
            Map::Forward,
            out,
            x,
        )?;
        backend.copy(out, x)?;
        backend.project_off(out, &self.xi)
    }
    fn adjoint(&mut self, backend: &B, out: &mut B::Vector, y: &B::Vector) -> Result<()> {
        self.forward(backend, out, y)
    }
    fn normal(&mut self, backend: &B, out: &mut B::Vector, x: &B::Vector) -> Result<()> {
        // P^H P = P P, in place
        check(
            backend,
            "directional weighting",
            self.shape(),
            Map::Normal,
            out,
            x,
        )?;
        backend.copy(out, x)?;
        backend.project_off(out, &self.xi)?;
        backend.project_off(out, &self.xi)
    }
}

/// The quadratic prior's W, `||W rho||^2`, as an operator: the weighted
/// forward differences of a [`Stencil`], `w[d][n] (x[n + e_d] - x[n])`
/// along x, y and z (three fields in turn, as [`Gradient`]'s), then its
/// diagonal rows `diag[n] x[n]` when it has them. Forward and adjoint are
/// composed from the gradient and diagonals; the normal map is the solver's
/// own W^H W kernel ([`Backend::add_whw`]), so what is applied here is what
/// CG applies.
pub struct Quadratic<B: Backend> {
    /// W as a composition, for the forward and adjoint maps.
    rows: Box<dyn LinearOp<B>>,
    /// The stencil's squared weights, for W^H W.
    whw: B::Weights,
    /// Zeros of the image length: `out = 0` before `out += W^H W x`.
    zero: B::Vector,
}

impl<B: Backend + 'static> Quadratic<B> {
    pub fn new(backend: &B, w: &Stencil) -> Result<Self> {
        w.check()?;
        let len: usize = w.n.iter().product();
        let complex = |v: &[f64]| -> Vec<Complex<B::Real>> {
            v.iter()
                .map(|&a| Complex::new(B::Real::of(a), B::Real::of(0.0)))
                .collect()
        };
        let gradient = Gradient::new(backend, w.n)?;
        let differences: Box<dyn LinearOp<B>> = match &w.w {
            None => Box::new(gradient),
            Some(edges) => {
                // one weight per component of the gradient's field; those of
                // the last plane along an axis meet its zeros
                let d = backend.upload(&complex(&edges.concat()))?;
                Box::new(Compose::new(backend, Diagonal::new(backend, d)?, gradient)?)
            }
        };
        let rows: Box<dyn LinearOp<B>> = match &w.diag {
            None => differences,
            Some(diag) => {
                let d = Diagonal::new(backend, backend.upload(&complex(diag))?)?;
                Box::new(Stack::new(backend, vec![differences, Box::new(d)])?)
            }
        };
        Ok(Quadratic {
            rows,
            whw: backend.upload_weights(w)?,
            zero: backend.zeros(len)?,
        })
    }
}

impl<B: Backend> LinearOp<B> for Quadratic<B> {
    fn shape(&self) -> [usize; 2] {
        self.rows.shape()
    }
    fn forward(&mut self, backend: &B, out: &mut B::Vector, x: &B::Vector) -> Result<()> {
        self.rows.forward(backend, out, x)
    }
    fn adjoint(&mut self, backend: &B, out: &mut B::Vector, y: &B::Vector) -> Result<()> {
        self.rows.adjoint(backend, out, y)
    }
    fn normal(&mut self, backend: &B, out: &mut B::Vector, x: &B::Vector) -> Result<()> {
        check(
            backend,
            "quadratic prior's W",
            self.shape(),
            Map::Normal,
            out,
            x,
        )?;
        // out = W^H W x
        backend.copy(out, &self.zero)?;
        backend.add_whw(out, 1.0, x, &self.whw)
    }
}
