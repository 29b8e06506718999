//! The CPU's Toeplitz product `out = crop(IFFT(fq . FFT(pad(x))))`, pruned:
//! the FFTs skip the lines that padding leaves zero and the lines that the
//! crop throws away, and the product with FFT(Q) rides inside the z pass.
//!
//! On the `2n` grid (x fastest), with `n` the image:
//! 1. x: the `n_y n_z` rows that hold the image, padded and transformed;
//! 2. y: the `2n_x` columns of each of the first `n_z` planes;
//! 3. z: every `(x, y)` line, read from the first `n_z` planes (the rest
//!    is zero), transformed, multiplied by FFT(Q), transformed back, and
//!    only its first `n_z` values kept;
//! 4. y, inverse: the same columns, keeping their first `n_y` values;
//! 5. x, inverse: the `n_y n_z` rows, whose first `n_x` values are the
//!    output.
//!
//! That is 28 n^3 points of line FFTs against the 48 n^3 of two full 3-D
//! FFTs, and no separate passes for padding, the product or the crop.

use super::fft::{columns, z_lines, Plan3};
use crate::{Complex, Real};
use rayon::prelude::*;

/// The pruned product by `plan`, the line FFTs of the `2n` grid; lengths
/// are checked by the caller. `work` is the `(2n)^3` grid, `fq` FFT(Q) on it.
pub fn toeplitz<T: Real>(
    plan: &Plan3<T>,
    out: &mut [Complex<T>],
    x: &[Complex<T>],
    fq: &[Complex<T>],
    work: &mut [Complex<T>],
) {
    let d = plan.shape;
    let n = crate::undoubled(d);
    let plane = d[0] * d[1];
    let zero = Complex::<T>::default();
    let [fx, fy, fz] = &plan.forward;
    let [ix, iy, iz] = &plan.inverse;

    // 1. x rows of the image, padded: planes z < n_z, rows y < n_y.
    work[..n[2] * plane]
        .par_chunks_mut(plane)
        .enumerate()
        .for_each(|(z, p)| {
            let mut scratch = vec![zero; fx.get_inplace_scratch_len()];
            for y in 0..n[1] {
                let row = &mut p[y * d[0]..][..d[0]];
                row[..n[0]].copy_from_slice(&x[(z * n[1] + y) * n[0]..][..n[0]]);
                row[n[0]..].fill(zero);
                fx.process_with_scratch(row, &mut scratch);
            }
        });

    // 2. y columns of the planes z < n_z (rows y >= n_y are zero).
    columns(&mut work[..n[2] * plane], d, fy.as_ref(), n[1], d[1]);

    // 3. z lines: zero beyond n_z, forward, times FFT(Q), inverse, keep n_z.
    let scratch_len = fz
        .get_inplace_scratch_len()
        .max(iz.get_inplace_scratch_len());
    z_lines(work, d, n[2], n[2], scratch_len, |y, x, line, scratch| {
        fz.process_with_scratch(line, scratch);
        for (z, v) in line.iter_mut().enumerate() {
            *v = *v * fq[z * plane + y * d[0] + x];
        }
        iz.process_with_scratch(line, scratch);
    });

    // 4. y columns back, keeping y < n_y.
    columns(&mut work[..n[2] * plane], d, iy.as_ref(), d[1], n[1]);

    // 5. x rows back; the first n_x values, scaled by 1 / (8 n^3), are out.
    let scale = T::of(1.0 / (d[0] * d[1] * d[2]) as f64);
    out.par_chunks_mut(n[0] * n[1])
        .zip(work[..n[2] * plane].par_chunks_mut(plane))
        .for_each(|(o, p)| {
            let mut scratch = vec![zero; ix.get_inplace_scratch_len()];
            for y in 0..n[1] {
                let row = &mut p[y * d[0]..][..d[0]];
                ix.process_with_scratch(row, &mut scratch);
                for (o, v) in o[y * n[0]..][..n[0]].iter_mut().zip(&row[..n[0]]) {
                    *o = *v * scale;
                }
            }
        });
}
