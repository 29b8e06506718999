//! The types of [`Backend`](super::Backend)'s arguments: signs, targets,
//! CG's scalar ratios and the workload a run announces.

use crate::{Error, Lattice, Result};

/// The sign of the exponent in the summation engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sign {
    /// `exp(+i 2pi k.x)`: F^H D and Q.
    Plus,
    /// `exp(-i 2pi k.x)`: the forward model F.
    Minus,
}

/// FFT direction. `Inverse` is normalised by `1 / len`, so that
/// `inverse(forward(x)) = x`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    Forward,
    Inverse,
}

/// The points at which the summation engine evaluates its sum, in the units
/// of the source positions' reciprocal (FOV units against cycles/FOV).
#[derive(Debug, Clone, Copy)]
pub enum Targets<'a> {
    /// A regular lattice (image voxels, Q displacements): coordinates are
    /// computed from the index, so nothing is stored.
    Lattice(Lattice),
    /// An explicit list of points.
    List(&'a [[f64; 3]]),
}

impl Targets<'_> {
    pub fn len(&self) -> usize {
        match self {
            Targets::Lattice(l) => l.len(),
            Targets::List(p) => p.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Fails unless the targets `first .. first + len` exist: a slab for
    /// [`Backend::sum_exp`](super::Backend::sum_exp).
    pub fn check_slab(&self, first: usize, len: usize) -> Result<()> {
        if first.checked_add(len).is_some_and(|end| end <= self.len()) {
            Ok(())
        } else {
            Err(Error::Invalid {
                what: "sum_exp output",
                reason: format!(
                    "targets {first} .. {} asked of {}",
                    first.saturating_add(len),
                    self.len()
                ),
            })
        }
    }

    #[inline]
    pub fn point(&self, idx: usize) -> [f64; 3] {
        match self {
            Targets::Lattice(l) => l.point(idx),
            Targets::List(p) => p[idx],
        }
    }
}

/// How [`Backend::coil`](super::Backend::coil) applies a coil's sensitivity map `s` to `x`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CoilOp {
    /// `out = s .* x`
    Forward,
    /// `out = conj(s) .* x`
    Adjoint,
    /// `out = out + conj(s) .* x`
    AddAdjoint,
}

/// What [`Backend::group_prox`](super::Backend::group_prox) does to each group `v` of components
/// (the gradient's three components at a voxel; a single value for l1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupProx {
    /// Soft thresholding, the proximal map of `t ||.||_2`:
    /// `v = max(0, 1 - t / |v|) v`.
    Shrink,
    /// Projection onto the ball `|v| <= t`, the proximal map of the convex
    /// conjugate of `t ||.||_2`: `v = min(1, t / |v|) v`.
    Project,
}

/// A coefficient `s[num] / s[den]` of an iterative solver, taken from
/// scalars that stay on the device ([`Backend::scalars`](super::Backend::scalars)). It is 0 unless
/// `s[num]` is finite and above `s[floor]` and `s[den]` is finite and
/// positive: a solver whose residual has fallen to its floor, or whose step
/// broke down, then leaves its vectors as they are for the iterations it
/// queued before reading its scalars. The GPU's kernels (vector.cu) mirror
/// [`Ratio::of`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ratio {
    pub num: usize,
    pub den: usize,
    pub floor: usize,
}

impl Ratio {
    /// The coefficient, from the scalars on the host.
    pub fn of(&self, s: &[f64]) -> f64 {
        let (num, den) = (s[self.num], s[self.den]);
        if num.is_finite() && num > s[self.floor] && den.is_finite() && den > 0.0 {
            num / den
        } else {
            0.0
        }
    }

    /// Fails unless every slot lies among `len` scalars.
    pub fn check(&self, len: usize) -> Result<()> {
        let top = self.num.max(self.den).max(self.floor);
        Error::check_index("solver scalars", top, len)
    }
}

/// CG's updates from one direction to the next, `x = x + a c p` and
/// `p = r + d p` with `c = step.of(s)` and `d = beta.of(s)`
/// ([`Backend::cg_update`](super::Backend::cg_update)), handed to the map
/// of the new direction
/// ([`Backend::toeplitz_update_dot`](super::Backend::toeplitz_update_dot)):
/// a device whose product reads p anyway may make them on that read. `r`
/// stands for the preconditioned residual where there is one.
pub struct CgStep<'v, V> {
    pub x: &'v mut V,
    pub a: f64,
    pub step: Ratio,
    pub r: &'v V,
    pub beta: Ratio,
}

impl<V> CgStep<'_, V> {
    /// The updates by a pass of their own, the direction `p`
    /// ([`Backend::cg_update`](super::Backend::cg_update)).
    pub fn apply<B: super::Backend<Vector = V> + ?Sized>(
        self,
        backend: &B,
        p: &mut V,
        s: &B::Scalars,
    ) -> Result<()> {
        backend.cg_update(self.x, self.a, self.step, p, self.r, self.beta, s)
    }
}

/// What a run will compute, told to the backend before it starts
/// ([`Backend::prepare`](super::Backend::prepare)): a GPU compiles the kernels these need side by
/// side, instead of one after another as each is first launched.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Workload {
    /// Non-uniform FFTs.
    pub nufft: Vec<NufftUse>,
    /// Toeplitz products (F^H F) of images of these shapes, with FFT(Q) on
    /// their doubled grids.
    pub toeplitz: Vec<[usize; 3]>,
    /// The exact summation engine.
    pub exact: bool,
    /// The sparse priors' finite differences and shrinkage ...
    pub sparse: bool,
    /// ... and the wavelets.
    pub wavelets: bool,
}

/// One NUFFT plan of a [`Workload`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NufftUse {
    pub modes: [usize; 3],
    pub tolerance: f64,
    /// Whether it interpolates (type 2, or a convolution) as well as
    /// spreads (type 1).
    pub type2: bool,
}
