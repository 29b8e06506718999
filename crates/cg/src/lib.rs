//! The solvers: conjugate gradient on `(F^H F + lambda W^H W) rho = F^H D`
//! for the quadratic priors, and ADMM and PDHG for the sparse ones
//! (`lambda ||K rho||`, total variation and its directional form).
//!
//! As in BART, an operator that CG needs only offers its normal map, and
//! F^H F is never formed from F: it is the Toeplitz product
//! `crop(IFFT(FFT(Q) . FFT(zero-pad(rho))))` on the `(2N)^3` grid. A
//! [`Problem`] holds FFT(Q) and F^H D on the device, made once per run and
//! solved for any W and lambda (passes, sweeps). W^H W is the backend's
//! sparse stencil. The data term is a [`DataTerm`]: F^H F alone, or
//! SENSE's sum over coils around the one Toeplitz product (Q does not
//! depend on the coil), which recon-encoding builds with the operator
//! layer and shares among the GPUs of a host.
//! Everything here is written once against [`Backend`]. CG's scalars stay
//! on the device with its vectors, and the host reads them only now and
//! then, so a GPU runs the iterations back to back. Residuals reach the caller through a callback:
//! this crate never prints.

mod admm;
mod circulant;
mod pdhg;
mod solve;
mod sparse;
pub use admm::admm;
pub use circulant::{toeplitz_eigenvalues, Circulant, Gram, Preconditioner};
pub use pdhg::pdhg;
pub use solve::{solve, Info, Params};
pub use sparse::{Sparse, SparseAlgorithm, SparseParams};

use recon_core::{Backend, Complex, Error, Grid, Real, Result, Stencil};

/// A Hermitian positive (semi-)definite operator `A`, applied as `out = A x`.
pub trait Normal<B: Backend> {
    /// Length of the vectors it maps.
    fn len(&self) -> usize;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    fn apply(&mut self, backend: &B, out: &mut B::Vector, x: &B::Vector) -> Result<()>;
    /// `out = A x`, then `s[slot] = <x, A x>` (CG's `<p, A p>`): the map
    /// and the dot product, which an operator may fuse (the quadratic
    /// prior's last pass takes the product along).
    fn apply_dot(
        &mut self,
        backend: &B,
        out: &mut B::Vector,
        x: &B::Vector,
        s: &mut B::Scalars,
        slot: usize,
    ) -> Result<()> {
        self.apply(backend, out, x)?;
        backend.dot_re_to(s, slot, x, out)
    }
    /// `out = A x + a W^H W x`, then `s[slot] = <x, out>`: CG's map of a
    /// regularised problem and its dot. The Toeplitz product hands both to
    /// the backend ([`Backend::toeplitz_dot`]), which may fold a uniform
    /// W^H W into the product.
    #[allow(clippy::too_many_arguments)]
    fn apply_whw_dot(
        &mut self,
        backend: &B,
        out: &mut B::Vector,
        x: &B::Vector,
        a: f64,
        w: &B::Weights,
        s: &mut B::Scalars,
        slot: usize,
    ) -> Result<()> {
        self.apply(backend, out, x)?;
        backend.add_whw_dot_to(out, a, x, w, s, slot)
    }
}

/// A solver's data term `A = sum_c S_c^H F^H F S_c`: its normal map, and
/// what the solvers need to know of it. F^H F alone ([`Toeplitz`]) is one
/// coil of sensitivity 1; SENSE's sum over coils (recon-encoding's
/// `SenseTerm`, the operator layer's stack split over devices) has maps.
pub trait DataTerm<B: Backend>: Normal<B> + Send {
    /// The largest `sum_c |S_c(x)|^2` over the voxels (1 without maps):
    /// the data term's diagonal peaks at `max|Q|` times this.
    fn map_peak(&self) -> f64 {
        1.0
    }
    /// Whether it has coil maps (SENSE), rather than being F^H F alone.
    fn has_maps(&self) -> bool {
        false
    }
    /// Devices that share its work.
    fn devices(&self) -> usize {
        1
    }
}

/// Every method forwarded, so that a boxed term keeps its fused ones.
impl<B: Backend> Normal<B> for Box<dyn DataTerm<B> + '_> {
    fn len(&self) -> usize {
        (**self).len()
    }
    fn apply(&mut self, backend: &B, out: &mut B::Vector, x: &B::Vector) -> Result<()> {
        (**self).apply(backend, out, x)
    }
    fn apply_dot(
        &mut self,
        backend: &B,
        out: &mut B::Vector,
        x: &B::Vector,
        s: &mut B::Scalars,
        slot: usize,
    ) -> Result<()> {
        (**self).apply_dot(backend, out, x, s, slot)
    }
    fn apply_whw_dot(
        &mut self,
        backend: &B,
        out: &mut B::Vector,
        x: &B::Vector,
        a: f64,
        w: &B::Weights,
        s: &mut B::Scalars,
        slot: usize,
    ) -> Result<()> {
        (**self).apply_whw_dot(backend, out, x, a, w, s, slot)
    }
}

/// F^H F as a Toeplitz product with Q.
pub struct Toeplitz<B: Backend> {
    n: [usize; 3],
    /// FFT of Q, circularly shifted so that displacement 0 is at index 0.
    fq: B::Vector,
    /// A `(2N)^3` work vector.
    work: B::Vector,
    /// The product's FFT plans (or line passes), made once here.
    plan: B::ToeplitzPlan,
}

impl<B: Backend> Toeplitz<B> {
    /// Takes Q as computed by `recon-q` (displacement 0 at index N per axis)
    /// and precomputes its FFT on the device. Q must be Hermitian, `Q(-r) =
    /// conj Q(r)` (as every Q of real sample weights is): a device may keep
    /// only the real part of its FFT ([`Backend::fft_q`]).
    pub fn new(backend: &B, grid: &Grid, q: &[Complex<B::Real>]) -> Result<Self> {
        let d = grid.doubled();
        Error::check_len("Q (2N)^3", d[0] * d[1] * d[2], q.len())?;
        let fq = backend.fft_q(q, d)?;
        Ok(Toeplitz {
            n: grid.n,
            fq,
            work: backend.zeros(q.len())?,
            plan: backend.toeplitz_plan(grid.n)?,
        })
    }

    /// SENSE's term of one coil: `out = conj(s) . F^H F (s . x)`, or
    /// `out += ...` with `accumulate`; `scratch` two image-sized vectors.
    pub fn apply_coil(
        &mut self,
        backend: &B,
        out: &mut B::Vector,
        accumulate: bool,
        s: &B::Vector,
        x: &B::Vector,
        scratch: (&mut B::Vector, &mut B::Vector),
    ) -> Result<()> {
        backend.toeplitz_coil(
            &self.plan,
            out,
            accumulate,
            s,
            x,
            &self.fq,
            &mut self.work,
            scratch,
        )
    }

    /// The same product on another shard `to`, FFT(Q) copied from `from`
    /// (this one's backend).
    pub fn copied(&self, to: &B, from: &B) -> Result<Self> {
        let mut fq = to.zeros(from.len(&self.fq))?;
        to.transfer(&mut fq, from, &self.fq)?;
        Ok(Toeplitz {
            n: self.n,
            fq,
            work: to.zeros(from.len(&self.work))?,
            plan: to.toeplitz_plan(self.n)?,
        })
    }
}

/// One coil of sensitivity 1.
impl<B: Backend> DataTerm<B> for Toeplitz<B> {}

impl<B: Backend> Normal<B> for Toeplitz<B> {
    fn len(&self) -> usize {
        self.n.iter().product()
    }

    fn apply(&mut self, backend: &B, out: &mut B::Vector, x: &B::Vector) -> Result<()> {
        // out = crop(IFFT(FFT(Q) . FFT(pad(x))))
        backend.toeplitz(&self.plan, out, x, &self.fq, &mut self.work)
    }

    fn apply_whw_dot(
        &mut self,
        backend: &B,
        out: &mut B::Vector,
        x: &B::Vector,
        a: f64,
        w: &B::Weights,
        s: &mut B::Scalars,
        slot: usize,
    ) -> Result<()> {
        // out = T x + a W^H W x, s[slot] = <x, out>
        let (plan, fq) = (&self.plan, &self.fq);
        backend.toeplitz_dot(plan, out, x, fq, &mut self.work, Some((a, w)), s, slot)
    }
}

/// `A + lambda W^H W`, around a data term `A` it borrows (F^H F as a
/// Toeplitz product, or SENSE's sum over coils).
pub struct Regularised<'t, B: Backend, A: Normal<B> = Toeplitz<B>> {
    pub data: &'t mut A,
    weights: B::Weights,
    /// Absolute lambda (already scaled by Q's peak).
    lambda: f64,
}

impl<'t, B: Backend, A: Normal<B>> Regularised<'t, B, A> {
    /// `lambda_abs` multiplies W^H W as is; see [`lambda_abs`] for the
    /// relative convention of the configs.
    pub fn new(backend: &B, data: &'t mut A, weights: &Stencil, lambda_abs: f64) -> Result<Self> {
        if !(lambda_abs.is_finite() && lambda_abs >= 0.0) {
            return Err(Error::Invalid {
                what: "lambda",
                reason: format!("must be finite and non-negative, got {lambda_abs}"),
            });
        }
        Error::check_len("edge weights grid", data.len(), weights.n.iter().product())?;
        Ok(Regularised {
            weights: backend.upload_weights(weights)?,
            data,
            lambda: lambda_abs,
        })
    }
}

impl<B: Backend, A: Normal<B>> Normal<B> for Regularised<'_, B, A> {
    fn len(&self) -> usize {
        self.data.len()
    }

    fn apply(&mut self, backend: &B, out: &mut B::Vector, x: &B::Vector) -> Result<()> {
        // out = A x + lambda W^H W x
        self.data.apply(backend, out, x)?;
        if self.lambda > 0.0 {
            backend.add_whw(out, self.lambda, x, &self.weights)?;
        }
        Ok(())
    }

    fn apply_dot(
        &mut self,
        backend: &B,
        out: &mut B::Vector,
        x: &B::Vector,
        s: &mut B::Scalars,
        slot: usize,
    ) -> Result<()> {
        // out = A x + lambda W^H W x, s[slot] = <x, out>, by the data
        // term (which may fold the prior into its own passes), as apply
        if self.lambda > 0.0 {
            let (a, w) = (self.lambda, &self.weights);
            self.data.apply_whw_dot(backend, out, x, a, w, s, slot)
        } else {
            self.data.apply_dot(backend, out, x, s, slot)
        }
    }
}

/// The peak of |Q|: Q at displacement 0, `sum_m |phi(k_m)|^2` (by the
/// triangle inequality no |Q(y)| exceeds it), which is also every diagonal
/// entry of F^H F. Read at index N along each axis (0 along a 2-D grid's
/// flat z; see recon-q).
pub fn q_peak<T: Real>(grid: &Grid, q: &[Complex<T>]) -> Result<f64> {
    let d = grid.doubled();
    Error::check_len("Q (2N)^3", d[0] * d[1] * d[2], q.len())?;
    let [cx, cy, cz] = grid.lag_zero();
    let centre = (cz * d[1] + cy) * d[0] + cx;
    Ok(q[centre].norm().f64())
}

/// Converts the configs' relative lambda to an absolute one:
/// `lambda_abs = lambda_rel * max |Q|`, so that lambda_rel = 1 weighs W^H W
/// like the diagonal of F^H F, whatever the trajectory length or units.
pub fn lambda_abs<T: Real>(lambda_rel: f64, grid: &Grid, q: &[Complex<T>]) -> Result<f64> {
    Ok(lambda_rel * q_peak(grid, q)?)
}

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
