//! The combinators: identity, scaling, diagonal, composition, sum and
//! vertical stack. Each checks its parts' shapes when it is made and makes
//! its scratch vectors then.

use crate::{check, check_chain, LinearOp, Map};
use recon_core::{Backend, CoilOp, Error, Result};

/// `I` on vectors of length `n`.
pub struct Identity {
    n: usize,
}

impl Identity {
    pub fn new(n: usize) -> Self {
        Identity { n }
    }
}

impl<B: Backend> LinearOp<B> for Identity {
    fn shape(&self) -> [usize; 2] {
        [self.n; 2]
    }
    fn forward(&mut self, backend: &B, out: &mut B::Vector, x: &B::Vector) -> Result<()> {
        check(backend, "identity", [self.n; 2], Map::Forward, out, x)?;
        backend.copy(out, x)
    }
    fn adjoint(&mut self, backend: &B, out: &mut B::Vector, y: &B::Vector) -> Result<()> {
        self.forward(backend, out, y)
    }
    fn normal(&mut self, backend: &B, out: &mut B::Vector, x: &B::Vector) -> Result<()> {
        self.forward(backend, out, x)
    }
}

/// `a A`, `a` real.
pub struct Scaled<A> {
    a: f64,
    op: A,
}

impl<A> Scaled<A> {
    pub fn new(a: f64, op: A) -> Result<Self> {
        if !a.is_finite() {
            return Err(Error::Invalid {
                what: "operator scale",
                reason: format!("must be finite, got {a}"),
            });
        }
        Ok(Scaled { a, op })
    }
}

impl<B: Backend, A: LinearOp<B>> LinearOp<B> for Scaled<A> {
    fn shape(&self) -> [usize; 2] {
        self.op.shape()
    }
    fn forward(&mut self, backend: &B, out: &mut B::Vector, x: &B::Vector) -> Result<()> {
        // out = a (A x)
        self.op.forward(backend, out, x)?;
        backend.scale(out, self.a)
    }
    fn adjoint(&mut self, backend: &B, out: &mut B::Vector, y: &B::Vector) -> Result<()> {
        self.op.adjoint(backend, out, y)?;
        backend.scale(out, self.a)
    }
    fn normal(&mut self, backend: &B, out: &mut B::Vector, x: &B::Vector) -> Result<()> {
        // (a A)^H (a A) = a^2 A^H A
        self.op.normal(backend, out, x)?;
        backend.scale(out, self.a * self.a)
    }
}

/// Multiplication by a fixed complex vector `d`: coil maps, density
/// weights, masks. `A x = d .* x`, `A^H y = conj(d) .* y`.
pub struct Diagonal<B: Backend> {
    n: usize,
    /// Shared with whoever else needs it (SENSE's F^H D takes the maps).
    d: std::sync::Arc<B::Vector>,
    /// For the normal map, made on its first use.
    work: Option<B::Vector>,
}

impl<B: Backend> Diagonal<B> {
    /// Takes `d` already on the device.
    pub fn new(backend: &B, d: B::Vector) -> Result<Self> {
        Self::shared(backend, std::sync::Arc::new(d))
    }

    /// Shares `d` (on the device) with other holders.
    pub fn shared(backend: &B, d: std::sync::Arc<B::Vector>) -> Result<Self> {
        let n = backend.len(&d);
        Ok(Diagonal { n, work: None, d })
    }
}

impl<B: Backend> LinearOp<B> for Diagonal<B> {
    fn shape(&self) -> [usize; 2] {
        [self.n; 2]
    }
    fn forward(&mut self, backend: &B, out: &mut B::Vector, x: &B::Vector) -> Result<()> {
        backend.coil(out, CoilOp::Forward, &self.d, x)
    }
    fn adjoint(&mut self, backend: &B, out: &mut B::Vector, y: &B::Vector) -> Result<()> {
        backend.coil(out, CoilOp::Adjoint, &self.d, y)
    }
    fn normal(&mut self, backend: &B, out: &mut B::Vector, x: &B::Vector) -> Result<()> {
        // |d|^2 .* x
        let work = made(backend, &mut self.work, self.n)?;
        backend.coil(work, CoilOp::Forward, &self.d, x)?;
        backend.coil(out, CoilOp::Adjoint, &self.d, work)
    }
    fn diagonal(&self) -> Option<&B::Vector> {
        Some(&self.d)
    }
}

/// `A C`: `C` first, then `A`.
pub struct Compose<B: Backend, A, C> {
    outer: A,
    inner: C,
    /// Two vectors of C's output length, made on first use (a stack lends
    /// its own to a composition after a diagonal, which then makes none).
    mid: Option<[B::Vector; 2]>,
}

impl<B: Backend, A: LinearOp<B>, C: LinearOp<B>> Compose<B, A, C> {
    /// `outer(inner(x))`; fails unless inner's outputs are outer's inputs.
    /// The backend is taken as every combinator takes it; the composition's
    /// scratch is made on first use, on the backend its maps run on.
    pub fn new(_backend: &B, outer: A, inner: C) -> Result<Self> {
        check_chain("composed operators", outer.shape(), inner.shape())?;
        Ok(Compose {
            mid: None,
            outer,
            inner,
        })
    }
}

impl<B: Backend, A: LinearOp<B>, C: LinearOp<B>> LinearOp<B> for Compose<B, A, C> {
    fn shape(&self) -> [usize; 2] {
        [self.outer.shape()[0], self.inner.shape()[1]]
    }
    fn forward(&mut self, backend: &B, out: &mut B::Vector, x: &B::Vector) -> Result<()> {
        // out = A (C x)
        let [m, _] = mid(backend, &mut self.mid, self.inner.shape()[0])?;
        self.inner.forward(backend, m, x)?;
        self.outer.forward(backend, out, m)
    }
    fn adjoint(&mut self, backend: &B, out: &mut B::Vector, y: &B::Vector) -> Result<()> {
        // out = C^H (A^H y)
        let [m, _] = mid(backend, &mut self.mid, self.inner.shape()[0])?;
        self.outer.adjoint(backend, m, y)?;
        self.inner.adjoint(backend, out, m)
    }
    fn normal(&mut self, backend: &B, out: &mut B::Vector, x: &B::Vector) -> Result<()> {
        let shape = self.shape();
        let [m, n] = mid(backend, &mut self.mid, self.inner.shape()[0])?;
        // After a diagonal S: out = S^H (A^H A) (S x), as A fuses it.
        if let Some(s) = self.inner.diagonal() {
            check(backend, "composition", shape, Map::Normal, out, x)?;
            return self.outer.normal_between(backend, out, false, s, x, (m, n));
        }
        // out = C^H (A^H A) (C x), with A's own normal map
        self.inner.forward(backend, m, x)?;
        self.outer.normal(backend, n, m)?;
        self.inner.adjoint(backend, out, n)
    }
    fn normal_into(
        &mut self,
        backend: &B,
        out: &mut B::Vector,
        x: &B::Vector,
        accumulate: bool,
        scratch: (&mut B::Vector, &mut B::Vector),
    ) -> Result<()> {
        // After a diagonal S: out (+)= S^H (A^H A) (S x), in place, in the
        // caller's scratch.
        if let Some(s) = self.inner.diagonal() {
            check(backend, "composition", self.shape(), Map::Normal, out, x)?;
            return self
                .outer
                .normal_between(backend, out, accumulate, s, x, scratch);
        }
        if !accumulate {
            return self.normal(backend, out, x);
        }
        let (tmp, _) = scratch;
        self.normal(backend, tmp, x)?;
        backend.axpy(out, 1.0, tmp)
    }
}

/// `slot`'s vector of length `len`, made on first use.
fn made<'v, B: Backend>(
    backend: &B,
    slot: &'v mut Option<B::Vector>,
    len: usize,
) -> Result<&'v mut B::Vector> {
    if slot.is_none() {
        *slot = Some(backend.zeros(len)?);
    }
    Ok(slot.as_mut().expect("just made"))
}

/// `slot`'s two vectors of length `len`, made on first use.
fn mid<'v, B: Backend>(
    backend: &B,
    slot: &'v mut Option<[B::Vector; 2]>,
    len: usize,
) -> Result<&'v mut [B::Vector; 2]> {
    if slot.is_none() {
        *slot = Some([backend.zeros(len)?, backend.zeros(len)?]);
    }
    Ok(slot.as_mut().expect("just made"))
}

/// `A + C`, of equal shapes.
pub struct Sum<B: Backend, A, C> {
    a: A,
    c: C,
    /// Two vectors of the output length and one of the input length.
    rows: [B::Vector; 2],
    cols: B::Vector,
}

impl<B: Backend, A: LinearOp<B>, C: LinearOp<B>> Sum<B, A, C> {
    pub fn new(backend: &B, a: A, c: C) -> Result<Self> {
        let (sa, sc) = (a.shape(), c.shape());
        if sa != sc {
            return Err(Error::Invalid {
                what: "summed operators",
                reason: format!("shapes {sa:?} and {sc:?} differ"),
            });
        }
        Ok(Sum {
            rows: [backend.zeros(sa[0])?, backend.zeros(sa[0])?],
            cols: backend.zeros(sa[1])?,
            a,
            c,
        })
    }
}

impl<B: Backend, A: LinearOp<B>, C: LinearOp<B>> LinearOp<B> for Sum<B, A, C> {
    fn shape(&self) -> [usize; 2] {
        self.a.shape()
    }
    fn forward(&mut self, backend: &B, out: &mut B::Vector, x: &B::Vector) -> Result<()> {
        // out = A x + C x
        self.a.forward(backend, out, x)?;
        self.c.forward(backend, &mut self.rows[0], x)?;
        backend.axpy(out, 1.0, &self.rows[0])
    }
    fn adjoint(&mut self, backend: &B, out: &mut B::Vector, y: &B::Vector) -> Result<()> {
        // out = A^H y + C^H y
        self.a.adjoint(backend, out, y)?;
        self.c.adjoint(backend, &mut self.cols, y)?;
        backend.axpy(out, 1.0, &self.cols)
    }
    fn normal(&mut self, backend: &B, out: &mut B::Vector, x: &B::Vector) -> Result<()> {
        // y = (A + C) x, out = (A + C)^H y
        let [y, cy] = &mut self.rows;
        self.a.forward(backend, y, x)?;
        self.c.forward(backend, cy, x)?;
        backend.axpy(y, 1.0, cy)?;
        self.a.adjoint(backend, out, y)?;
        self.c.adjoint(backend, &mut self.cols, y)?;
        backend.axpy(out, 1.0, &self.cols)
    }
}

/// The vertical stack `[A_1; A_2; ...]` of operators with equal inputs: its
/// outputs are the blocks' outputs one after another, its adjoint the sum
/// of the blocks' adjoints, and its normal map the sum of their normal maps
/// (SENSE's sum over coils).
pub struct Stack<'a, B: Backend> {
    blocks: Vec<Box<dyn LinearOp<B> + 'a>>,
    cols: usize,
    /// Per block a vector of its output length, made with the first
    /// forward or adjoint map (a solver's data term uses none).
    outs: Option<Vec<B::Vector>>,
    /// Two vectors of the input length, lent to the blocks' normal maps.
    scratch: [B::Vector; 2],
}

impl<'a, B: Backend> Stack<'a, B> {
    /// The blocks may borrow (a plan, say) for `'a`.
    pub fn new(backend: &B, blocks: Vec<Box<dyn LinearOp<B> + 'a>>) -> Result<Self> {
        let Some(first) = blocks.first() else {
            return Err(Error::Invalid {
                what: "stacked operators",
                reason: "a stack needs at least one block".into(),
            });
        };
        let cols = first.shape()[1];
        for (i, b) in blocks.iter().enumerate() {
            if b.shape()[1] != cols {
                return Err(Error::Invalid {
                    what: "stacked operators",
                    reason: format!(
                        "block {i} takes {} inputs, block 0 takes {cols}",
                        b.shape()[1]
                    ),
                });
            }
        }
        Ok(Stack {
            blocks,
            cols,
            outs: None,
            scratch: [backend.zeros(cols)?, backend.zeros(cols)?],
        })
    }

    /// Where each block's outputs start.
    fn offsets(&self) -> Vec<usize> {
        self.blocks
            .iter()
            .scan(0, |at, b| {
                let start = *at;
                *at += b.shape()[0];
                Some(start)
            })
            .collect()
    }

    /// `out (+)= sum_i A_i^H A_i x`: the first block's normal map (added
    /// with `accumulate`), then each other's added, in place where a block
    /// can (SENSE's coils), all in the stack's scratch.
    fn sum_normals(
        &mut self,
        backend: &B,
        out: &mut B::Vector,
        x: &B::Vector,
        accumulate: bool,
    ) -> Result<()> {
        check(backend, "stack", self.shape(), Map::Normal, out, x)?;
        let [a, c] = &mut self.scratch;
        for (i, b) in self.blocks.iter_mut().enumerate() {
            b.normal_into(backend, out, x, accumulate || i > 0, (&mut *a, &mut *c))?;
        }
        Ok(())
    }

    /// The blocks' output vectors, made on first use.
    fn outs(&mut self, backend: &B) -> Result<()> {
        if self.outs.is_none() {
            let outs = self
                .blocks
                .iter()
                .map(|b| backend.zeros(b.shape()[0]))
                .collect::<Result<_>>()?;
            self.outs = Some(outs);
        }
        Ok(())
    }
}

impl<B: Backend> LinearOp<B> for Stack<'_, B> {
    fn shape(&self) -> [usize; 2] {
        let rows = self.blocks.iter().map(|b| b.shape()[0]).sum();
        [rows, self.cols]
    }
    fn forward(&mut self, backend: &B, out: &mut B::Vector, x: &B::Vector) -> Result<()> {
        check(backend, "stack", self.shape(), Map::Forward, out, x)?;
        let at = self.offsets();
        self.outs(backend)?;
        let outs = self.outs.as_mut().expect("made");
        for ((b, o), at) in self.blocks.iter_mut().zip(outs).zip(at) {
            // out[block] = A_i x
            b.forward(backend, o, x)?;
            backend.copy_part(out, at, o, 0, b.shape()[0])?;
        }
        Ok(())
    }
    fn adjoint(&mut self, backend: &B, out: &mut B::Vector, y: &B::Vector) -> Result<()> {
        check(backend, "stack", self.shape(), Map::Adjoint, out, y)?;
        let at = self.offsets();
        self.outs(backend)?;
        let outs = self.outs.as_mut().expect("made");
        let [work, _] = &mut self.scratch;
        for (i, ((b, o), at)) in self.blocks.iter_mut().zip(outs).zip(at).enumerate() {
            // out = sum_i A_i^H y[block i]
            backend.copy_part(o, 0, y, at, b.shape()[0])?;
            let target = if i == 0 { &mut *out } else { &mut *work };
            b.adjoint(backend, target, o)?;
            if i > 0 {
                backend.axpy(out, 1.0, work)?;
            }
        }
        Ok(())
    }
    fn normal(&mut self, backend: &B, out: &mut B::Vector, x: &B::Vector) -> Result<()> {
        self.sum_normals(backend, out, x, false)
    }
    fn normal_into(
        &mut self,
        backend: &B,
        out: &mut B::Vector,
        x: &B::Vector,
        accumulate: bool,
        _scratch: (&mut B::Vector, &mut B::Vector),
    ) -> Result<()> {
        self.sum_normals(backend, out, x, accumulate)
    }
}

/// One operator used in several places (the one F of SENSE's coils, with
/// its one FFT(Q)): clones share it, and each map takes it in turn.
pub struct Shared<A> {
    op: std::sync::Arc<std::sync::Mutex<A>>,
}

impl<A> Clone for Shared<A> {
    fn clone(&self) -> Self {
        Shared {
            op: std::sync::Arc::clone(&self.op),
        }
    }
}

impl<A> Shared<A> {
    pub fn new(op: A) -> Self {
        Shared {
            op: std::sync::Arc::new(std::sync::Mutex::new(op)),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, A> {
        // A panic inside a map leaves the operator as usable as any
        // interrupted map does: its scratch is overwritten next time.
        self.op.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl<B: Backend, A: LinearOp<B>> LinearOp<B> for Shared<A> {
    fn shape(&self) -> [usize; 2] {
        self.lock().shape()
    }
    fn forward(&mut self, backend: &B, out: &mut B::Vector, x: &B::Vector) -> Result<()> {
        self.lock().forward(backend, out, x)
    }
    fn adjoint(&mut self, backend: &B, out: &mut B::Vector, y: &B::Vector) -> Result<()> {
        self.lock().adjoint(backend, out, y)
    }
    fn normal(&mut self, backend: &B, out: &mut B::Vector, x: &B::Vector) -> Result<()> {
        self.lock().normal(backend, out, x)
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
        self.lock()
            .normal_between(backend, out, accumulate, s, x, scratch)
    }
    fn normal_into(
        &mut self,
        backend: &B,
        out: &mut B::Vector,
        x: &B::Vector,
        accumulate: bool,
        scratch: (&mut B::Vector, &mut B::Vector),
    ) -> Result<()> {
        self.lock()
            .normal_into(backend, out, x, accumulate, scratch)
    }
}
