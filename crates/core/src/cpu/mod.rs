//! The CPU backend: multi-threaded (rayon), f32 or f64, rustfft for FFTs.
//! It is the reference every other backend is checked against.

mod engine;
mod fft;
pub mod sparse;
mod toeplitz;
pub mod wavelet;

use crate::backend::{Backend, CoilOp, Direction, GroupProx, Ratio, Sign, Targets};
use crate::{Complex, Error, Progress, Real, Result, Stencil};
use rayon::prelude::*;
use std::marker::PhantomData;

pub use engine::sum_exp;
pub use fft::Plan3;

/// The CPU backend in precision `T`.
pub struct CpuBackend<T: Real> {
    /// Shards it reports (all on the host): see [`CpuBackend::with_shards`].
    shards: usize,
    _t: PhantomData<T>,
}

impl<T: Real> Default for CpuBackend<T> {
    fn default() -> Self {
        CpuBackend {
            shards: 1,
            _t: PhantomData,
        }
    }
}

impl<T: Real> CpuBackend<T> {
    pub fn new() -> Self {
        Self::default()
    }

    /// A backend that reports `shards` shards, all on the host, so that the
    /// code which shares sums among the GPUs of a host runs (and is tested)
    /// on the CPU: the sums split and gather as they would on `shards` GPUs.
    pub fn with_shards(shards: usize) -> Result<Self> {
        if shards == 0 {
            return Err(Error::Invalid {
                what: "CPU shards",
                reason: "at least one is needed".into(),
            });
        }
        Ok(CpuBackend {
            shards,
            ..Self::default()
        })
    }
}

/// Squared stencil weights in the backend's precision.
pub struct CpuWeights<T> {
    n: [usize; 3],
    /// `None`: every edge weight 1.
    w2: Option<[Vec<T>; 3]>,
    /// `None`: no diagonal.
    d2: Option<Vec<T>>,
}

impl<T: Real> Backend for CpuBackend<T> {
    type Real = T;
    type Vector = Vec<Complex<T>>;
    type Weights = CpuWeights<T>;
    type Scalars = Vec<f64>;
    type Fft = Plan3<T>;
    type ToeplitzPlan = Plan3<T>;

    fn describe(&self) -> String {
        format!(
            "CPU ({} threads, {})",
            rayon::current_num_threads(),
            T::NAME
        )
    }

    fn sum_exp(
        &self,
        out: &mut [Complex<T>],
        targets: Targets<'_>,
        first: usize,
        sources: &[[f64; 3]],
        coef: &[Complex<T>],
        sign: Sign,
        progress: Progress<'_>,
    ) -> Result<()> {
        engine::sum_exp(out, targets, first, sources, coef, sign, progress)
    }

    fn shards(&self) -> usize {
        self.shards
    }

    fn shard(&self, i: usize) -> Result<Self> {
        Error::check_index("CPU shard", i, self.shards)?;
        Ok(Self::new())
    }

    fn transfer(&self, out: &mut Self::Vector, _from: &Self, x: &Self::Vector) -> Result<()> {
        self.copy(out, x)
    }

    fn zeros(&self, len: usize) -> Result<Self::Vector> {
        Ok(vec![Complex::default(); len])
    }

    fn upload(&self, host: &[Complex<T>]) -> Result<Self::Vector> {
        Ok(host.to_vec())
    }

    fn download(&self, out: &mut [Complex<T>], x: &Self::Vector) -> Result<()> {
        Error::check_len("download", x.len(), out.len())?;
        out.copy_from_slice(x);
        Ok(())
    }

    fn len(&self, x: &Self::Vector) -> usize {
        x.len()
    }

    fn copy(&self, out: &mut Self::Vector, x: &Self::Vector) -> Result<()> {
        Error::check_len("copy", x.len(), out.len())?;
        out.copy_from_slice(x);
        Ok(())
    }

    fn axpy(&self, y: &mut Self::Vector, a: f64, x: &Self::Vector) -> Result<()> {
        Error::check_len("axpy", y.len(), x.len())?;
        let a = T::of(a);
        y.par_iter_mut().zip(x.par_iter()).for_each(|(y, x)| {
            *y = *y + *x * a;
        });
        Ok(())
    }

    fn dot_re(&self, x: &Self::Vector, y: &Self::Vector) -> Result<f64> {
        Error::check_len("dot", x.len(), y.len())?;
        // Fixed chunks summed in order, then the partial sums in order: the
        // result does not depend on thread scheduling, so a run repeats
        // bit for bit (CG amplifies last-bit differences).
        const CHUNK: usize = 1 << 12;
        let partial: Vec<f64> = x
            .par_chunks(CHUNK)
            .zip(y.par_chunks(CHUNK))
            .map(|(a, b)| {
                a.iter()
                    .zip(b)
                    .map(|(a, b)| a.re.f64() * b.re.f64() + a.im.f64() * b.im.f64())
                    .sum::<f64>()
            })
            .collect();
        Ok(partial.iter().sum())
    }

    fn scalars(&self, init: &[f64]) -> Result<Self::Scalars> {
        Ok(init.to_vec())
    }

    fn read_scalars(&self, out: &mut [f64], s: &Self::Scalars) -> Result<()> {
        Error::check_len("solver scalars", s.len(), out.len())?;
        out.copy_from_slice(s);
        Ok(())
    }

    fn dot_re_to(
        &self,
        s: &mut Self::Scalars,
        slot: usize,
        x: &Self::Vector,
        y: &Self::Vector,
    ) -> Result<()> {
        Error::check_index("solver scalars", slot, s.len())?;
        s[slot] = self.dot_re(x, y)?;
        Ok(())
    }

    fn axpy_ratio(
        &self,
        y: &mut Self::Vector,
        a: f64,
        ratio: Ratio,
        s: &Self::Scalars,
        x: &Self::Vector,
    ) -> Result<()> {
        ratio.check(s.len())?;
        self.axpy(y, a * ratio.of(s), x)
    }

    fn xpby_ratio(
        &self,
        y: &mut Self::Vector,
        x: &Self::Vector,
        ratio: Ratio,
        s: &Self::Scalars,
    ) -> Result<()> {
        ratio.check(s.len())?;
        Error::check_len("xpby", y.len(), x.len())?;
        // y = x + b y
        let b = T::of(ratio.of(s));
        y.par_iter_mut().zip(x.par_iter()).for_each(|(y, x)| {
            *y = *x + *y * b;
        });
        Ok(())
    }

    fn fft_plan(&self, shape: [usize; 3]) -> Result<Self::Fft> {
        Ok(Plan3::new(shape))
    }

    fn fft3(&self, plan: &Self::Fft, x: &mut Self::Vector, dir: Direction) -> Result<()> {
        Error::check_len("fft3", plan.shape().iter().product(), x.len())?;
        plan.fft3(x, dir);
        Ok(())
    }

    fn mul(&self, x: &mut Self::Vector, y: &Self::Vector) -> Result<()> {
        Error::check_len("mul", x.len(), y.len())?;
        x.par_iter_mut().zip(y.par_iter()).for_each(|(x, y)| {
            *x = *x * *y;
        });
        Ok(())
    }

    fn inverse_sum(
        &self,
        out: &mut Self::Vector,
        a: &Self::Vector,
        rho: f64,
        b: &Self::Vector,
    ) -> Result<()> {
        Error::check_len("inverse_sum a", out.len(), a.len())?;
        Error::check_len("inverse_sum b", out.len(), b.len())?;
        out.par_iter_mut()
            .zip(a.par_iter().zip(b.par_iter()))
            .for_each(|(o, (a, b))| {
                *o = Complex::new(T::of(1.0 / (a.re.f64() + rho * b.re.f64())), T::of(0.0));
            });
        Ok(())
    }

    fn coil(
        &self,
        out: &mut Self::Vector,
        op: CoilOp,
        s: &Self::Vector,
        x: &Self::Vector,
    ) -> Result<()> {
        Error::check_len("coil map", out.len(), s.len())?;
        Error::check_len("coil input", out.len(), x.len())?;
        let it = out.par_iter_mut().zip(s.par_iter().zip(x.par_iter()));
        match op {
            CoilOp::Forward => it.for_each(|(o, (s, x))| *o = *s * *x),
            CoilOp::Adjoint => it.for_each(|(o, (s, x))| *o = s.conj() * *x),
            CoilOp::AddAdjoint => it.for_each(|(o, (s, x))| *o = *o + s.conj() * *x),
        }
        Ok(())
    }

    /// The line FFTs of the `2n` grid.
    fn toeplitz_plan(&self, n: [usize; 3]) -> Result<Self::ToeplitzPlan> {
        Ok(Plan3::new(crate::doubled(n)))
    }

    fn toeplitz(
        &self,
        plan: &Self::ToeplitzPlan,
        out: &mut Self::Vector,
        x: &Self::Vector,
        fq: &Self::Vector,
        work: &mut Self::Vector,
    ) -> Result<()> {
        let d = plan.shape();
        let len: usize = crate::undoubled(d).iter().product();
        let big: usize = d.iter().product();
        Error::check_len("Toeplitz input", len, x.len())?;
        Error::check_len("Toeplitz output", len, out.len())?;
        Error::check_len("FFT(Q) (2N)^3", big, fq.len())?;
        Error::check_len("Toeplitz work (2N)^3", big, work.len())?;
        toeplitz::toeplitz(plan, out, x, fq, work);
        Ok(())
    }

    fn pad(&self, out: &mut Self::Vector, x: &Self::Vector, n: [usize; 3]) -> Result<()> {
        let [nx, ny, nz] = n;
        Error::check_len("pad input", nx * ny * nz, x.len())?;
        Error::check_len("pad output", crate::doubled(n).iter().product(), out.len())?;
        // Each padded z-plane (2nx * 2ny) gets its first ny rows from x.
        out.par_chunks_mut(4 * nx * ny)
            .enumerate()
            .for_each(|(z, plane)| {
                plane.fill(Complex::default());
                if z < nz {
                    for y in 0..ny {
                        let src = &x[(z * ny + y) * nx..][..nx];
                        plane[y * 2 * nx..][..nx].copy_from_slice(src);
                    }
                }
            });
        Ok(())
    }

    fn crop(&self, out: &mut Self::Vector, x: &Self::Vector, n: [usize; 3]) -> Result<()> {
        let [nx, ny, nz] = n;
        Error::check_len("crop input", crate::doubled(n).iter().product(), x.len())?;
        Error::check_len("crop output", nx * ny * nz, out.len())?;
        out.par_chunks_mut(nx * ny)
            .enumerate()
            .for_each(|(z, plane)| {
                for y in 0..ny {
                    let src = &x[(z * 2 * ny + y) * 2 * nx..][..nx];
                    plane[y * nx..][..nx].copy_from_slice(src);
                }
            });
        Ok(())
    }

    fn scale(&self, x: &mut Self::Vector, a: f64) -> Result<()> {
        let a = T::of(a);
        x.par_iter_mut().for_each(|v| *v = *v * a);
        Ok(())
    }

    fn copy_part(
        &self,
        out: &mut Self::Vector,
        at: usize,
        x: &Self::Vector,
        from: usize,
        len: usize,
    ) -> Result<()> {
        check_part("copy_part output", at, len, out.len())?;
        check_part("copy_part input", from, len, x.len())?;
        out[at..at + len].copy_from_slice(&x[from..from + len]);
        Ok(())
    }

    fn grad(&self, out: &mut Self::Vector, x: &Self::Vector, n: [usize; 3]) -> Result<()> {
        sparse::grad(out, x, n)
    }

    fn grad_adjoint(&self, out: &mut Self::Vector, y: &Self::Vector, n: [usize; 3]) -> Result<()> {
        sparse::grad_adjoint(out, y, n)
    }

    fn group_prox(
        &self,
        x: &mut Self::Vector,
        t: f64,
        components: usize,
        kind: GroupProx,
    ) -> Result<()> {
        sparse::group_prox(x, t, components, kind)
    }

    fn project_off(&self, v: &mut Self::Vector, xi: &Self::Vector) -> Result<()> {
        sparse::project_off(v, xi)
    }

    fn dwt(
        &self,
        out: &mut Self::Vector,
        x: &Self::Vector,
        n: [usize; 3],
        extent: [usize; 3],
        axis: usize,
        inverse: bool,
    ) -> Result<()> {
        wavelet::dwt(out, x, n, extent, axis, inverse)
    }

    fn roll(
        &self,
        out: &mut Self::Vector,
        x: &Self::Vector,
        n: [usize; 3],
        shift: [usize; 3],
    ) -> Result<()> {
        wavelet::roll(out, x, n, shift)
    }

    fn shrink_outside(
        &self,
        x: &mut Self::Vector,
        n: [usize; 3],
        corner: [usize; 3],
        t: f64,
    ) -> Result<()> {
        wavelet::shrink_outside(x, n, corner, t)
    }

    fn upload_weights(&self, w: &Stencil) -> Result<Self::Weights> {
        w.check()?;
        Ok(CpuWeights {
            n: w.n,
            w2: w.squared(),
            d2: w.diag_squared(),
        })
    }

    fn add_whw(
        &self,
        out: &mut Self::Vector,
        a: f64,
        x: &Self::Vector,
        w: &Self::Weights,
    ) -> Result<()> {
        let n = w.n;
        let len = n[0] * n[1] * n[2];
        Error::check_len("W^H W input", len, x.len())?;
        Error::check_len("W^H W output", len, out.len())?;
        let stride = [1, n[0], n[0] * n[1]];
        let a = T::of(a);
        let w2 = |d: usize, i: usize| w.w2.as_ref().map_or(T::one(), |w2| w2[d][i]);
        out.par_iter_mut().enumerate().for_each(|(idx, o)| {
            let c = crate::index3(n, idx);
            let xi = x[idx];
            let mut acc = Complex::<T>::default();
            for d in 0..3 {
                // edge (idx, idx + e_d): w^2 (x[idx] - x[idx + e_d])
                if c[d] + 1 < n[d] {
                    acc = acc + (xi - x[idx + stride[d]]) * w2(d, idx);
                }
                // edge (idx - e_d, idx): w^2 (x[idx] - x[idx - e_d])
                if c[d] > 0 {
                    let j = idx - stride[d];
                    acc = acc + (xi - x[j]) * w2(d, j);
                }
            }
            // diagonal row: d^2 x[idx]
            if let Some(d2) = &w.d2 {
                acc = acc + xi * d2[idx];
            }
            *o = *o + acc * a;
        });
        Ok(())
    }
}

/// Fails unless `start..start + len` lies within `total` values.
pub fn check_part(what: &'static str, start: usize, len: usize, total: usize) -> Result<()> {
    match start.checked_add(len) {
        Some(end) if end <= total => Ok(()),
        _ => Err(Error::Invalid {
            what,
            reason: format!("{start}..{start}+{len} lies outside {total} values"),
        }),
    }
}
