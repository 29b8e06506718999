//! FFTs on the CPU by passes of line FFTs (rustfft), one plan per line
//! length and direction: rows along x in place, then columns along y and
//! lines along z gathered a block of x at a time into contiguous buffers,
//! so that every read uses whole cache lines. The pruned Toeplitz product
//! (toeplitz.rs) runs the same passes on part of its grid.

use crate::backend::Direction;
use crate::{Complex, Real};
use rayon::prelude::*;
use rustfft::{Fft, FftPlanner};
use std::sync::Arc;

/// The line FFTs of one 3-D shape, forward and inverse per axis: a
/// backend's [`Backend::Fft`](crate::Backend::Fft), made once by the
/// operator that runs them (the pruned Toeplitz product's is of the `2n`
/// grid).
pub struct Plan3<T: Real> {
    pub(crate) shape: [usize; 3],
    pub(crate) forward: [Arc<dyn Fft<T>>; 3],
    pub(crate) inverse: [Arc<dyn Fft<T>>; 3],
}

impl<T: Real> Plan3<T> {
    pub fn new(shape: [usize; 3]) -> Self {
        let mut planner = FftPlanner::new();
        Plan3 {
            shape,
            forward: shape.map(|l| planner.plan_fft_forward(l)),
            inverse: shape.map(|l| planner.plan_fft_inverse(l)),
        }
    }

    pub fn shape(&self) -> [usize; 3] {
        self.shape
    }

    /// In-place 3-D FFT of `x` (of the plan's shape, x fastest). The
    /// inverse is normalised by `1 / (nx ny nz)`.
    pub fn fft3(&self, x: &mut [Complex<T>], dir: Direction) {
        let plans = match dir {
            Direction::Forward => &self.forward,
            Direction::Inverse => &self.inverse,
        };
        fft3(plans, x, self.shape, dir == Direction::Inverse)
    }
}

/// Columns gathered together in the y and z passes: enough contiguous
/// values per row read to use the cache lines.
const BLOCK: usize = 16;

/// FFTs along y of every column of each plane in `planes` (`d[0] x d[1]`
/// each), reading the first `read` values of a column (the rest taken as
/// zero) and writing back the first `write`.
pub(crate) fn columns<T: Real>(
    planes: &mut [Complex<T>],
    d: [usize; 3],
    fft: &dyn Fft<T>,
    read: usize,
    write: usize,
) {
    let zero = Complex::<T>::default();
    planes.par_chunks_mut(d[0] * d[1]).for_each(|p| {
        let mut buf = vec![zero; BLOCK * d[1]];
        let mut scratch = vec![zero; fft.get_inplace_scratch_len()];
        for x0 in (0..d[0]).step_by(BLOCK) {
            let cols = BLOCK.min(d[0] - x0);
            for y in 0..d[1] {
                for c in 0..cols {
                    buf[c * d[1] + y] = if y < read { p[y * d[0] + x0 + c] } else { zero };
                }
            }
            for c in 0..cols {
                fft.process_with_scratch(&mut buf[c * d[1]..][..d[1]], &mut scratch);
            }
            for y in 0..write {
                for c in 0..cols {
                    p[y * d[0] + x0 + c] = buf[c * d[1] + y];
                }
            }
        }
    });
}

/// Applies `f(y, x, line, scratch)` to every z line of the grid `g` (shape
/// `d`), the line holding the first `read` values (zero beyond) and its
/// first `write` values stored back; in parallel over y, a block of x at a
/// time.
pub(crate) fn z_lines<T: Real>(
    g: &mut [Complex<T>],
    d: [usize; 3],
    read: usize,
    write: usize,
    scratch_len: usize,
    f: impl Fn(usize, usize, &mut [Complex<T>], &mut [Complex<T>]) + Sync,
) {
    let zero = Complex::<T>::default();
    let plane = d[0] * d[1];
    let g = SharedMut(g.as_mut_ptr());
    (0..d[1]).into_par_iter().for_each(|y| {
        let g = &g;
        let mut buf = vec![zero; BLOCK * d[2]];
        let mut scratch = vec![zero; scratch_len];
        for x0 in (0..d[0]).step_by(BLOCK) {
            let cols = BLOCK.min(d[0] - x0);
            for z in 0..d[2] {
                for c in 0..cols {
                    buf[c * d[2] + z] = if z < read {
                        // SAFETY: each task reads and writes only its own y
                        // row of every plane, within the grid.
                        unsafe { *g.0.add(z * plane + y * d[0] + x0 + c) }
                    } else {
                        zero
                    };
                }
            }
            for c in 0..cols {
                f(y, x0 + c, &mut buf[c * d[2]..][..d[2]], &mut scratch);
            }
            for z in 0..write {
                for c in 0..cols {
                    // SAFETY: as above.
                    unsafe { *g.0.add(z * plane + y * d[0] + x0 + c) = buf[c * d[2] + z] };
                }
            }
        }
    });
}

/// The in-place 3-D FFT of `x` (shape `d`, x fastest) by line passes; the
/// inverse is normalised by `1 / len`.
fn fft3<T: Real>(plans: &[Arc<dyn Fft<T>>; 3], x: &mut [Complex<T>], d: [usize; 3], inverse: bool) {
    let zero = Complex::<T>::default();
    let [fx, fy, fz] = plans;
    x.par_chunks_mut(d[0] * d[1]).for_each(|p| {
        let mut scratch = vec![zero; fx.get_inplace_scratch_len()];
        for row in p.chunks_exact_mut(d[0]) {
            fx.process_with_scratch(row, &mut scratch);
        }
    });
    columns(x, d, fy.as_ref(), d[1], d[1]);
    let scale = T::of(1.0 / (d[0] * d[1] * d[2]) as f64);
    z_lines(
        x,
        d,
        d[2],
        d[2],
        fz.get_inplace_scratch_len(),
        |_, _, line, scratch| {
            fz.process_with_scratch(line, scratch);
            if inverse {
                line.iter_mut().for_each(|v| *v = *v * scale);
            }
        },
    );
}

/// A pointer the z pass's tasks share; each touches only its own y row.
struct SharedMut<T>(*mut T);
unsafe impl<T> Sync for SharedMut<T> {}
unsafe impl<T> Send for SharedMut<T> {}

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
        let p = Plan3::<f64>::new(shape);
        let mut y = x.clone();
        p.fft3(&mut y, Direction::Forward);
        let want = naive_dft(&x, shape, -1.0);
        // f64 rounding over 240-term sums: far below 1e-12 relative.
        assert!(crate::metrics::nrmse(&y, &want) < 1e-12);
        p.fft3(&mut y, Direction::Inverse);
        assert!(crate::metrics::nrmse(&y, &x) < 1e-12);
    }
}
