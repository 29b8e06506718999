//! The orthonormal 3-D wavelet transform of the wavelet prior, and the
//! prior's norm: the l1 norm of the detail coefficients, averaged over a
//! few shifted transforms (BART's `pics -R W` shifts at random instead:
//! see [`shifted_wavelets`] for why recon does not).
//!
//! The transform is the periodic Daubechies-2 (4-tap) one, separable over
//! the axes: level after level, each axis of the current corner (the
//! scaling coefficients of the level before) is split into its scaling and
//! wavelet halves ([`Backend::dwt`]). An axis halves while it stays even
//! and at least [`MIN_COARSE`] long; so a 64^3 grid has three levels and an
//! 8^3 corner of coarsest scaling coefficients, and a 2-D grid (`n_z = 1`)
//! is transformed in plane. Being orthonormal, its adjoint is its inverse
//! and its normal map the identity.

use crate::{LinearOp, Norm};
use recon_core::{Backend, Complex, Error, Real, Result};

/// The shortest the coarsest scaling band may be along an axis.
pub const MIN_COARSE: usize = 8;

/// The forward transform's passes on the grid `n`, in order: the corner
/// split and its axis.
fn passes(n: [usize; 3]) -> Vec<([usize; 3], usize)> {
    let mut passes = Vec::new();
    let mut e = n;
    loop {
        let axes: Vec<usize> = (0..3)
            .filter(|&a| e[a].is_multiple_of(2) && e[a] / 2 >= MIN_COARSE)
            .collect();
        if axes.is_empty() {
            return passes;
        }
        passes.extend(axes.iter().map(|&a| (e, a)));
        axes.iter().for_each(|&a| e[a] /= 2);
    }
}

/// Why the grid `n` has no wavelet transform.
fn too_small(n: [usize; 3]) -> String {
    format!(
        "the grid {n:?} has no axis that halves into bands of {MIN_COARSE} or more: it needs \
         an even axis of at least {}",
        2 * MIN_COARSE
    )
}

/// Fails, saying why, where the grid `n` has no wavelet transform (no
/// axis even and at least `2 MIN_COARSE` long).
pub fn check_wavelet_grid(n: [usize; 3]) -> std::result::Result<(), String> {
    if passes(n).is_empty() {
        Err(too_small(n))
    } else {
        Ok(())
    }
}

/// `W`, circularly shifted first: `W_s x = W (x shifted by s)`.
pub struct Wavelet<B: Backend> {
    n: [usize; 3],
    /// The forward map's passes in order: the corner and the axis split.
    passes: Vec<([usize; 3], usize)>,
    corner: [usize; 3],
    shift: [usize; 3],
    work: B::Vector,
}

impl<B: Backend> Wavelet<B> {
    /// The transform on the grid `n`, unshifted. Fails where no axis can
    /// halve even once (every axis shorter than `2 MIN_COARSE` or odd).
    pub fn new(backend: &B, n: [usize; 3]) -> Result<Self> {
        let len: usize = n.iter().product();
        let passes = passes(n);
        if passes.is_empty() {
            return Err(Error::Invalid {
                what: "wavelet prior",
                reason: too_small(n),
            });
        }
        let mut e = n;
        passes.iter().for_each(|&(_, a)| e[a] /= 2);
        Ok(Wavelet {
            n,
            passes,
            corner: e,
            shift: [0; 3],
            work: backend.zeros(len)?,
        })
    }

    /// The corner of the coarsest scaling coefficients.
    pub fn corner(&self) -> [usize; 3] {
        self.corner
    }

    /// The shifts that give distinct transforms: `n_a / corner_a` per axis
    /// (a shift by a multiple of it only moves the coefficients).
    pub fn shift_period(&self) -> [usize; 3] {
        std::array::from_fn(|a| self.n[a] / self.corner[a])
    }

    /// Shifts the image by `s` before the transform (and back after the
    /// inverse).
    pub fn set_shift(&mut self, s: [usize; 3]) {
        self.shift = std::array::from_fn(|a| s[a] % self.n[a]);
    }

    fn check(&self, backend: &B, out: &B::Vector, x: &B::Vector) -> Result<()> {
        let len = self.n.iter().product();
        Error::check_len("wavelet input", len, backend.len(x))?;
        Error::check_len("wavelet output", len, backend.len(out))
    }
}

impl<B: Backend> LinearOp<B> for Wavelet<B> {
    fn shape(&self) -> [usize; 2] {
        let len = self.n.iter().product();
        [len, len]
    }

    fn forward(&mut self, backend: &B, out: &mut B::Vector, x: &B::Vector) -> Result<()> {
        self.check(backend, out, x)?;
        // shift into the buffer from which the passes, alternating, end in out
        let (mut cur, mut next) = if self.passes.len().is_multiple_of(2) {
            (out, &mut self.work)
        } else {
            (&mut self.work, out)
        };
        backend.roll(cur, x, self.n, self.shift)?;
        for &(e, axis) in &self.passes {
            backend.dwt(next, cur, self.n, e, axis, false)?;
            std::mem::swap(&mut cur, &mut next);
        }
        Ok(())
    }

    fn adjoint(&mut self, backend: &B, out: &mut B::Vector, y: &B::Vector) -> Result<()> {
        self.check(backend, out, y)?;
        // the passes in reverse, inverted, ending in work; then shift back
        let (mut cur, mut next) = if self.passes.len() % 2 == 1 {
            (&mut self.work, out)
        } else {
            (out, &mut self.work)
        };
        let mut passes = self.passes.iter().rev();
        let &(e, axis) = passes.next().expect("at least one pass (new)");
        backend.dwt(cur, y, self.n, e, axis, true)?;
        for &(e, axis) in passes {
            backend.dwt(next, cur, self.n, e, axis, true)?;
            std::mem::swap(&mut cur, &mut next);
        }
        let back = std::array::from_fn(|a| (self.n[a] - self.shift[a]) % self.n[a]);
        backend.roll(next, cur, self.n, back)
    }

    /// `W^H W = I`.
    fn normal(&mut self, backend: &B, out: &mut B::Vector, x: &B::Vector) -> Result<()> {
        self.check(backend, out, x)?;
        backend.copy(out, x)
    }
}

/// The l1 norm of wavelet coefficients outside each image's coarse
/// corner (the coarsest scaling coefficients, left free), over a vector of
/// one or more coefficient images of the grid `n` (a stack of shifted
/// transforms, [`shifted_wavelets`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WaveletL1 {
    pub n: [usize; 3],
    pub corner: [usize; 3],
}

impl<B: Backend> Norm<B> for WaveletL1 {
    /// Soft thresholding of each coefficient outside the corners.
    fn prox(&mut self, backend: &B, x: &mut B::Vector, t: f64) -> Result<()> {
        backend.shrink_outside(x, self.n, self.corner, t)
    }

    /// The projection onto the dual ball: each coefficient outside the
    /// corners clamped to `t`, the corners (free) to 0; by Moreau's
    /// identity, `y - shrink(y, t)`, the shrinkage on a copy.
    fn prox_conjugate(&mut self, backend: &B, y: &mut B::Vector, t: f64) -> Result<()> {
        let mut s = backend.zeros(backend.len(y))?;
        backend.copy(&mut s, y)?;
        backend.shrink_outside(&mut s, self.n, self.corner, t)?;
        backend.axpy(y, -1.0, &s)
    }

    /// Computed on the host.
    fn value(&mut self, backend: &B, x: &B::Vector) -> Result<f64> {
        let mut host = vec![Complex::<B::Real>::default(); backend.len(x)];
        backend.download(&mut host, x)?;
        let len: usize = self.n.iter().product();
        Ok(host
            .iter()
            .enumerate()
            .filter(|(i, _)| {
                let c = recon_core::index3(self.n, i % len);
                (0..3).any(|a| c[a] >= self.corner[a])
            })
            .map(|(_, v)| v.norm().f64())
            .sum())
    }
}

/// The wavelet prior's operator and norm on the grid `n`: `K` the stack of
/// `shifts` transforms `W_s`, scaled by `1 / sqrt(shifts)` so that
/// `K^H K = I`, and the l1 norm of their detail coefficients. The shifts
/// are the first `shifts` of a fixed pseudo-random sequence over the
/// distinct ones (each axis's in `0..n_a / corner_a`), the first 0.
///
/// The penalty `lambda / sqrt(S) sum_s ||W_s x||_1` is the convex
/// prior that BART's random shifts between iterations approximate (cycle
/// spinning: its average over shifts); held fixed, it leaves ADMM and
/// PDHG a fixed point, where shifts drawn anew each iteration leave ADMM's
/// dual variable, the subgradient of one shift's norm, wrong for the next
/// (on configs/sodium-undersampled.toml 19.0 dB and a residual stuck at
/// 0.9, against 23.1 dB unshifted).
pub fn shifted_wavelets<'a, B: Backend + 'a>(
    backend: &B,
    n: [usize; 3],
    shifts: usize,
) -> Result<(crate::Scaled<crate::Stack<'a, B>>, WaveletL1)> {
    if shifts == 0 {
        return Err(Error::Invalid {
            what: "wavelet shifts",
            reason: "the prior needs at least one transform".into(),
        });
    }
    let first = Wavelet::new(backend, n)?;
    let (corner, period) = (first.corner(), first.shift_period());
    let mut state: u64 = 0x3a7e_1e75;
    let mut blocks: Vec<Box<dyn LinearOp<B> + 'a>> = vec![Box::new(first)];
    for _ in 1..shifts {
        let mut w = Wavelet::new(backend, n)?;
        w.set_shift(std::array::from_fn(|a| {
            // splitmix64
            state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            ((z ^ (z >> 31)) % period[a] as u64) as usize
        }));
        blocks.push(Box::new(w));
    }
    let k = crate::Scaled::new(
        1.0 / (shifts as f64).sqrt(),
        crate::Stack::new(backend, blocks)?,
    )?;
    Ok((k, WaveletL1 { n, corner }))
}
