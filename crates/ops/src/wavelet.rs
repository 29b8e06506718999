//! The orthonormal 3-D wavelet transform of the wavelet prior, and the
//! prior's norm: the l1 norm of the detail coefficients, with random shifts
//! between proximal maps as BART's `pics -R W` makes them.
//!
//! The transform is the periodic Daubechies-2 (4-tap) one, separable over
//! the axes: level after level, each axis of the current corner (the
//! scaling coefficients of the level before) is split into its scaling and
//! wavelet halves ([`Backend::dwt`]). An axis halves while it stays even
//! and at least [`MIN_COARSE`] long; so a 64^3 grid has three levels and an
//! 8^3 corner of coarsest scaling coefficients, and a 2-D grid (`n_z = 1`)
//! is transformed in plane. Being orthonormal, its adjoint is its inverse
//! and its normal map the identity; and the proximal map of `t ||W x||_1`
//! is exact, `W^H shrink(W x, t)`.

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
            .filter(|&a| e[a] % 2 == 0 && e[a] / 2 >= MIN_COARSE)
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
        let (mut cur, mut next) = if self.passes.len() % 2 == 0 {
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

/// `||W x||_1` over the wavelet (detail) coefficients, the coarsest
/// scaling ones left free, for images of the grid `n`. Its proximal maps
/// draw a new shift of the transform each call when `shifts` is set
/// (fixed pseudo-random sequence), so that over iterations the blocks of
/// any one shift average out.
pub struct WaveletNorm<B: Backend> {
    wavelet: Wavelet<B>,
    coef: B::Vector,
    keep: B::Vector,
    shifts: bool,
    state: u64,
}

impl<B: Backend> WaveletNorm<B> {
    pub fn new(backend: &B, n: [usize; 3], shifts: bool) -> Result<Self> {
        let wavelet = Wavelet::new(backend, n)?;
        let len = wavelet.shape()[0];
        Ok(WaveletNorm {
            wavelet,
            coef: backend.zeros(len)?,
            keep: backend.zeros(len)?,
            shifts,
            state: 0x3a7e_1e75,
        })
    }

    /// The next shift, each axis's uniform over its period (splitmix64).
    fn next_shift(&mut self) -> [usize; 3] {
        let period = self.wavelet.shift_period();
        std::array::from_fn(|a| {
            self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = self.state;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            ((z ^ (z >> 31)) % period[a] as u64) as usize
        })
    }
}

/// `x = W^H shrink(W x, t)` with `W`'s shift as set.
fn shrink<B: Backend>(
    backend: &B,
    w: &mut Wavelet<B>,
    coef: &mut B::Vector,
    x: &mut B::Vector,
    t: f64,
) -> Result<()> {
    w.forward(backend, coef, x)?;
    backend.shrink_outside(coef, w.n, w.corner, t)?;
    w.adjoint(backend, x, coef)
}

impl<B: Backend> Norm<B> for WaveletNorm<B> {
    /// `x = W_s^H shrink(W_s x, t)`, `s` the next shift (or 0).
    fn prox(&mut self, backend: &B, x: &mut B::Vector, t: f64) -> Result<()> {
        let s = if self.shifts {
            self.next_shift()
        } else {
            [0; 3]
        };
        self.wavelet.set_shift(s);
        shrink(backend, &mut self.wavelet, &mut self.coef, x, t)
    }

    /// By Moreau's identity, `y - prox_{t ||.||}(y)`.
    fn prox_conjugate(&mut self, backend: &B, y: &mut B::Vector, t: f64) -> Result<()> {
        let s = if self.shifts {
            self.next_shift()
        } else {
            [0; 3]
        };
        self.wavelet.set_shift(s);
        backend.copy(&mut self.keep, y)?;
        shrink(
            backend,
            &mut self.wavelet,
            &mut self.coef,
            &mut self.keep,
            t,
        )?;
        backend.axpy(y, -1.0, &self.keep)
    }

    /// Unshifted, computed on the host.
    fn value(&mut self, backend: &B, x: &B::Vector) -> Result<f64> {
        self.wavelet.set_shift([0; 3]);
        self.wavelet.forward(backend, &mut self.coef, x)?;
        let mut host = vec![Complex::<B::Real>::default(); backend.len(&self.coef)];
        backend.download(&mut host, &self.coef)?;
        let (n, corner) = (self.wavelet.n, self.wavelet.corner);
        Ok(host
            .iter()
            .enumerate()
            .filter(|(i, _)| {
                let c = recon_core::index3(n, *i);
                (0..3).any(|a| c[a] >= corner[a])
            })
            .map(|(_, v)| v.norm().f64())
            .sum())
    }
}
