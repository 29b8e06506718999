//! A stack split over the shards of a backend (the GPUs of one host), as
//! one operator: `[A_0; A_1; ...]` with part `p`'s rows computed on shard
//! `p`. Its forward map gathers the parts' rows, its adjoint and normal map
//! the sum of the parts' own. SENSE's coils split this way, the parts'
//! normal maps (a few coils' Toeplitz products each) running side by side;
//! later, slices or contrasts.
//!
//! Each part past the first runs its maps on a host thread of its own, so
//! that one device's host work does not hold up another's; the first part
//! runs on the caller's backend and thread. Vectors cross between devices
//! by [`Backend::transfer`]: an input copy per extra part and map, and the
//! part's result back.

use crate::{check, LinearOp, Map};
use recon_core::{Backend, Error, Result};

/// The stack `[A_0; A_1; ...]` of parts on different shards.
pub struct Sharded<'a, B: Backend> {
    /// Part 0, on the caller's backend.
    first: Box<dyn LinearOp<B> + 'a>,
    /// On the caller's device: part 0's rows, for the stack's vectors.
    first_rows: B::Vector,
    others: Vec<Part<'a, B>>,
    cols: usize,
    /// On the caller's device: a part's sum brought over.
    inbox: B::Vector,
}

/// A part past the first: its shard, its operator, and its vectors there.
struct Part<'a, B: Backend> {
    backend: B,
    op: Box<dyn LinearOp<B> + 'a>,
    /// The input, brought over.
    x: B::Vector,
    /// Its rows of an output or an input.
    rows: B::Vector,
    /// Its adjoint or normal map's result.
    sum: B::Vector,
    /// On the caller's device: its rows, brought over or to be sent.
    inbox_rows: B::Vector,
}

impl<'a, B: Backend> Sharded<'a, B> {
    /// `parts` parts on the first `parts` shards of `backend`, part `p`'s
    /// operator made by `build(shard p, p)` (shard 0 is `backend` itself).
    /// The parts must take inputs of one length.
    pub fn new(
        backend: &B,
        parts: usize,
        mut build: impl FnMut(&B, usize) -> Result<Box<dyn LinearOp<B> + 'a>>,
    ) -> Result<Self> {
        if parts == 0 || parts > backend.shards() {
            return Err(Error::Invalid {
                what: "sharded operator",
                reason: format!(
                    "{parts} parts asked, the backend has {} shard(s)",
                    backend.shards()
                ),
            });
        }
        let first = build(backend, 0)?;
        let [rows, cols] = first.shape();
        let mut others = Vec::with_capacity(parts - 1);
        for p in 1..parts {
            let b = backend.shard(p)?;
            let op = build(&b, p)?;
            let [r, c] = op.shape();
            if c != cols {
                return Err(Error::Invalid {
                    what: "sharded operator",
                    reason: format!("part {p} takes {c} inputs, part 0 takes {cols}"),
                });
            }
            others.push(Part {
                x: b.zeros(cols)?,
                rows: b.zeros(r)?,
                sum: b.zeros(cols)?,
                inbox_rows: backend.zeros(r)?,
                op,
                backend: b,
            });
        }
        Ok(Sharded {
            first,
            first_rows: backend.zeros(rows)?,
            others,
            cols,
            inbox: backend.zeros(cols)?,
        })
    }

    /// Parts (devices) the stack is split over.
    pub fn parts(&self) -> usize {
        1 + self.others.len()
    }

    /// `out += s_p` for each part past the first, its sum brought over.
    fn gather(&mut self, backend: &B, out: &mut B::Vector) -> Result<()> {
        for p in &self.others {
            backend.transfer(&mut self.inbox, &p.backend, &p.sum)?;
            backend.axpy(out, 1.0, &self.inbox)?;
        }
        Ok(())
    }
}

/// Runs `f` on each part of `others`, each on a host thread of its own,
/// while `here` runs part 0 (`head`) on this thread.
fn side_by_side<'a, B: Backend>(
    head: &mut Box<dyn LinearOp<B> + 'a>,
    others: &mut [Part<'a, B>],
    here: impl FnOnce(&mut Box<dyn LinearOp<B> + 'a>) -> Result<()>,
    f: impl Fn(&mut Part<'a, B>) -> Result<()> + Sync,
) -> Result<()> {
    if others.is_empty() {
        return here(head);
    }
    std::thread::scope(|s| {
        let f = &f;
        let handles: Vec<_> = others.iter_mut().map(|p| s.spawn(move || f(p))).collect();
        let mine = here(head);
        let theirs = handles.into_iter().try_for_each(|h| {
            h.join()
                .unwrap_or_else(|_| panic!("a sharded operator's part panicked"))
        });
        mine.and(theirs)
    })
}

impl<B: Backend> LinearOp<B> for Sharded<'_, B> {
    fn shape(&self) -> [usize; 2] {
        let rows =
            self.first.shape()[0] + self.others.iter().map(|p| p.op.shape()[0]).sum::<usize>();
        [rows, self.cols]
    }

    fn forward(&mut self, backend: &B, out: &mut B::Vector, x: &B::Vector) -> Result<()> {
        check(
            backend,
            "sharded operator",
            self.shape(),
            Map::Forward,
            out,
            x,
        )?;
        // out = [A_0 x; A_1 x; ...], each part's rows on its shard
        for p in &mut self.others {
            p.backend.transfer(&mut p.x, backend, x)?;
        }
        let first_rows = &mut self.first_rows;
        side_by_side(
            &mut self.first,
            &mut self.others,
            |a| a.forward(backend, first_rows, x),
            |p| p.op.forward(&p.backend, &mut p.rows, &p.x),
        )?;
        let mut at = backend.len(&self.first_rows);
        backend.copy_part(out, 0, &self.first_rows, 0, at)?;
        for p in &mut self.others {
            let r = backend.len(&p.inbox_rows);
            backend.transfer(&mut p.inbox_rows, &p.backend, &p.rows)?;
            backend.copy_part(out, at, &p.inbox_rows, 0, r)?;
            at += r;
        }
        Ok(())
    }

    fn adjoint(&mut self, backend: &B, out: &mut B::Vector, y: &B::Vector) -> Result<()> {
        check(
            backend,
            "sharded operator",
            self.shape(),
            Map::Adjoint,
            out,
            y,
        )?;
        // out = sum_p A_p^H y_p, y_p part p's rows of y sent to its shard
        let mut at = backend.len(&self.first_rows);
        backend.copy_part(&mut self.first_rows, 0, y, 0, at)?;
        for p in &mut self.others {
            let r = backend.len(&p.inbox_rows);
            backend.copy_part(&mut p.inbox_rows, 0, y, at, r)?;
            p.backend.transfer(&mut p.rows, backend, &p.inbox_rows)?;
            at += r;
        }
        let first_rows = &self.first_rows;
        let o = &mut *out;
        side_by_side(
            &mut self.first,
            &mut self.others,
            |a| a.adjoint(backend, o, first_rows),
            |p| p.op.adjoint(&p.backend, &mut p.sum, &p.rows),
        )?;
        self.gather(backend, out)
    }

    fn normal(&mut self, backend: &B, out: &mut B::Vector, x: &B::Vector) -> Result<()> {
        check(
            backend,
            "sharded operator",
            self.shape(),
            Map::Normal,
            out,
            x,
        )?;
        // out = sum_p A_p^H A_p x
        for p in &mut self.others {
            p.backend.transfer(&mut p.x, backend, x)?;
        }
        let o = &mut *out;
        side_by_side(
            &mut self.first,
            &mut self.others,
            |a| a.normal(backend, o, x),
            |p| p.op.normal(&p.backend, &mut p.sum, &p.x),
        )?;
        self.gather(backend, out)
    }
}
