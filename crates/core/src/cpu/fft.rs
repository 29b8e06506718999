//! 3-D FFTs on the CPU: one rustfft plan per axis length, applied along each
//! axis in parallel by ndrustfft.

use crate::backend::Direction;
use crate::{Complex, Real};
use ndarray::ArrayViewMut3;
use ndrustfft::{ndfft_par, ndifft_par, FftHandler};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Caches one handler (forward and inverse plan) per axis length, and the
/// scratch grid of the out-of-place passes, so that CG iterations allocate
/// nothing.
pub struct Planner<T: Real> {
    plans: Mutex<HashMap<usize, Arc<FftHandler<T>>>>,
    scratch: Mutex<Vec<Complex<T>>>,
}

impl<T: Real> Default for Planner<T> {
    fn default() -> Self {
        Planner {
            plans: Mutex::new(HashMap::new()),
            scratch: Mutex::new(Vec::new()),
        }
    }
}

impl<T: Real> Planner<T> {
    fn handler(&self, n: usize) -> Arc<FftHandler<T>> {
        let mut plans = self.plans.lock().expect("FFT plan cache poisoned");
        plans
            .entry(n)
            .or_insert_with(|| Arc::new(FftHandler::new(n)))
            .clone()
    }

    /// In-place 3-D FFT of `x` (`shape = [nx, ny, nz]`, x fastest). The
    /// inverse is normalised by `1 / (nx ny nz)`.
    pub fn fft3(&self, x: &mut [Complex<T>], shape: [usize; 3], dir: Direction) {
        let [nx, ny, nz] = shape;
        // Every element is overwritten by the first pass: no zeroing needed.
        let mut scratch = self.scratch.lock().expect("FFT scratch poisoned");
        scratch.resize(x.len(), Complex::default());
        let mut a = ArrayViewMut3::from_shape((nz, ny, nx), x).expect("shape checked by caller");
        let mut b = ArrayViewMut3::from_shape((nz, ny, nx), &mut scratch[..])
            .expect("shape checked by caller");
        // ndarray axes: 0 = z, 1 = y, 2 = x. Ping-pong between a and b.
        let lens = [nz, ny, nx];
        for (pass, axis) in [2usize, 1, 0].into_iter().enumerate() {
            let h = self.handler(lens[axis]);
            let (src, dst) = if pass % 2 == 0 {
                (&a, &mut b)
            } else {
                (&b, &mut a)
            };
            match dir {
                Direction::Forward => ndfft_par(src, dst, &*h, axis),
                Direction::Inverse => ndifft_par(src, dst, &*h, axis),
            }
        }
        // Three passes end in b.
        a.assign(&b);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The naive 3-D DFT, straight from its definition.
    fn naive_dft(x: &[Complex<f64>], shape: [usize; 3], sign: f64) -> Vec<Complex<f64>> {
        let [nx, ny, nz] = shape;
        let mut out = vec![Complex::default(); x.len()];
        for kz in 0..nz {
            for ky in 0..ny {
                for kx in 0..nx {
                    let mut acc = Complex::default();
                    for z in 0..nz {
                        for y in 0..ny {
                            for xx in 0..nx {
                                let ph = sign
                                    * std::f64::consts::TAU
                                    * ((kx * xx) as f64 / nx as f64
                                        + (ky * y) as f64 / ny as f64
                                        + (kz * z) as f64 / nz as f64);
                                acc += x[(z * ny + y) * nx + xx] * Complex::from_polar(1.0, ph);
                            }
                        }
                    }
                    out[(kz * ny + ky) * nx + kx] = acc;
                }
            }
        }
        out
    }

    #[test]
    fn fft3_matches_naive_dft_on_a_non_cubic_shape() {
        let shape = [6, 4, 10];
        let x: Vec<Complex<f64>> = (0..240)
            .map(|i| Complex::new((i as f64 * 0.37).sin(), (i as f64 * 0.11).cos()))
            .collect();
        let p = Planner::<f64>::default();
        let mut y = x.clone();
        p.fft3(&mut y, shape, Direction::Forward);
        let want = naive_dft(&x, shape, -1.0);
        // f64 rounding over 240-term sums: far below 1e-12 relative.
        assert!(crate::metrics::nrmse(&y, &want) < 1e-12);
        p.fft3(&mut y, shape, Direction::Inverse);
        assert!(crate::metrics::nrmse(&y, &x) < 1e-12);
    }
}
