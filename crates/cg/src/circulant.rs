//! A circulant preconditioner for the x-updates of ADMM,
//! `(A + rho K^H K) x = rhs`: A's Toeplitz product by T. Chan's optimal
//! circulant of its kernel Q on the N grid (Chan, SIAM J. Sci. Stat.
//! Comput. 1988), and K^H K by the periodic Laplacian, so that
//! `M^-1 r = IFFT(FFT(r) / (s lambda_T + rho lambda_L))` costs two N^3
//! FFTs, against the two (2N)^3 ones of the Toeplitz product.
//! `bench/precond-cpu-2026-11-23.md` measured it on CG's own problem;
//! here it serves ADMM, whose sub-problems are the ill-conditioned ones (a
//! small rho regularises little). With coil maps, A is modelled as `s T`,
//! `s` the largest `sum_c |S_c|^2`; for directional TV, K^H K by the plain
//! Laplacian (the directional weighting only lowers it); for the wavelet
//! prior, K^H K is the identity ([`Gram`]).

use rayon::prelude::*;
use recon_core::{Backend, Complex, CpuBackend, Direction, Error, Grid, Real, Result};

/// `M^-1`, applied as `out = M^-1 r`.
pub trait Preconditioner<B: Backend> {
    fn apply(&mut self, backend: &B, out: &mut B::Vector, r: &B::Vector) -> Result<()>;
}

/// The eigenvalues of T. Chan's circulant approximation, on the N grid, of
/// the Toeplitz product with kernel `q` (as recon-q computes it, lag 0 at
/// index N per axis), floored at 1e-6 of the largest: per axis the lag `k`
/// weighs `(N - k) / N` and the lag `k - N` weighs `k / N`.
pub fn toeplitz_eigenvalues<T: Real>(grid: &Grid, q: &[Complex<T>]) -> Result<Vec<f64>> {
    let n = grid.n;
    let (d, zero) = (grid.doubled(), grid.lag_zero());
    Error::check_len("Q (2N)^3", d[0] * d[1] * d[2], q.len())?;
    let mut c = vec![Complex::<f64>::default(); grid.len()];
    // c[k] = sum over the 8 wraps of the weighted lags
    let weight = |k: usize, m: usize, wrapped: bool| {
        if wrapped {
            k as f64 / m as f64
        } else {
            (m - k) as f64 / m as f64
        }
    };
    c.par_iter_mut().enumerate().for_each(|(i, out)| {
        let k = recon_core::index3(n, i);
        for s in 0..8 {
            let wrapped = [s & 1 != 0, s & 2 != 0, s & 4 != 0];
            // index of lag k (not wrapped) or k - N (wrapped) in Q; a flat
            // axis has lag 0 alone (its wrap weighs 0)
            let at = |a: usize| if wrapped[a] { k[a] } else { k[a] + zero[a] };
            let w: f64 = (0..3).map(|a| weight(k[a], n[a], wrapped[a])).product();
            if w != 0.0 {
                let v = q[(at(2) * d[1] + at(1)) * d[0] + at(0)];
                *out += Complex::new(v.re.f64(), v.im.f64()) * w;
            }
        }
    });
    let cpu = CpuBackend::<f64>::new();
    cpu.fft3(&cpu.fft_plan(n)?, &mut c, Direction::Forward)?;
    let peak = c.iter().map(|v| v.re).fold(0.0, f64::max);
    if !(peak.is_finite() && peak > 0.0) {
        return Err(Error::Invalid {
            what: "circulant preconditioner",
            reason: format!("Q's circulant has no positive eigenvalue (largest {peak})"),
        });
    }
    Ok(c.iter().map(|v| v.re.max(1e-6 * peak)).collect())
}

/// `sum_a 2 - 2 cos(2 pi k_a / N_a)`: the periodic Laplacian's eigenvalues.
fn laplacian_eigenvalues(n: [usize; 3]) -> Vec<f64> {
    (0..n.iter().product())
        .into_par_iter()
        .map(|i| {
            let k = recon_core::index3(n, i);
            (0..3)
                .map(|a| 2.0 - 2.0 * (2.0 * std::f64::consts::PI * k[a] as f64 / n[a] as f64).cos())
                .sum()
        })
        .collect()
}

/// Real values as complex ones of the backend's precision.
fn real<T: Real>(v: &[f64]) -> Vec<Complex<T>> {
    v.iter()
        .map(|&x| Complex::new(T::of(x), T::of(0.0)))
        .collect()
}

/// What the prior operator's normal map `K^H K` is, to the preconditioner.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gram {
    /// The periodic Laplacian (the gradient of total variation).
    Laplacian,
    /// The identity (an orthonormal transform, as the wavelets').
    Identity,
}

/// How far rho may move from the one M was made for before it is made
/// again (residual balancing doubles or halves it).
pub const REBUILD: f64 = 4.0;

/// `M = s T_circ + rho L_circ` on the device: its eigenvalues are kept
/// there, and its inverse made anew there when rho moves.
pub struct Circulant<B: Backend> {
    n: [usize; 3],
    /// The N^3 FFTs' plan, made once here.
    fft: B::Fft,
    /// `s lambda_T`, real, as complex values.
    data: B::Vector,
    /// `K^H K`'s eigenvalues as `gram` models it: the periodic Laplacian's,
    /// or ones; made again when the model changes (once per solve at most).
    prior: Option<B::Vector>,
    rho: f64,
    gram: Gram,
    /// `1 / (s lambda_T + rho lambda_L)`, as complex values.
    inverse: B::Vector,
}

impl<B: Backend> Circulant<B> {
    /// From the Toeplitz eigenvalues ([`toeplitz_eigenvalues`]) and the
    /// data term's coil factor `s`; call [`Circulant::set_rho`] before use.
    /// Makes the N^3 FFTs' plan now, so that the solve does not pay for it.
    pub fn new(backend: &B, n: [usize; 3], toeplitz: &[f64], s: f64) -> Result<Self> {
        Error::check_len("circulant eigenvalues", n.iter().product(), toeplitz.len())?;
        let scaled: Vec<f64> = toeplitz.iter().map(|v| s * v).collect();
        Ok(Circulant {
            n,
            fft: backend.fft_plan(n)?,
            data: backend.upload(&real(&scaled))?,
            prior: Some(backend.upload(&real(&laplacian_eigenvalues(n)))?),
            rho: f64::NAN,
            gram: Gram::Laplacian,
            inverse: backend.zeros(toeplitz.len())?,
        })
    }

    /// Makes M's inverse for `rho` and `K^H K` modelled by `gram`, unless
    /// the one it holds was made for the same `gram` and a rho within a
    /// factor [`REBUILD`] of it (any M preconditions; a rebuild is one pass
    /// over the grid on the device).
    pub fn set_rho(&mut self, backend: &B, rho: f64, gram: Gram) -> Result<()> {
        let ratio = rho / self.rho;
        if gram == self.gram && (1.0 / REBUILD..=REBUILD).contains(&ratio) {
            return Ok(());
        }
        if gram != self.gram {
            let n = self.n;
            let eigenvalues = match gram {
                Gram::Laplacian => laplacian_eigenvalues(n),
                Gram::Identity => vec![1.0; n.iter().product()],
            };
            // The old eigenvalues go before the new ones come: one image.
            self.prior = None;
            self.prior = Some(backend.upload(&real(&eigenvalues))?);
        }
        let prior = self.prior.as_ref().expect("made with the circulant");
        backend.inverse_sum(&mut self.inverse, &self.data, rho, prior)?;
        (self.rho, self.gram) = (rho, gram);
        Ok(())
    }
}

impl<B: Backend> Preconditioner<B> for Circulant<B> {
    fn apply(&mut self, backend: &B, out: &mut B::Vector, r: &B::Vector) -> Result<()> {
        // out = IFFT(FFT(r) / eigenvalues)
        backend.copy(out, r)?;
        backend.fft3(&self.fft, out, Direction::Forward)?;
        backend.mul(out, &self.inverse)?;
        backend.fft3(&self.fft, out, Direction::Inverse)
    }
}
