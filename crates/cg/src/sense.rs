//! SENSE's data term, `sum_c S_c^H F^H F S_c`, with its coils shared among
//! the backend's shards (the GPUs of one host).
//!
//! Q does not depend on the coil, so each shard holds a copy of the one
//! FFT(Q) and the maps of a contiguous range of coils. An application sends
//! x to every shard, each sums its coils on its own device, and the sums
//! come back to the first, where CG keeps its vectors: two image-sized
//! copies per extra shard and iteration, against a few coils' Toeplitz
//! products each. The host issues everything without waiting, so the shards
//! run side by side.

use crate::{DataTerm, Normal, Toeplitz};
use recon_core::{Backend, Complex, Error, Progress, Real, Result};
use std::ops::Range;

/// Voxels from which the coils are shared among several devices by
/// default. Below, a coil's Toeplitz product is too short for the copies
/// and launches that sharing adds (`recon bench-sense --gpus`, docs/benchmarks.md).
pub const SHARE_FROM_VOXELS: usize = 64 * 64 * 64;

/// The data term of SENSE, `sum_c S_c^H F^H F S_c`, around one Toeplitz
/// product: Q does not depend on the coil, so C coils cost C image-domain
/// products with their maps and C Toeplitz products with the one FFT(Q).
/// Without maps it is F^H F itself (one coil of sensitivity 1).
pub struct Sense<B: Backend> {
    /// One per device; the first on the solver's own backend.
    parts: Vec<Part<B>>,
    /// Coils (1 without maps).
    coils: usize,
    /// The largest `sum_c |S_c|^2` over the voxels (1 without maps).
    peak: f64,
    /// On the solver's device: another part's sum, brought over.
    inbox: Option<B::Vector>,
}

/// One device's share of the coils.
struct Part<B: Backend> {
    /// `None` for the first part, which runs on the backend the solver
    /// passes.
    shard: Option<Shard<B>>,
    coils: Range<usize>,
    term: Term<B>,
}

/// A part past the first: its device, x brought over, and its sum.
struct Shard<B: Backend> {
    backend: B,
    x: B::Vector,
    sum: B::Vector,
}

/// `sum_c conj(S_c) F^H F (S_c x)` over one part's coils, on its device.
struct Term<B: Backend> {
    toeplitz: Toeplitz<B>,
    maps: Vec<B::Vector>,
    /// Work: `S_c x` and `F^H F S_c x` (with maps only).
    work: Option<(B::Vector, B::Vector)>,
}

impl<B: Backend> Term<B> {
    /// `out (+)= conj(S_c) . F^H F (S_c . x)` for the part's `c`-th coil:
    /// `out =` for its first coil, `out +=` for the others.
    fn coil(&mut self, backend: &B, out: &mut B::Vector, x: &B::Vector, c: usize) -> Result<()> {
        let (y, ty) = self.work.as_mut().expect("work with maps");
        let s = &self.maps[c];
        self.toeplitz.apply_coil(backend, out, c > 0, s, x, (y, ty))
    }
}

impl<B: Backend> Sense<B> {
    /// `maps`: one per coil, a value per voxel (x fastest), or none. The
    /// coils are shared among the backend's shards where the grid has at
    /// least [`SHARE_FROM_VOXELS`] voxels.
    pub fn new(backend: &B, toeplitz: Toeplitz<B>, maps: &[Vec<Complex<B::Real>>]) -> Result<Self> {
        let parts = if toeplitz.len() >= SHARE_FROM_VOXELS {
            backend.shards().min(maps.len().max(1))
        } else {
            1
        };
        Self::split(backend, toeplitz, maps, parts)
    }

    /// As [`Sense::new`], with the coils shared among the first `parts`
    /// shards (at most the backend's shards; fewer where there are fewer
    /// coils), in contiguous ranges of near-equal size.
    pub fn split(
        backend: &B,
        toeplitz: Toeplitz<B>,
        maps: &[Vec<Complex<B::Real>>],
        parts: usize,
    ) -> Result<Self> {
        let n = toeplitz.len();
        for m in maps {
            Error::check_len("coil map (one value per voxel)", n, m.len())?;
        }
        if parts == 0 || parts > backend.shards() {
            return Err(Error::Invalid {
                what: "SENSE parts",
                reason: format!(
                    "{parts} asked, the backend has {} shard(s)",
                    backend.shards()
                ),
            });
        }
        let coils = maps.len().max(1);
        let peak = if maps.is_empty() {
            1.0
        } else {
            (0..n)
                .map(|i| maps.iter().map(|m| m[i].norm_sqr().f64()).sum::<f64>())
                .fold(0.0, f64::max)
        };
        if !(peak.is_finite() && peak > 0.0) {
            return Err(Error::Invalid {
                what: "coil maps",
                reason: format!("the largest sum of |S_c|^2 over the coils is {peak}"),
            });
        }
        let parts = parts.min(coils);
        let mut built: Vec<Part<B>> = Vec::with_capacity(parts);
        let mut toeplitz = Some(toeplitz);
        for i in 0..parts {
            let range = i * coils / parts..(i + 1) * coils / parts;
            // The first part runs on `backend` with the given product; the
            // others on their shards, with a copy of its FFT(Q).
            let (shard, toeplitz) = match built.first() {
                None => (None, toeplitz.take().expect("the given product")),
                Some(first) => {
                    let b = backend.shard(i)?;
                    let t = first.term.toeplitz.copied(&b, backend)?;
                    let shard = Shard {
                        x: b.zeros(n)?,
                        sum: b.zeros(n)?,
                        backend: b,
                    };
                    (Some(shard), t)
                }
            };
            let b = shard.as_ref().map_or(backend, |s| &s.backend);
            let part_maps = maps
                .get(range.clone())
                .unwrap_or(&[])
                .iter()
                .map(|m| b.upload(m))
                .collect::<Result<Vec<_>>>()?;
            let work = if maps.is_empty() {
                None
            } else {
                Some((b.zeros(n)?, b.zeros(n)?))
            };
            built.push(Part {
                shard,
                coils: range,
                term: Term {
                    toeplitz,
                    maps: part_maps,
                    work,
                },
            });
        }
        let inbox = if parts > 1 {
            Some(backend.zeros(n)?)
        } else {
            None
        };
        Ok(Sense {
            parts: built,
            coils,
            peak,
            inbox,
        })
    }

    /// Coils (1 without maps).
    pub fn coils(&self) -> usize {
        self.coils
    }

    /// Whether it has coil maps (SENSE), rather than being F^H F alone.
    pub fn has_maps(&self) -> bool {
        self.parts.iter().any(|p| !p.term.maps.is_empty())
    }

    /// The largest `sum_c |S_c|^2`: the operator's diagonal peaks at Q(0)
    /// times this.
    pub fn map_peak(&self) -> f64 {
        self.peak
    }

    /// Devices that share the coils.
    pub fn parts(&self) -> usize {
        self.parts.len()
    }

    /// Handles to the devices of the parts past the first (shards 1, 2,
    /// ...), for plans of their own as [`Sense::sum_parts`] needs.
    pub fn shards(&self, backend: &B) -> Result<Vec<B>> {
        (1..self.parts.len()).map(|i| backend.shard(i)).collect()
    }

    /// `out = sum_i s_i`, on the solver's device, where part i computes
    /// `term(i, its coils, its maps, s_i, tick)`: its share of a sum over the
    /// coils (for F^H D, `sum_c S_c^H F^H D_c` over its coils through a plan
    /// on its own device), calling `tick` after each coil. Each part runs on
    /// a host thread of its own, so that one device's host work (the data's
    /// uploads) does not hold up another's; `progress` counts the coils done.
    pub fn sum_parts<F>(
        &mut self,
        backend: &B,
        out: &mut B::Vector,
        term: F,
        progress: Progress<'_>,
    ) -> Result<()>
    where
        F: Fn(usize, Range<usize>, &[B::Vector], &mut B::Vector, &dyn Fn()) -> Result<()> + Sync,
    {
        Error::check_len(
            "SENSE sum (one value per voxel)",
            self.len(),
            backend.len(out),
        )?;
        let coils = self.coils as u64;
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        std::thread::scope(|s| {
            let term = &term;
            let mut first = Some(&mut *out);
            let handles: Vec<_> = (self.parts.iter_mut().enumerate())
                .map(|(i, p)| {
                    let tx = tx.clone();
                    // The first part sums into out, the others into their own.
                    let sum = match &mut p.shard {
                        Some(shard) => &mut shard.sum,
                        None => first.take().expect("one first part"),
                    };
                    let (range, maps) = (p.coils.clone(), &p.term.maps);
                    s.spawn(move || {
                        let tick = || {
                            let _ = tx.send(());
                        };
                        term(i, range, maps, sum, &tick)
                    })
                })
                .collect();
            drop(tx);
            let mut done = 0;
            for () in rx {
                done += 1;
                progress(done, coils);
            }
            handles
                .into_iter()
                .try_for_each(|h| h.join().expect("a SENSE part's thread panicked"))
        })?;
        self.gather(backend, out)
    }

    /// `out = out + s_i` for each part past the first, its sum brought over.
    fn gather(&mut self, backend: &B, out: &mut B::Vector) -> Result<()> {
        for p in &self.parts[1..] {
            let inbox = self.inbox.as_mut().expect("an inbox with several parts");
            let s = p.shard.as_ref().expect("a shard past the first part");
            backend.transfer(inbox, &s.backend, &s.sum)?;
            backend.axpy(out, 1.0, inbox)?;
        }
        Ok(())
    }
}

impl<B: Backend> DataTerm<B> for Sense<B> {
    fn map_peak(&self) -> f64 {
        self.peak
    }
    fn has_maps(&self) -> bool {
        Sense::has_maps(self)
    }
    fn devices(&self) -> usize {
        self.parts()
    }
}

impl<B: Backend> Normal<B> for Sense<B> {
    fn len(&self) -> usize {
        self.parts[0].term.toeplitz.len()
    }

    fn apply(&mut self, backend: &B, out: &mut B::Vector, x: &B::Vector) -> Result<()> {
        // Coils of the largest part.
        let most = self.parts.iter().map(|p| p.term.maps.len()).max();
        let (first, rest) = self.parts.split_first_mut().expect("a part at least");
        if first.term.maps.is_empty() {
            return first.term.toeplitz.apply(backend, out, x);
        }
        for p in rest.iter_mut() {
            let s = p.shard.as_mut().expect("a shard past the first part");
            s.backend.transfer(&mut s.x, backend, x)?;
        }
        // out = sum_c conj(S_c) . F^H F (S_c . x), coil by coil with the
        // parts in turn: every device gets work at the host's pace from the
        // start, instead of the last waiting while the host issues the
        // others' coils.
        for c in 0..most.unwrap_or(0) {
            for p in rest.iter_mut() {
                if c < p.term.maps.len() {
                    let s = p.shard.as_mut().expect("a shard past the first part");
                    p.term.coil(&s.backend, &mut s.sum, &s.x, c)?;
                }
            }
            if c < first.term.maps.len() {
                first.term.coil(backend, out, x, c)?;
            }
        }
        self.gather(backend, out)
    }
}
