//! The gridding baseline that the iterative result is compared against.
//!
//! As in the book's comparison: density-compensated samples are spread with
//! a trilinear kernel onto a grid oversampled by `oversampling`, inverse
//! FFT'd, cropped to the field of view and deapodised (divided by the
//! kernel's transform, `prod_d sinc^2(u_d / sigma_d)`). Density weights come
//! from Pipe and Menon's fixed-point iteration `w <- w / (C * w)` with the
//! same kernel C. Everything is float64 on the CPU: it is a reference, not a
//! fast path.
//!
//! Scaling: at convergence `sum_m w_m f(k_m)` approximates the integral of
//! f in grid-cell units, so the result is divided by
//! `prod_d (sigma_d FOV_d)` to estimate the same voxel values as the
//! iterative reconstruction (the units of the phantom).

use recon_core::{Backend, Complex, CpuBackend, Direction, Error, Grid, Result};

/// Gridding settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Params {
    /// Grid oversampling factor sigma (>= 1); the grid size is rounded up to even.
    pub oversampling: f64,
    /// Pipe-Menon density-compensation iterations.
    pub dcf_iterations: usize,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            oversampling: 2.0,
            dcf_iterations: 10,
        }
    }
}

/// Trilinear interpolation weights of one sample on a periodic grid.
struct Stencil {
    idx: [usize; 8],
    w: [f64; 8],
}

/// The oversampled grid and the samples' places on it.
struct Gridder {
    g: [usize; 3],
    stencils: Vec<Stencil>,
}

impl Gridder {
    fn new(grid: &Grid, traj: &[[f64; 3]], sigma: f64) -> Self {
        // Even grid sizes, at least sigma N.
        let g = grid
            .n
            .map(|n| 2 * ((sigma * n as f64) / 2.0).ceil() as usize);
        let stencils = traj
            .iter()
            .map(|k| {
                // grid coordinate: k_j = (j - g/2) / sigma_d
                let u =
                    [0, 1, 2].map(|d| k[d] * g[d] as f64 / grid.n[d] as f64 + g[d] as f64 / 2.0);
                let base = u.map(|v| v.floor());
                let frac = [0, 1, 2].map(|d| u[d] - base[d]);
                let mut s = Stencil {
                    idx: [0; 8],
                    w: [0.0; 8],
                };
                for c in 0..8 {
                    let off = [c & 1, (c >> 1) & 1, (c >> 2) & 1];
                    let mut idx = 0;
                    let mut w = 1.0;
                    for d in (0..3).rev() {
                        let j = (base[d] as i64 + off[d] as i64).rem_euclid(g[d] as i64) as usize;
                        idx = idx * g[d] + j;
                        w *= if off[d] == 1 { frac[d] } else { 1.0 - frac[d] };
                    }
                    s.idx[c] = idx;
                    s.w[c] = w;
                }
                s
            })
            .collect();
        Gridder { g, stencils }
    }

    fn len(&self) -> usize {
        self.g.iter().product()
    }

    /// Spreads sample values onto the grid (the adjoint of `interp`).
    fn spread(&self, values: &[Complex<f64>]) -> Vec<Complex<f64>> {
        let mut out = vec![Complex::default(); self.len()];
        for (s, v) in self.stencils.iter().zip(values) {
            for c in 0..8 {
                out[s.idx[c]] += v * s.w[c];
            }
        }
        out
    }

    /// Interpolates the grid at the samples.
    fn interp(&self, grid: &[Complex<f64>]) -> Vec<Complex<f64>> {
        self.stencils
            .iter()
            .map(|s| (0..8).map(|c| grid[s.idx[c]] * s.w[c]).sum())
            .collect()
    }

    /// Pipe-Menon density compensation with the trilinear kernel.
    fn density_weights(&self, iterations: usize) -> Vec<f64> {
        let mut w = vec![1.0; self.stencils.len()];
        for _ in 0..iterations {
            let wc: Vec<Complex<f64>> = w.iter().map(|&v| Complex::new(v, 0.0)).collect();
            let conv = self.interp(&self.spread(&wc));
            for (w, c) in w.iter_mut().zip(conv) {
                // Each sample sees at least its own weight, so c.re >= w * min kernel weight > 0.
                if c.re > 0.0 {
                    *w /= c.re;
                }
            }
        }
        w
    }
}

/// `fftshift` / `ifftshift` of an even-sized 3-D array: the same operation.
fn shift(x: &[Complex<f64>], g: [usize; 3]) -> Vec<Complex<f64>> {
    let mut out = vec![Complex::default(); x.len()];
    for z in 0..g[2] {
        let sz = (z + g[2] / 2) % g[2];
        for y in 0..g[1] {
            let sy = (y + g[1] / 2) % g[1];
            for xx in 0..g[0] {
                let sx = (xx + g[0] / 2) % g[0];
                out[(sz * g[1] + sy) * g[0] + sx] = x[(z * g[1] + y) * g[0] + xx];
            }
        }
    }
    out
}

/// The gridding reconstruction of `data` on `grid` (x fastest).
pub fn reconstruct(
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
    if !(params.oversampling.is_finite() && params.oversampling >= 1.0) {
        return Err(Error::Invalid {
            what: "gridding oversampling",
            reason: format!("must be at least 1, got {}", params.oversampling),
        });
    }
    let gr = Gridder::new(grid, traj, params.oversampling);
    let g = gr.g;
    let w = gr.density_weights(params.dcf_iterations);
    let weighted: Vec<Complex<f64>> = data.iter().zip(&w).map(|(d, w)| d * w).collect();
    // Centred inverse DFT: fftshift(IFFT(ifftshift(G))), un-normalised.
    let mut img = shift(&gr.spread(&weighted), g);
    CpuBackend::<f64>::new().fft3(&mut img, g, Direction::Inverse)?;
    let img = shift(&img, g);
    let total = gr.len() as f64; // undoes the inverse FFT's 1/len
    let sigma = [0, 1, 2].map(|d| g[d] as f64 / grid.n[d] as f64);
    let scale = total / (0..3).map(|d| sigma[d] * grid.fov_mm[d]).product::<f64>();
    let n = grid.n;
    let mut out = vec![Complex::default(); grid.len()];
    for z in 0..n[2] {
        for y in 0..n[1] {
            for x in 0..n[0] {
                let c = [x, y, z];
                // position in the oversampled, centred image
                let o = [0, 1, 2].map(|d| c[d] + (g[d] - n[d]) / 2);
                let apod: f64 = (0..3)
                    .map(|d| {
                        recon_core::sinc((c[d] as f64 - n[d] as f64 / 2.0) / g[d] as f64).powi(2)
                    })
                    .product();
                out[(z * n[1] + y) * n[0] + x] =
                    img[(o[2] * g[1] + o[1]) * g[0] + o[0]] * (scale / apod);
            }
        }
    }
    Ok(out)
}
