//! The [`Problem`] of one run: FFT(Q), the data term and F^H D on the
//! device, made once and solved for any W and lambda by CG (quadratic
//! priors) or ADMM and PDHG (sparse ones).

use crate::{
    admm, pdhg, q_peak, solve, toeplitz_eigenvalues, Circulant, DataTerm, Info, Params,
    Regularised, Sparse, SparseAlgorithm, SparseParams, Toeplitz,
};
use recon_core::{Backend, Complex, Error, Grid, Real, Result, Stencil};

/// `(sum_c S_c^H F^H F S_c + lambda W^H W) x = b` for one run, with
/// `b = sum_c S_c^H F^H D_c` (F^H F and F^H D for one coil without maps):
/// FFT(Q), the maps and b on the device, made once and solved for any W
/// and lambda. The data term may borrow for `'d`.
pub struct Problem<'d, B: Backend + 'd> {
    grid: Grid,
    data: Box<dyn DataTerm<B> + 'd>,
    fhd: B::Vector,
    q_peak: f64,
    /// ADMM's preconditioner, where made ([`Problem::precondition`]).
    circulant: Option<Circulant<B>>,
    /// `max |F^H D|`, once known ([`Problem::sparse_lambda_abs`]).
    b_peak: std::sync::OnceLock<f64>,
    /// The right-hand side on the host, once brought there or given
    /// ([`Problem::rhs_host`]).
    host: std::sync::OnceLock<Vec<Complex<B::Real>>>,
}

impl<'d, B: Backend + 'd> Problem<'d, B> {
    /// One coil: takes Q (as recon-encoding computes it) and F^H D on the
    /// host; the data term is F^H F, the Toeplitz product. (SENSE's data
    /// term is recon-encoding's `SenseTerm`, given to [`Problem::on_device`].)
    pub fn new(
        backend: &B,
        grid: &Grid,
        q: &[Complex<B::Real>],
        fhd: &[Complex<B::Real>],
    ) -> Result<Self> {
        Error::check_len("F^H D (one value per voxel)", grid.len(), fhd.len())?;
        let data = Box::new(Toeplitz::new(backend, grid, q)?);
        let p = Self::on_device(backend, grid, q_peak(grid, q)?, data, backend.upload(fhd)?)?;
        // F^H D is at hand on the host: its peak costs no download later
        let _ = p.b_peak.set(peak_abs(fhd));
        Ok(p)
    }

    /// From parts already on the device: the data term, and the right-hand
    /// side `sum_c S_c^H F^H D_c`; `q_peak` is [`q_peak`] of its Q.
    pub fn on_device(
        backend: &B,
        grid: &Grid,
        q_peak: f64,
        data: Box<dyn DataTerm<B> + 'd>,
        fhd: B::Vector,
    ) -> Result<Self> {
        Error::check_len("F^H D (one value per voxel)", grid.len(), backend.len(&fhd))?;
        Error::check_len(
            "the data term (one value per voxel)",
            grid.len(),
            data.len(),
        )?;
        Ok(Problem {
            grid: *grid,
            q_peak,
            data,
            fhd,
            circulant: None,
            b_peak: std::sync::OnceLock::new(),
            host: std::sync::OnceLock::new(),
        })
    }

    /// Devices that share the data term's work.
    pub fn devices(&self) -> usize {
        self.data.devices()
    }

    /// The data term `sum_c S_c^H F^H F S_c` (a benchmark times it alone).
    pub fn data_term(&mut self) -> &mut (dyn DataTerm<B> + 'd) {
        &mut *self.data
    }

    /// The right-hand side on the device.
    pub fn rhs(&self) -> &B::Vector {
        &self.fhd
    }

    /// The right-hand side on the host: brought back once, when first
    /// asked for (the outputs' F^H D, a sparse prior's lambda), so that a
    /// right-hand side made on the device costs no download before the
    /// solve.
    pub fn rhs_host(&self, backend: &B) -> Result<&[Complex<B::Real>]> {
        if let Some(h) = self.host.get() {
            return Ok(h);
        }
        let host = backend.to_host(&self.fhd)?;
        Ok(self.host.get_or_init(|| host))
    }

    /// Another right-hand side `F^H D` for the same data term, given on the
    /// host (and kept there for [`Problem::rhs_host`]): the next slice of a
    /// stack, whose slices share one trajectory, Q and plan.
    pub fn set_rhs(&mut self, backend: &B, fhd: Vec<Complex<B::Real>>) -> Result<()> {
        Error::check_len("F^H D (one value per voxel)", self.grid.len(), fhd.len())?;
        self.fhd = backend.upload(&fhd)?;
        self.b_peak = std::sync::OnceLock::new();
        let _ = self.b_peak.set(peak_abs(&fhd));
        self.host = std::sync::OnceLock::from(fhd);
        Ok(())
    }

    pub fn grid(&self) -> &Grid {
        &self.grid
    }

    /// `lambda_rel` times the largest diagonal entry of the data term,
    /// `max|Q| max_x sum_c |S_c(x)|^2` (`max|Q|` for one coil, and for
    /// maps of unit norm): see [`lambda_abs`].
    pub fn lambda_abs(&self, lambda_rel: f64) -> f64 {
        lambda_rel * self.q_peak * self.data.map_peak()
    }

    /// Makes the circulant preconditioner of ADMM's x-updates from Q (as
    /// given to [`Problem::new`]); two N^3 FFTs of host work. Returns
    /// whether it did: with coil maps it does not, since their spatial
    /// weighting makes `s T` a poor model of `sum_c S_c^H T S_c` (on
    /// configs/sodium-8coils.toml, 20 ADMM iterations of TV reach 21.3 dB
    /// preconditioned and 32.8 dB without).
    pub fn precondition(&mut self, backend: &B, q: &[Complex<B::Real>]) -> Result<bool> {
        if self.data.has_maps() {
            self.circulant = None;
            return Ok(false);
        }
        let eig = toeplitz_eigenvalues(&self.grid, q)?;
        let s = self.data.map_peak();
        self.circulant = Some(Circulant::new(backend, self.grid.n, &eig, s)?);
        Ok(true)
    }

    /// A sparse prior's absolute lambda: `lambda_rel` times the largest
    /// `|b|`, so that it scales with the data and with the trajectory as
    /// the image's gradient does. (Where b was made on the device, it is
    /// read back for it once: a quadratic run never pays.)
    pub fn sparse_lambda_abs(&self, backend: &B, lambda_rel: f64) -> Result<f64> {
        let peak = match self.b_peak.get() {
            Some(&p) => p,
            None => {
                let p = peak_abs(self.rhs_host(backend)?);
                *self.b_peak.get_or_init(|| p)
            }
        };
        Ok(lambda_rel * peak)
    }

    /// ADMM or PDHG from 0 on `1/2 |F x - D|^2 + lambda ||K x||`, the prior
    /// on this grid with its absolute lambda (see
    /// [`Problem::sparse_lambda_abs`]). Returns x on the host, and what the
    /// solver did.
    pub fn solve_sparse(
        &mut self,
        backend: &B,
        prior: Sparse<'_, B>,
        algorithm: SparseAlgorithm,
        params: &SparseParams,
        on_iteration: &mut dyn FnMut(usize, f64),
    ) -> Result<(Vec<Complex<B::Real>>, Info)> {
        let mut x = backend.zeros(self.grid.len())?;
        let (a, b) = (&mut self.data, &self.fhd);
        let info = match algorithm {
            SparseAlgorithm::Admm => {
                let scale = self.q_peak * a.map_peak();
                let pre = self.circulant.as_mut();
                admm(
                    backend,
                    a,
                    prior,
                    &mut x,
                    b,
                    scale,
                    pre,
                    params,
                    on_iteration,
                )?
            }
            SparseAlgorithm::Pdhg => pdhg(backend, a, prior, &mut x, b, params, on_iteration)?,
        };
        Ok((backend.to_host(&x)?, info))
    }

    /// The data misfit of `x` less `||D||^2`: `x^H A x - 2 Re(x^H b)`,
    /// since `sum_c ||F S_c x - D_c||^2 = x^H A x - 2 Re(x^H b) + ||D||^2`
    /// with `A` the data term and `b` the right-hand side. One product by
    /// the data term; the caller, who holds D, adds `||D||^2`.
    pub fn misfit(&mut self, backend: &B, x: &[Complex<B::Real>]) -> Result<f64> {
        Error::check_len("x (one value per voxel)", self.grid.len(), x.len())?;
        let x = backend.upload(x)?;
        let mut ax = backend.zeros(self.grid.len())?;
        self.data.apply(backend, &mut ax, &x)?;
        // x^H A x is real for a Hermitian A: its real part is the whole.
        Ok(backend.dot_re(&x, &ax)? - 2.0 * backend.dot_re(&x, &self.fhd)?)
    }

    /// The data term applied to `x` on the host: `A x`.
    pub fn normal(&mut self, backend: &B, x: &[Complex<B::Real>]) -> Result<Vec<Complex<B::Real>>> {
        Error::check_len("x (one value per voxel)", self.grid.len(), x.len())?;
        let x = backend.upload(x)?;
        let mut ax = backend.zeros(self.grid.len())?;
        self.data.apply(backend, &mut ax, &x)?;
        let mut out = vec![Complex::default(); self.grid.len()];
        backend.download(&mut out, &ax)?;
        Ok(out)
    }

    /// CG from 0 with W's stencil and `lambda = lambda_rel * max|Q|`.
    /// Returns x on the host, and what CG did.
    pub fn solve(
        &mut self,
        backend: &B,
        weights: &Stencil,
        lambda_rel: f64,
        params: &Params,
        on_iteration: &mut dyn FnMut(usize, f64),
    ) -> Result<(Vec<Complex<B::Real>>, Info)> {
        self.solve_on(backend, weights, lambda_rel, None, params, on_iteration)
    }

    /// [`Problem::solve`] for another right-hand side `b` (on the host),
    /// the problem's own when `None`: GCV's trace probes solve
    /// `(A + lambda W^H W) v = A z`.
    pub fn solve_on(
        &mut self,
        backend: &B,
        weights: &Stencil,
        lambda_rel: f64,
        b: Option<&[Complex<B::Real>]>,
        params: &Params,
        on_iteration: &mut dyn FnMut(usize, f64),
    ) -> Result<(Vec<Complex<B::Real>>, Info)> {
        let other = match b {
            Some(b) => {
                Error::check_len("b (one value per voxel)", self.grid.len(), b.len())?;
                Some(backend.upload(b)?)
            }
            None => None,
        };
        let lambda = self.lambda_abs(lambda_rel);
        let mut a = Regularised::new(backend, &mut self.data, weights, lambda)?;
        let mut x = backend.zeros(self.grid.len())?;
        let rhs = other.as_ref().unwrap_or(&self.fhd);
        let info = solve(backend, &mut a, &mut x, rhs, params, on_iteration)?;
        Ok((backend.to_host(&x)?, info))
    }
}

/// `max |v|`, the largest `norm()` (hypot) exactly, on every core: the
/// squared magnitudes find the largest, and only the values within
/// rounding of it (`1e-9` relative, far above hypot's and the squares'
/// rounding) take a hypot. Every value's hypot on one core cost a 256^3
/// run 0.07 to 0.15 s (bench/h100-2026-11-27-peak).
fn peak_abs<T: Real>(v: &[Complex<T>]) -> f64 {
    use rayon::prelude::*;
    let norm = |c: &Complex<T>| c.norm().f64();
    let square = |c: &Complex<T>| c.re.f64() * c.re.f64() + c.im.f64() * c.im.f64();
    let top = v.par_iter().map(square).reduce(|| 0.0, f64::max);
    if !top.is_finite() {
        // Squares past f64's range: every norm.
        return v.par_iter().map(norm).reduce(|| 0.0, f64::max);
    }
    let floor = top * (1.0 - 1e-9);
    v.par_iter()
        .filter(|c| square(c) >= floor)
        .map(norm)
        .reduce(|| 0.0, f64::max)
}

#[cfg(test)]
mod tests {
    use super::peak_abs;
    use recon_core::Complex;

    /// The plain largest hypot, one value after another.
    fn naive(v: &[Complex<f64>]) -> f64 {
        v.iter().map(|c| c.norm()).fold(0.0, f64::max)
    }

    #[test]
    fn peak_abs_is_the_largest_norm_exactly() {
        // Fixed pseudo-random values, with near-ties to the last bits at
        // the top, a NaN (max ignores it, as the fold does), and values
        // whose squares leave f64's range (every norm then).
        let mut s = 12345u64;
        let mut r = || {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (s >> 11) as f64 / (1u64 << 53) as f64 - 0.5
        };
        let mut v: Vec<Complex<f64>> = (0..100_000).map(|_| Complex::new(r(), r())).collect();
        let top = naive(&v);
        for k in 0..50 {
            let a = std::f64::consts::FRAC_1_SQRT_2 * top * (1.0 + k as f64 * 1e-16);
            v.push(Complex::new(a, a * (1.0 - 1e-16)));
        }
        assert_eq!(peak_abs(&v), naive(&v));
        v.push(Complex::new(f64::NAN, 0.0));
        assert_eq!(peak_abs(&v), naive(&v));
        v.push(Complex::new(3e200, -4e200));
        assert_eq!(peak_abs(&v), naive(&v));
        assert_eq!(peak_abs(&v), 3e200f64.hypot(4e200));
        assert_eq!(peak_abs::<f32>(&[]), 0.0);
        let f: Vec<Complex<f32>> = v[..1000]
            .iter()
            .map(|c| Complex::new(c.re as f32, c.im as f32))
            .collect();
        let g: Vec<Complex<f64>> = f
            .iter()
            .map(|c| Complex::new(c.re as f64, c.im as f64))
            .collect();
        assert_eq!(
            peak_abs(&f),
            f.iter().map(|c| c.norm() as f64).fold(0.0, f64::max)
        );
        // float32's hypot against float64's of the same values: float32's
        // rounding, 2^-24 relative (6e-8), with room to spare.
        assert!((peak_abs(&f) - naive(&g)).abs() <= 1e-7 * naive(&g));
    }
}
