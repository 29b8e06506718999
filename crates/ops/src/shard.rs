//! A stack split over the shards of a backend (the GPUs of one host), as
//! one operator: `[A_0; A_1; ...]` with part `p`'s rows computed on shard
//! `p`. Its forward map gathers the parts' rows, its adjoint and normal map
//! the sum of the parts' own. SENSE's coils split this way, the parts'
//! normal maps (a few coils' Toeplitz products each) running side by side;
//! later, slices or contrasts. Q's exact sums split the same way, as a
//! stack of slabs of the lattice ([`sum_exp_on_shards`]).
//!
//! Each part past the first runs its maps on a host thread of its own, so
//! that one device's host work does not hold up another's; the first part
//! runs on the caller's backend and thread. Vectors cross between devices
//! by [`Backend::transfer`]: an input copy per extra part and map, and the
//! part's result back.

use crate::{check, LinearOp, Map};
use recon_core::{Backend, Complex, Error, Progress, Result, Sign, Targets};

/// The stack `[A_0; A_1; ...]` of parts on different shards.
pub struct Sharded<'a, B: Backend> {
    /// Part 0, on the caller's backend.
    first: Box<dyn LinearOp<B> + 'a>,
    /// On the caller's device: part 0's rows, for the stack's vectors (made
    /// with the first forward or adjoint map).
    first_rows: Option<B::Vector>,
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
    /// Its rows of an output or an input, and on the caller's device the
    /// same rows brought over or to be sent: made with the first forward or
    /// adjoint map (a solver's data term uses neither).
    rows: Option<(B::Vector, B::Vector)>,
    /// Its adjoint or normal map's result.
    sum: B::Vector,
}

impl<B: Backend> Part<'_, B> {
    /// Its rows here and their inbox on `backend` (the caller's), made on
    /// first use.
    fn rows(&mut self, backend: &B) -> Result<(&mut B::Vector, &mut B::Vector)> {
        if self.rows.is_none() {
            let r = self.op.shape()[0];
            self.rows = Some((self.backend.zeros(r)?, backend.zeros(r)?));
        }
        let (here, inbox) = self.rows.as_mut().expect("just made");
        Ok((here, inbox))
    }
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
        let cols = first.shape()[1];
        let mut others = Vec::with_capacity(parts - 1);
        for p in 1..parts {
            let b = backend.shard(p)?;
            let op = build(&b, p)?;
            let c = op.shape()[1];
            if c != cols {
                return Err(Error::Invalid {
                    what: "sharded operator",
                    reason: format!("part {p} takes {c} inputs, part 0 takes {cols}"),
                });
            }
            others.push(Part {
                x: b.zeros(cols)?,
                rows: None,
                sum: b.zeros(cols)?,
                op,
                backend: b,
            });
        }
        Ok(Sharded {
            first,
            first_rows: None,
            others,
            cols,
            inbox: backend.zeros(cols)?,
        })
    }

    /// Parts (devices) the stack is split over.
    pub fn parts(&self) -> usize {
        1 + self.others.len()
    }

    /// `out = sum_p s_p`, where part `p` computes its share `s_p` of a sum
    /// on its own device by `term(p, its backend, s_p, tick)` (SENSE's F^H
    /// D: its coils' terms). Every part runs on a host thread of its own,
    /// so that one device's host work (uploads) does not hold up another's;
    /// `tick(n)` counts `n` units of work done, and `progress(done, total)`
    /// gets the count.
    pub fn sum_parts(
        &mut self,
        backend: &B,
        out: &mut B::Vector,
        total: u64,
        term: impl Fn(usize, &B, &mut B::Vector, &dyn Fn(u64)) -> Result<()> + Sync,
        progress: Progress<'_>,
    ) -> Result<()> {
        Error::check_len(
            "sharded sum (one value per input)",
            self.cols,
            backend.len(out),
        )?;
        let parts = std::iter::once((backend, &mut *out))
            .chain(self.others.iter_mut().map(|p| (&p.backend, &mut p.sum)));
        on_threads(
            parts.collect(),
            total,
            |p, (b, s), tick| term(p, b, s, tick),
            progress,
        )?;
        self.gather(backend, out)
    }

    /// The vectors of the parts' rows, made on first use.
    fn rows(&mut self, backend: &B) -> Result<()> {
        if self.first_rows.is_none() {
            self.first_rows = Some(backend.zeros(self.first.shape()[0])?);
        }
        for p in &mut self.others {
            p.rows(backend)?;
        }
        Ok(())
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

/// Runs `work(p, task p, tick)` for each task, every one on a host thread
/// of its own, while this thread reports progress: `tick(n)` counts `n`
/// units of work done, and `progress(done, total)` gets the running count.
/// The first error is returned once every task has ended.
fn on_threads<T: Send>(
    tasks: Vec<T>,
    total: u64,
    work: impl Fn(usize, T, &dyn Fn(u64)) -> Result<()> + Sync,
    progress: Progress<'_>,
) -> Result<()> {
    let (tx, rx) = std::sync::mpsc::channel::<u64>();
    std::thread::scope(|s| {
        let work = &work;
        let handles: Vec<_> = tasks
            .into_iter()
            .enumerate()
            .map(|(p, task)| {
                let tx = tx.clone();
                s.spawn(move || {
                    work(p, task, &|n| {
                        let _ = tx.send(n);
                    })
                })
            })
            .collect();
        drop(tx);
        let mut done = 0;
        for n in rx {
            done += n;
            progress(done, total);
        }
        handles.into_iter().try_for_each(|h| {
            h.join()
                .unwrap_or_else(|_| panic!("a sharded task panicked"))
        })
    })
}

/// [`Backend::sum_exp`] over every shard of `backend`: the targets a
/// vertical stack of slabs, slab `p` summed on shard `p`, side by side on
/// host threads as a [`Sharded`] stack's parts run (Q and the exact
/// engine's F^H D on the GPUs of a host). A lattice splits into whole
/// z-planes, so that every slab suits the row kernels. Each target is
/// computed from its own index by the same code on every shard, so the
/// result does not depend on the number of shards.
pub fn sum_exp_on_shards<B: Backend>(
    backend: &B,
    out: &mut [Complex<B::Real>],
    targets: Targets<'_>,
    sources: &[[f64; 3]],
    coef: &[Complex<B::Real>],
    sign: Sign,
    progress: Progress<'_>,
) -> Result<()> {
    Error::check_len("sum_exp output", targets.len(), out.len())?;
    let total = out.len();
    let shards = backend.shards();
    if shards == 1 {
        return backend.sum_exp(out, targets, 0, sources, coef, sign, progress);
    }
    // Near-equal slabs of whole units (planes of a lattice).
    let unit = match targets {
        Targets::Lattice(l) => (l.n[0] * l.n[1]).max(1),
        Targets::List(_) => 1,
    };
    let units = total.div_ceil(unit);
    let mut slabs = Vec::with_capacity(shards);
    let (mut rest, mut first) = (out, 0);
    for p in 0..shards {
        let end = (units * (p + 1) / shards * unit).min(total);
        let (slab, tail) = rest.split_at_mut(end - first);
        let b = if p == 0 {
            None
        } else {
            Some(backend.shard(p)?)
        };
        slabs.push((b, first, slab));
        (rest, first) = (tail, end);
    }
    on_threads(
        slabs,
        total as u64,
        |_, (b, first, slab), tick| {
            let mut reported = 0;
            let b = b.as_ref().unwrap_or(backend);
            b.sum_exp(slab, targets, first, sources, coef, sign, &mut |d, _| {
                tick(d - reported);
                reported = d;
            })
        },
        progress,
    )
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
        self.rows(backend)?;
        for p in &mut self.others {
            p.backend.transfer(&mut p.x, backend, x)?;
        }
        let first_rows = self.first_rows.as_mut().expect("made");
        side_by_side(
            &mut self.first,
            &mut self.others,
            |a| a.forward(backend, first_rows, x),
            |p| {
                let (rows, _) = p.rows.as_mut().expect("made");
                p.op.forward(&p.backend, rows, &p.x)
            },
        )?;
        let first_rows = self.first_rows.as_ref().expect("made");
        let mut at = backend.len(first_rows);
        backend.copy_part(out, 0, first_rows, 0, at)?;
        for p in &mut self.others {
            let (rows, inbox) = p.rows.as_mut().expect("made");
            let r = backend.len(inbox);
            backend.transfer(inbox, &p.backend, rows)?;
            backend.copy_part(out, at, inbox, 0, r)?;
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
        self.rows(backend)?;
        let first_rows = self.first_rows.as_mut().expect("made");
        let mut at = backend.len(first_rows);
        backend.copy_part(first_rows, 0, y, 0, at)?;
        for p in &mut self.others {
            let (rows, inbox) = p.rows.as_mut().expect("made");
            let r = backend.len(inbox);
            backend.copy_part(inbox, 0, y, at, r)?;
            p.backend.transfer(rows, backend, inbox)?;
            at += r;
        }
        let first_rows = self.first_rows.as_ref().expect("made");
        let o = &mut *out;
        side_by_side(
            &mut self.first,
            &mut self.others,
            |a| a.adjoint(backend, o, first_rows),
            |p| {
                let (rows, _) = p.rows.as_ref().expect("made");
                p.op.adjoint(&p.backend, &mut p.sum, rows)
            },
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
