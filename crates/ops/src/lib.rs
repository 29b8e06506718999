//! Linear operators, written once above the [`Backend`], and composed.
//!
//! A [`LinearOp`] maps vectors of one length to vectors of another and
//! offers its forward map, its adjoint and its normal map `A^H A`. The
//! normal map defaults to the adjoint of the forward map, and an operator
//! overrides it where a faster form exists (a stack's normal is the sum of
//! its blocks' normals, as BART's `linop_normal` is; F^H F is a Toeplitz
//! product). Operators combine by [`Compose`], [`Sum`], [`Stack`],
//! [`Scaled`], [`Diagonal`] and [`Identity`]: lengths are checked once,
//! when they are combined, and each operator owns the scratch vectors its
//! maps need, made then, so applying one allocates nothing. [`Shared`]
//! uses one operator in several places (SENSE's one F), and [`Sharded`]
//! splits a stack over the GPUs of a host. Combinators call hooks
//! ([`LinearOp::diagonal`], [`LinearOp::normal_between`],
//! [`LinearOp::normal_into`]) through which an operator fuses its part with
//! its neighbours': the Toeplitz product takes a coil's map along in its
//! passes, and a stack's coils add in place.
//!
//! The sparse priors' operators live here too: the 3-D finite differences
//! [`Gradient`] of total variation and the [`Directional`] weighting of
//! structure-guided total variation (Ehrhardt and Betcke, SIAM J. Imaging
//! Sci. 2016), with the proximal maps of their norms ([`GroupNorm`]), and
//! the orthonormal [`Wavelet`] transform of the l1-wavelet prior with its
//! norm ([`WaveletL1`]); a prior's norm is a [`Norm`].
//! [`testing`] checks any operator's adjoint and normal map against its
//! forward map.

mod combine;
mod finite;
mod norm;
mod shard;
pub mod testing;
mod wavelet;

pub use combine::{Compose, Diagonal, Identity, Scaled, Shared, Stack, Sum};
pub use finite::{Directional, Gradient, Quadratic};
pub use norm::{power_norm, GroupNorm, Norm};
pub use shard::{sum_exp_on_shards, Sharded};
pub use wavelet::{check_wavelet_grid, shifted_wavelets, Wavelet, WaveletL1, MIN_COARSE};

use recon_core::{Backend, CoilOp, Error, Result};

/// A linear map `A` from vectors of length `shape()[1]` to vectors of
/// length `shape()[0]`, on the device of backend `B`.
///
/// Maps take `&mut self` because an operator owns its scratch vectors.
/// Each map checks the lengths of its arguments.
pub trait LinearOp<B: Backend>: Send {
    /// `[rows, columns]`: the lengths of outputs and of inputs.
    fn shape(&self) -> [usize; 2];

    /// `out = A x`
    fn forward(&mut self, backend: &B, out: &mut B::Vector, x: &B::Vector) -> Result<()>;

    /// `out = A^H y`
    fn adjoint(&mut self, backend: &B, out: &mut B::Vector, y: &B::Vector) -> Result<()>;

    /// `out = A^H A x`. This default allocates the intermediate vector on
    /// every call; operators of this crate override it.
    fn normal(&mut self, backend: &B, out: &mut B::Vector, x: &B::Vector) -> Result<()> {
        let mut y = backend.zeros(self.shape()[0])?;
        self.forward(backend, &mut y, x)?;
        self.adjoint(backend, out, &y)
    }

    // --- specialisations: hooks that combinators call, so that an
    // operator may fuse its part with its neighbours' (defaults compose) --

    /// The vector `d` where this operator is the diagonal `diag(d)`, so that
    /// a composition `A diag(d)` can hand it to `A` ([`LinearOp::normal_between`]).
    fn diagonal(&self) -> Option<&B::Vector> {
        None
    }

    /// `out = S^H (A^H A) (S x)`, or `out += ...` with `accumulate`, for
    /// `S = diag(s)`: the normal map of `A diag(s)` (SENSE's term of one
    /// coil). `scratch` is two vectors of the input length. This default
    /// composes the maps and [`LinearOp::normal`]; an operator whose normal
    /// map can take the diagonal along (the Toeplitz product's first read
    /// and last write) overrides it.
    fn normal_between(
        &mut self,
        backend: &B,
        out: &mut B::Vector,
        accumulate: bool,
        s: &B::Vector,
        x: &B::Vector,
        scratch: (&mut B::Vector, &mut B::Vector),
    ) -> Result<()> {
        normal_between_by_pieces(self, backend, out, accumulate, s, x, scratch)
    }

    /// `out = A^H A x`, or `out += A^H A x` with `accumulate`, with
    /// `scratch` two vectors of the input length the caller lends (a stack
    /// lends its own to each block, so that its blocks hold none). This
    /// default applies [`LinearOp::normal`] (into `scratch.0` to add); an
    /// operator that can add in place, or fuse, overrides it.
    fn normal_into(
        &mut self,
        backend: &B,
        out: &mut B::Vector,
        x: &B::Vector,
        accumulate: bool,
        scratch: (&mut B::Vector, &mut B::Vector),
    ) -> Result<()> {
        if !accumulate {
            return self.normal(backend, out, x);
        }
        let (tmp, _) = scratch;
        self.normal(backend, tmp, x)?;
        backend.axpy(out, 1.0, tmp)
    }
}

impl<B: Backend, A: LinearOp<B> + ?Sized> LinearOp<B> for Box<A> {
    fn shape(&self) -> [usize; 2] {
        (**self).shape()
    }
    fn forward(&mut self, backend: &B, out: &mut B::Vector, x: &B::Vector) -> Result<()> {
        (**self).forward(backend, out, x)
    }
    fn adjoint(&mut self, backend: &B, out: &mut B::Vector, y: &B::Vector) -> Result<()> {
        (**self).adjoint(backend, out, y)
    }
    fn normal(&mut self, backend: &B, out: &mut B::Vector, x: &B::Vector) -> Result<()> {
        (**self).normal(backend, out, x)
    }
    fn diagonal(&self) -> Option<&B::Vector> {
        (**self).diagonal()
    }
    fn normal_between(
        &mut self,
        backend: &B,
        out: &mut B::Vector,
        accumulate: bool,
        s: &B::Vector,
        x: &B::Vector,
        scratch: (&mut B::Vector, &mut B::Vector),
    ) -> Result<()> {
        (**self).normal_between(backend, out, accumulate, s, x, scratch)
    }
    fn normal_into(
        &mut self,
        backend: &B,
        out: &mut B::Vector,
        x: &B::Vector,
        accumulate: bool,
        scratch: (&mut B::Vector, &mut B::Vector),
    ) -> Result<()> {
        (**self).normal_into(backend, out, x, accumulate, scratch)
    }
}

/// [`LinearOp::normal_between`] from its pieces: `y = S x`, `A^H A y` by
/// `op`'s normal map, `out (+)= S^H (A^H A y)`.
pub fn normal_between_by_pieces<B: Backend, A: LinearOp<B> + ?Sized>(
    op: &mut A,
    backend: &B,
    out: &mut B::Vector,
    accumulate: bool,
    s: &B::Vector,
    x: &B::Vector,
    (y, ny): (&mut B::Vector, &mut B::Vector),
) -> Result<()> {
    backend.coil(y, CoilOp::Forward, s, x)?;
    op.normal(backend, ny, y)?;
    let how = if accumulate {
        CoilOp::AddAdjoint
    } else {
        CoilOp::Adjoint
    };
    backend.coil(out, how, s, ny)
}

/// Which of an operator's maps a length check is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Map {
    Forward,
    Adjoint,
    Normal,
}

/// Fails unless `out` and `x` have the lengths map `map` of an operator of
/// shape `shape` takes.
pub fn check<B: Backend>(
    backend: &B,
    what: &'static str,
    shape: [usize; 2],
    map: Map,
    out: &B::Vector,
    x: &B::Vector,
) -> Result<()> {
    let [rows, cols] = shape;
    let (o, i) = match map {
        Map::Forward => (rows, cols),
        Map::Adjoint => (cols, rows),
        Map::Normal => (cols, cols),
    };
    Error::check_len(what, i, backend.len(x))?;
    Error::check_len(what, o, backend.len(out))
}

/// Fails unless `inner`'s output length is `outer`'s input length: the two
/// can be chained as `outer(inner(x))`.
fn check_chain(what: &'static str, outer: [usize; 2], inner: [usize; 2]) -> Result<()> {
    if outer[1] != inner[0] {
        return Err(Error::Invalid {
            what,
            reason: format!(
                "an operator of {} outputs cannot feed one of {} inputs",
                inner[0], outer[1]
            ),
        });
    }
    Ok(())
}
