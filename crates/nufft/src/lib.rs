//! Non-uniform FFTs on the CPU, the way FINUFFT computes them (Barnett,
//! Magland and af Klinteberg 2019): spread with the exponential-of-semicircle
//! kernel onto a grid upsampled by sigma = 2 (or 1.5, [`Upsampling`]), FFT, and divide by the
//! kernel's Fourier transform (type 1); or the same steps in reverse
//! (type 2). The kernel's width and shape follow from the tolerance.
//!
//! Conventions (FINUFFT's, 3-D, modes centred):
//! - type 1: `f[k] = sum_m c_m exp(s i k . x_m)` for `k_d` in `-M_d/2 .. M_d/2`;
//! - type 2: `c_m = sum_k f[k] exp(s i k . x_m)`;
//!
//! with `s = ±1`, points `x_m` in radians (periodic in 2 pi), and `f`
//! stored x fastest with mode `-M_d/2` first. recon's sums map onto these
//! with `x_m = 2 pi k_m / N_d` (k in cycles/FOV): F^H D is type 1 with
//! `s = +1` on the image grid, Q is type 1 on the doubled grid, and the
//! forward model is type 2 with `s = -1` (see recon-encoding).
//!
//! As in FINUFFT, a [`Plan`] is made once for a mode shape and tolerance
//! (kernel, corrections, FFT plans), its points are set once (sorted into
//! slabs and bins, [`Plan::set_points`]) and it then executes any number
//! of times. Everything runs in float32 or float64 over rayon: spreading
//! over slabs of the fine grid that never write the same plane at once,
//! interpolation over points, the FFT over lines, pruned to the lines
//! the modes need ([`fft`]).
//!
//! The crate also holds what a NUFFT on any device shares: [`Layout`]
//! (kernel, fine grid and deconvolution factors from modes and tolerance)
//! and [`NufftBackend`], the plan interface the pipeline calls, which this
//! CPU plan and recon-cuda's GPU plan implement.

use recon_core::{Backend, CoilOp, Complex, CpuBackend, Error, Progress, Real, Result};

mod fft;
mod fine;
mod kernel;
mod layout;
mod spread;

pub use kernel::Kernel;
pub use layout::{Layout, Upsampling};

/// Version of the NUFFT's arithmetic, part of recon's Q cache key: bump it
/// whenever a change could alter the values it computes.
pub const VERSION: u32 = 4;
use fine::zeroed_grid;
use kernel::Horner;
use spread::Points;

/// A plan for one mode shape, kernel, sign and precision `T` (f32 or f64).
/// Points are float64 (radians); strengths, modes and the fine grid are
/// `T`; kernel values are computed in float64 and rounded to `T`.
///
/// A 2-D plan (one mode along z) runs as the 3-D plan of modes `[M_x, 1,
/// M_y]`, which holds its modes in the same order in memory: the flat axis
/// is the middle one, so that spreading still splits the fine grid into
/// slabs along the last axis (here y), and the spreader drops the flat
/// axis from its loops (spread.rs).
pub struct Plan<T: Real = f64> {
    /// Modes per axis, x y z.
    pub modes: [usize; 3],
    /// The upsampled grid per axis (even, at least 2 modes and twice the
    /// kernel's width), one plane along a flat z.
    pub fine: [usize; 3],
    /// Whether z is flat (one mode), so that axes run as x z y inside.
    flat: bool,
    pub kernel: Kernel,
    /// +1 or -1: the sign of the exponent.
    pub sign: i32,
    horner: Horner,
    /// `1 / K^(k / fine)` per axis, for modes `-M/2 .. M/2`.
    correction: [Vec<T>; 3],
    /// The pruned FFTs with this plan's sign and the opposite one.
    fft: fft::Pruned<T>,
    fft_opposite: fft::Pruned<T>,
    points: Option<Points>,
}

/// Checks points for any device's plan: finite, and at most `max` of them
/// (what the device's indices hold).
pub fn check_points(x: &[[f64; 3]], max: usize) -> Result<()> {
    if x.len() > max {
        return Err(Error::Invalid {
            what: "NUFFT points",
            reason: format!("at most {max} on this device, got {}", x.len()),
        });
    }
    if let Some(m) = x.iter().position(|p| p.iter().any(|v| !v.is_finite())) {
        return Err(Error::Invalid {
            what: "NUFFT points",
            reason: format!("point {m} is {:?}", x[m]),
        });
    }
    Ok(())
}

/// The NUFFT on a backend's own vectors: what differs between devices,
/// as [`Backend`] is for the rest of the pipeline (it lives here, not in
/// recon-core, because the CPU's implementation is this crate's [`Plan`]).
/// A plan is made with its points set once, then executed any number of
/// times; vectors hold modes (x fastest, mode `-M/2` first) or one value
/// per point, in the caller's order.
pub trait NufftBackend: Backend {
    /// A plan with its points set, on this device.
    type Nufft: Send + Sync;

    /// Makes a plan for `modes` at tolerance `tol` with sign `sign` and sets
    /// its points (radians, finite).
    fn nufft_plan(
        &self,
        modes: [usize; 3],
        tol: f64,
        sign: i32,
        points: &[[f64; 3]],
    ) -> Result<Self::Nufft>;

    /// Type 1: `out[k] = sum_m c[m] exp(s i k . x[m])`.
    fn nufft_type1(
        &self,
        plan: &Self::Nufft,
        out: &mut Self::Vector,
        c: &Self::Vector,
    ) -> Result<()>;

    /// The adjoint of type 1: `out[m] = sum_k f[k] exp(-s i k . x[m])`.
    fn nufft_type1_adjoint(
        &self,
        plan: &Self::Nufft,
        out: &mut Self::Vector,
        f: &Self::Vector,
    ) -> Result<()>;

    /// The strengths spread and interpolated back, without the FFT
    /// (see [`Plan::convolve`]).
    fn nufft_convolve(
        &self,
        plan: &Self::Nufft,
        out: &mut Self::Vector,
        c: &Self::Vector,
    ) -> Result<()>;

    /// Type 1 batched over coils and summed through their maps, SENSE's
    /// right-hand side: `out = sum_c conj(S_c) . type1(w . d_c)`, with `d`
    /// the coils' values in turn (`[C, M]`, on the host, one per point),
    /// `w` a real weight per point and `maps` one `S_c` per coil. Calls
    /// `progress` after each coil. The default takes the coils one by one
    /// ([`type1_coils_by_pieces`]); a device may overlap one coil's upload
    /// with the previous coil's transform.
    fn nufft_type1_coils(
        &self,
        plan: &Self::Nufft,
        out: &mut Self::Vector,
        w: &[f64],
        d: &[Complex<f64>],
        maps: &[&Self::Vector],
        progress: Progress<'_>,
    ) -> Result<()> {
        type1_coils_by_pieces(self, plan, out, w, d, maps, progress)
    }
}

/// Checks [`NufftBackend::nufft_type1_coils`]' lengths: as many values as
/// coils times weights, at least one coil, and an image per map.
pub fn check_type1_coils<B: NufftBackend + ?Sized>(
    backend: &B,
    out: &B::Vector,
    w: &[f64],
    d: &[Complex<f64>],
    maps: &[&B::Vector],
) -> Result<()> {
    if maps.is_empty() {
        return Err(Error::Invalid {
            what: "coil maps",
            reason: "none given".into(),
        });
    }
    Error::check_len(
        "k-space data (one value per coil and sample)",
        maps.len() * w.len(),
        d.len(),
    )?;
    for s in maps {
        Error::check_len(
            "coil map (one value per voxel)",
            backend.len(out),
            backend.len(s),
        )?;
    }
    Ok(())
}

/// [`NufftBackend::nufft_type1_coils`] coil by coil: `mu = w . d_c`
/// uploaded, `one = type1(mu)`, `out (+)= conj(S_c) . one`.
pub fn type1_coils_by_pieces<B: NufftBackend + ?Sized>(
    backend: &B,
    plan: &B::Nufft,
    out: &mut B::Vector,
    w: &[f64],
    d: &[Complex<f64>],
    maps: &[&B::Vector],
    progress: Progress<'_>,
) -> Result<()> {
    check_type1_coils(backend, out, w, d, maps)?;
    let m = w.len();
    sum_through_maps(backend, out, maps, progress, |c, one| {
        let mu: Vec<Complex<B::Real>> = weighted(w.iter().copied(), &d[c * m..(c + 1) * m]);
        backend.nufft_type1(plan, one, &backend.upload(&mu)?)
    })
}

/// `out = sum_c conj(S_c) . y_c` coil after coil, each `y_c` made by
/// `y(c, one)` into one image-sized vector; `progress` after each coil.
pub fn sum_through_maps<B: Backend + ?Sized>(
    backend: &B,
    out: &mut B::Vector,
    maps: &[&B::Vector],
    progress: Progress<'_>,
    mut y: impl FnMut(usize, &mut B::Vector) -> Result<()>,
) -> Result<()> {
    let mut one = backend.zeros(backend.len(out))?;
    for (c, s) in maps.iter().enumerate() {
        y(c, &mut one)?;
        let op = if c == 0 {
            CoilOp::Adjoint
        } else {
            CoilOp::AddAdjoint
        };
        backend.coil(out, op, s, &one)?;
        progress(c as u64 + 1, maps.len() as u64);
    }
    Ok(())
}

/// `w_m d_m` in `T`, for a real weight per point (phi for F^H D, density
/// weights for gridding).
pub fn weighted<T: Real>(w: impl Iterator<Item = f64>, d: &[Complex<f64>]) -> Vec<Complex<T>> {
    w.zip(d)
        .map(|(w, d)| {
            let m = d * w;
            Complex::new(T::of(m.re), T::of(m.im))
        })
        .collect()
}

impl<T: Real> NufftBackend for CpuBackend<T> {
    type Nufft = Plan<T>;

    fn nufft_plan(
        &self,
        modes: [usize; 3],
        tol: f64,
        sign: i32,
        points: &[[f64; 3]],
    ) -> Result<Plan<T>> {
        let mut p = Plan::new(modes, tol, sign)?;
        p.set_points(points)?;
        Ok(p)
    }

    fn nufft_type1(
        &self,
        plan: &Plan<T>,
        out: &mut Vec<Complex<T>>,
        c: &Vec<Complex<T>>,
    ) -> Result<()> {
        plan.type1(out, c)
    }

    fn nufft_type1_adjoint(
        &self,
        plan: &Plan<T>,
        out: &mut Vec<Complex<T>>,
        f: &Vec<Complex<T>>,
    ) -> Result<()> {
        plan.type1_adjoint(out, f)
    }

    fn nufft_convolve(
        &self,
        plan: &Plan<T>,
        out: &mut Vec<Complex<T>>,
        c: &Vec<Complex<T>>,
    ) -> Result<()> {
        plan.convolve(out, c)
    }
}

impl<T: Real> Plan<T> {
    /// A plan for `modes` (each at least 1) at tolerance `tol` (at least
    /// 1e-6 in float32, which cannot reach below).
    pub fn new(modes: [usize; 3], tol: f64, sign: i32) -> Result<Plan<T>> {
        Plan::with_upsampling(modes, tol, sign, Upsampling::Two)
    }

    /// As [`Plan::new`], on a fine grid of `upsampling`.
    pub fn with_upsampling(
        modes: [usize; 3],
        tol: f64,
        sign: i32,
        upsampling: Upsampling,
    ) -> Result<Plan<T>> {
        let l = Layout::new(modes, tol, sign, std::mem::size_of::<T>(), upsampling)?;
        let flat = modes[2] == 1;
        let [cx, cy, cz] = l.correction.map(|c| c.into_iter().map(T::of).collect());
        let correction = if flat { [cx, cz, cy] } else { [cx, cy, cz] };
        let (inner_modes, inner_fine) = (inner(flat, modes), inner(flat, l.fine));
        Ok(Plan {
            modes,
            fine: l.fine,
            flat,
            kernel: l.kernel,
            sign,
            horner: Horner::new(&l.kernel),
            correction,
            fft: fft::Pruned::new(inner_fine, inner_modes, sign),
            fft_opposite: fft::Pruned::new(inner_fine, inner_modes, -sign),
            points: None,
        })
    }

    /// Sets the points (radians, finite; at most 2^32 of them), sorted
    /// once for every later execution.
    pub fn set_points(&mut self, x: &[[f64; 3]]) -> Result<()> {
        check_points(x, u32::MAX as usize)?;
        let fine = self.inner_fine();
        self.points = Some(if self.flat {
            let x: Vec<[f64; 3]> = x.iter().map(|p| inner(true, *p)).collect();
            Points::new(&x, fine, &self.horner)
        } else {
            Points::new(x, fine, &self.horner)
        });
        Ok(())
    }

    /// The fine grid's shape as the spreader and the FFTs see it.
    fn inner_fine(&self) -> [usize; 3] {
        inner(self.flat, self.fine)
    }

    /// The number of points set.
    pub fn len(&self) -> usize {
        self.points.as_ref().map_or(0, |p| p.u.len())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn modes_len(&self) -> usize {
        self.modes.iter().product()
    }

    fn points(&self) -> Result<&Points> {
        self.points.as_ref().ok_or(Error::Invalid {
            what: "NUFFT plan",
            reason: "no points set (call set_points first)".into(),
        })
    }

    /// Calls `f(mode index, fine-grid index, correction)` for every mode.
    fn each_mode(&self, mut f: impl FnMut(usize, usize, T)) {
        let m = inner(self.flat, self.modes);
        let n = self.inner_fine();
        let at =
            |k: usize, d: usize| (k as i64 - (m[d] / 2) as i64).rem_euclid(n[d] as i64) as usize;
        let mut i = 0;
        for kz in 0..m[2] {
            let gz = at(kz, 2);
            for ky in 0..m[1] {
                let gy = at(ky, 1);
                let cyz = self.correction[2][kz] * self.correction[1][ky];
                let row = (gz * n[1] + gy) * n[0];
                for kx in 0..m[0] {
                    f(i, row + at(kx, 0), cyz * self.correction[0][kx]);
                    i += 1;
                }
            }
        }
    }

    /// Type 1: `out[k] = sum_m c[m] exp(s i k . x[m])`.
    pub fn type1(&self, out: &mut [Complex<T>], c: &[Complex<T>]) -> Result<()> {
        let pts = self.points()?;
        Error::check_len("NUFFT modes", self.modes_len(), out.len())?;
        Error::check_len("NUFFT strengths (one per point)", pts.u.len(), c.len())?;
        let mut grid = zeroed_grid(self.fine.iter().product());
        spread::spread(&mut grid, self.inner_fine(), &self.horner, pts, c);
        self.fft.forward_pruned(&mut grid);
        self.each_mode(|k, g, corr| out[k] = grid[g] * corr);
        Ok(())
    }

    /// The points' strengths convolved with the kernel twice, on the fine
    /// grid and without the FFT: `out[m] = sum_j K(j - u_m) sum_m' c[m']
    /// K(j - u_m')`, the spread followed by the interpolation. Pipe and
    /// Menon's density compensation iterates it.
    pub fn convolve(&self, out: &mut [Complex<T>], c: &[Complex<T>]) -> Result<()> {
        let pts = self.points()?;
        Error::check_len("NUFFT strengths (one per point)", pts.u.len(), c.len())?;
        Error::check_len("NUFFT outputs (one per point)", pts.u.len(), out.len())?;
        let mut grid = zeroed_grid(self.fine.iter().product());
        spread::spread(&mut grid, self.inner_fine(), &self.horner, pts, c);
        spread::interpolate(out, &grid, self.inner_fine(), &self.horner, pts);
        Ok(())
    }

    /// Type 2: `out[m] = sum_k f[k] exp(s i k . x[m])`.
    pub fn type2(&self, out: &mut [Complex<T>], f: &[Complex<T>]) -> Result<()> {
        self.type2_with(out, f, &self.fft)
    }

    /// Type 2 with the opposite sign, `out[m] = sum_k f[k] exp(-s i k . x[m])`:
    /// the adjoint of [`Plan::type1`].
    pub fn type1_adjoint(&self, out: &mut [Complex<T>], f: &[Complex<T>]) -> Result<()> {
        self.type2_with(out, f, &self.fft_opposite)
    }

    fn type2_with(
        &self,
        out: &mut [Complex<T>],
        f: &[Complex<T>],
        fft: &fft::Pruned<T>,
    ) -> Result<()> {
        let pts = self.points()?;
        Error::check_len("NUFFT modes", self.modes_len(), f.len())?;
        Error::check_len("NUFFT outputs (one per point)", pts.u.len(), out.len())?;
        let mut grid = zeroed_grid(self.fine.iter().product());
        self.each_mode(|k, g, corr| grid[g] = f[k] * corr);
        fft.backward_pruned(&mut grid);
        spread::interpolate(out, &grid, self.inner_fine(), &self.horner, pts);
        Ok(())
    }
}

/// Axes `x y z` in the order a plan runs them: `x z y` where z is flat.
fn inner<V: Copy>(flat: bool, [x, y, z]: [V; 3]) -> [V; 3] {
    if flat {
        [x, z, y]
    } else {
        [x, y, z]
    }
}

#[cfg(test)]
mod tests;
