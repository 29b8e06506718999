//! The gridding baseline that the iterative result is compared against.
//!
//! As in the book's comparison: density-compensated samples, transformed
//! to the image once, `rho(x) = sum_m w_m D_m exp(+i 2pi k_m . x) / FOV`.
//! The sum is a type 1 NUFFT (recon-nufft: spread with the
//! exponential-of-semicircle kernel on a grid upsampled by 2, FFT, and
//! divide by the kernel's transform), so apodisation and aliasing are the
//! NUFFT's, below its tolerance. The density weights `w` come from Pipe and
//! Menon's fixed-point iteration `w <- w / (C w)`, where `C` convolves the
//! samples with the same spreader and interpolator (a kernel four cells of
//! the fine grid wide: it reaches the neighbours of Nyquist-spaced
//! samples, so each weight measures the area its sample stands for).
//! Both NUFFTs run on the reconstruction's own backend ([`NufftBackend`]:
//! the GPU in float32, or the CPU in its precision), so that the baseline
//! costs no more than the reconstruction it is compared with; the weights'
//! update and calibration, a pass over the samples, run on the host.
//!
//! Scaling: the weights are calibrated so that `sum_m w_m f(k_m)` is the
//! integral of f over k-space for a smooth f at its well-sampled centre;
//! divided by the FOV, the result estimates the same voxel values as the
//! iterative reconstruction (the units of the phantom).

use rayon::prelude::*;
use recon_core::{Complex, Error, Grid, Real, Result};
use recon_nufft::NufftBackend;

/// Gridding settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Params {
    /// Pipe-Menon density-compensation iterations.
    pub dcf_iterations: usize,
}

impl Default for Params {
    fn default() -> Self {
        Params { dcf_iterations: 10 }
    }
}

/// The density compensation's kernel: tolerance 1e-2 gives the ES kernel
/// four cells of the fine grid wide (two image cells), the width of
/// Jackson's classic gridding kernel on a 2x grid. A wider kernel smooths
/// the weights over more neighbours than the sample spacing needs.
pub const DCF_TOLERANCE: f64 = 1e-2;

/// The image sum's tolerance: far below what gridding's own approximation
/// (the density weights) gets wrong.
pub const IMAGE_TOLERANCE: f64 = 1e-6;

/// Pipe-Menon density compensation: `w <- w / (C w)` from `w = 1`.
fn density_weights<B: NufftBackend>(
    b: &B,
    plan: &B::Nufft,
    samples: usize,
    iterations: usize,
) -> Result<Vec<f64>> {
    let mut w = vec![1.0; samples];
    let mut conv = b.zeros(samples)?;
    let mut host = vec![Complex::default(); samples];
    for _ in 0..iterations {
        let wc: Vec<Complex<B::Real>> = w
            .iter()
            .map(|&v| Complex::new(B::Real::of(v), B::Real::of(0.0)))
            .collect();
        b.nufft_convolve(plan, &mut conv, &b.upload(&wc)?)?;
        b.download(&mut host, &conv)?;
        for (w, c) in w.iter_mut().zip(&host) {
            // Each sample sees at least its own weight times its kernel's
            // squared norm, so c.re > 0.
            let c = c.re.f64();
            if c > 0.0 {
                *w /= c;
            }
        }
    }
    Ok(w)
}

/// Scales density weights so that `sum_m w_m f(k_m)` is the integral of f
/// over k-space (in cycles/FOV) for a Gaussian f at the centre of k-space,
/// where every trajectory samples densely.
///
/// Pipe-Menon weights are right relative to each other but their overall
/// scale depends on how the kernel sees the samples' spacing: a kernel that
/// is not band-limited at that spacing (any practical one on a 2x grid)
/// gets it wrong by 10 to 25%, which would show as a darker or brighter
/// image. The Gaussian's width is a tenth of the sampled extent along each
/// axis: an object's mean is carried by the lowest frequencies, which every
/// trajectory samples densely, while a wider Gaussian reaches where
/// Pipe-Menon's weights are least reliable (a quarter of the extent left
/// the sodium phantom 21% too bright on twisted projections).
fn calibrate(mut w: Vec<f64>, grid: &Grid, traj: &[[f64; 3]]) -> Vec<f64> {
    let extent = [0, 1, 2].map(|d| {
        traj.iter()
            .map(|k| k[d].abs())
            .fold(0.0, f64::max)
            .min(grid.n[d] as f64 / 2.0)
    });
    let s = extent.map(|e| (e / 10.0).max(1e-3));
    // The integral runs over the axes the grid resolves: a 2-D grid's data
    // lie in the plane k_z = 0, whose weights are areas, not volumes.
    let axes: Vec<usize> = (0..3).filter(|&d| grid.n[d] > 1).collect();
    let f = |k: &[f64; 3]| {
        (-axes
            .iter()
            .map(|&d| (k[d] / s[d]).powi(2) / 2.0)
            .sum::<f64>())
        .exp()
    };
    let integral: f64 = axes
        .iter()
        .map(|&d| (2.0 * std::f64::consts::PI).sqrt() * s[d])
        .product();
    let sum: f64 = traj.iter().zip(&w).map(|(k, w)| w * f(k)).sum();
    if sum > 0.0 && sum.is_finite() {
        let c = integral / sum;
        w.iter_mut().for_each(|v| *v *= c);
    }
    w
}

/// Gridding for one trajectory: the density weights and the image's plan,
/// made once and applied to any data on it (each coil of a scan).
pub struct Gridding<'b, B: NufftBackend> {
    b: &'b B,
    grid: Grid,
    /// Calibrated density weights over the FOV's volume.
    weights: Vec<f64>,
    /// `|k_m|` in cycles/FOV, for tapers.
    radius: Vec<f64>,
    plan: B::Nufft,
}

impl<'b, B: NufftBackend> Gridding<'b, B> {
    pub fn new(b: &'b B, grid: &Grid, traj: &[[f64; 3]], params: &Params) -> Result<Self> {
        let x = recon_encoding::radians(grid, traj);
        let dcf = b.nufft_plan(grid.n, DCF_TOLERANCE, 1, &x)?;
        let w = density_weights(b, &dcf, traj.len(), params.dcf_iterations)?;
        drop(dcf);
        // The weights sum like the k-space volume (cycles/FOV)^3, and the
        // continuous inverse transform takes 1 / FOV per axis of that
        // integral.
        let scale = 1.0 / grid.fov_mm.iter().product::<f64>();
        let weights = calibrate(w, grid, traj)
            .into_iter()
            .map(|w| w * scale)
            .collect();
        Ok(Gridding {
            b,
            grid: *grid,
            weights,
            radius: traj
                .iter()
                .map(|k| k.iter().map(|v| v * v).sum::<f64>().sqrt())
                .collect(),
            plan: b.nufft_plan(grid.n, IMAGE_TOLERANCE, 1, &x)?,
        })
    }

    /// Samples of the trajectory it was made for.
    pub fn samples(&self) -> usize {
        self.weights.len()
    }

    /// The gridding image of `data` (one value per sample), x fastest.
    /// With `taper = Some(kc)`, the data are first weighted by
    /// `cos^2(pi |k| / (2 kc))` inside `|k| < kc` cycles/FOV and 0 outside:
    /// a low-resolution image of the k-space centre (for coil maps).
    pub fn image(&self, data: &[Complex<f64>], taper: Option<f64>) -> Result<Vec<Complex<f64>>> {
        Error::check_len(
            "gridding data (one value per trajectory point)",
            self.weights.len(),
            data.len(),
        )?;
        let window = |r: f64| match taper {
            None => 1.0,
            Some(kc) if r < kc => (std::f64::consts::FRAC_PI_2 * r / kc).cos().powi(2),
            Some(_) => 0.0,
        };
        let w = self
            .weights
            .iter()
            .zip(&self.radius)
            .map(|(w, r)| w * window(*r));
        let weighted: Vec<Complex<B::Real>> = recon_encoding::weighted(w, data);
        let b = self.b;
        let mut image = b.zeros(self.grid.len())?;
        b.nufft_type1(&self.plan, &mut image, &b.upload(&weighted)?)?;
        Ok(b.to_host(&image)?
            .into_par_iter()
            .map(|v: Complex<B::Real>| Complex::new(v.re.f64(), v.im.f64()))
            .collect())
    }
}

/// The gridding reconstruction of `data` on `grid` (x fastest), computed
/// on `b`.
pub fn reconstruct<B: NufftBackend>(
    b: &B,
    grid: &Grid,
    traj: &[[f64; 3]],
    data: &[Complex<f64>],
    params: &Params,
) -> Result<Vec<Complex<f64>>> {
    Error::check_len(
        "gridding data (one value per trajectory point)",
        traj.len(),
        data.len(),
    )?;
    Gridding::new(b, grid, traj, params)?.image(data, None)
}
