//! The CPU's primitives of the wavelet prior: one level of the periodic
//! Daubechies-2 transform along one axis, the circular shift and the
//! soft thresholding outside the coarse corner (see the
//! [`Backend`](crate::Backend) methods of the same names).

use crate::{index3, Complex, Error, Real, Result};
use rayon::prelude::*;

/// Daubechies' orthonormal 4-tap scaling filter (Daubechies 1988):
/// `h = (1 + s3, 3 + s3, 3 - s3, 1 - s3) / (4 sqrt 2)`, `s3 = sqrt 3`. The
/// wavelet filter is its quadrature mirror, `g_j = (-1)^j h_{3 - j}`.
pub fn daubechies2() -> ([f64; 4], [f64; 4]) {
    let s3 = 3f64.sqrt();
    let d = 4.0 * 2f64.sqrt();
    let h = [
        (1.0 + s3) / d,
        (3.0 + s3) / d,
        (3.0 - s3) / d,
        (1.0 - s3) / d,
    ];
    (h, [h[3], -h[2], h[1], -h[0]])
}

/// Checks a corner `extent` of the grid `n`: within it, positive, and even
/// along `axis` where one is given.
pub fn check_extent(n: [usize; 3], extent: [usize; 3], axis: Option<usize>) -> Result<()> {
    let bad = (0..3).any(|a| extent[a] == 0 || extent[a] > n[a])
        || axis.is_some_and(|a| a > 2 || !extent[a].is_multiple_of(2));
    if bad {
        return Err(Error::Invalid {
            what: "wavelet level",
            reason: format!(
                "corner {extent:?} of the grid {n:?} (axis {axis:?}): each extent must lie in 1..=n \
                 and be even along the transformed axis"
            ),
        });
    }
    Ok(())
}

/// One level along `axis` of the corner `extent` of `x` (shape `n`):
/// forward, `out[k] = sum_j h_j x[2k + j]` in the corner's first half along
/// the axis and `sum_j g_j x[2k + j]` in its second (indices periodic in
/// the corner); inverse, the synthesis `x[p] = sum_k h_{p - 2k} lo[k] +
/// g_{p - 2k} hi[k]`, the transpose. Outside the corner `out = x`.
pub fn dwt<T: Real>(
    out: &mut [Complex<T>],
    x: &[Complex<T>],
    n: [usize; 3],
    extent: [usize; 3],
    axis: usize,
    inverse: bool,
) -> Result<()> {
    let len = n.iter().product::<usize>();
    Error::check_len("wavelet input", len, x.len())?;
    Error::check_len("wavelet output", len, out.len())?;
    check_extent(n, extent, Some(axis))?;
    let (h, g) = daubechies2();
    let stride = [1, n[0], n[0] * n[1]];
    let (e, half) = (extent[axis], extent[axis] / 2);
    // The corner's lines along `axis`, by their first point.
    let [a1, a2] = match axis {
        0 => [1, 2],
        1 => [0, 2],
        _ => [0, 1],
    };
    let starts: Vec<usize> = (0..extent[a2])
        .flat_map(|j| (0..extent[a1]).map(move |i| i * stride[a1] + j * stride[a2]))
        .collect();
    // Each line transformed into its own stretch of `lines`, in parallel.
    let mut lines = vec![Complex::<T>::default(); starts.len() * e];
    let s = stride[axis];
    lines
        .par_chunks_mut(e)
        .zip(starts.par_iter())
        .for_each(|(line, &base)| {
            let at = |q: usize| {
                let v = x[base + q * s];
                Complex::new(v.re.f64(), v.im.f64())
            };
            for (p, o) in line.iter_mut().enumerate() {
                let mut acc = Complex::<f64>::default();
                if !inverse {
                    // lo (p < half) or hi (p >= half) coefficient k
                    let (f, k) = if p < half { (&h, p) } else { (&g, p - half) };
                    for (j, w) in f.iter().enumerate() {
                        acc += at((2 * k + j) % e) * *w;
                    }
                } else {
                    // taps j of p's parity: p = 2k + j (mod e)
                    for j in (p % 2..4).step_by(2) {
                        let k = ((p + e - j % e) % e) / 2;
                        acc += at(k) * h[j] + at(half + k) * g[j];
                    }
                }
                *o = Complex::new(T::of(acc.re), T::of(acc.im));
            }
        });
    // out = x outside the corner, the transformed lines inside it
    out.copy_from_slice(x);
    for (line, &base) in lines.chunks(e).zip(&starts) {
        for (p, v) in line.iter().enumerate() {
            out[base + p * s] = *v;
        }
    }
    Ok(())
}

/// `out[(c + shift) mod n] = x[c]`: the circular shift.
pub fn roll<T: Real>(
    out: &mut [Complex<T>],
    x: &[Complex<T>],
    n: [usize; 3],
    shift: [usize; 3],
) -> Result<()> {
    let len = n.iter().product::<usize>();
    Error::check_len("shift input", len, x.len())?;
    Error::check_len("shift output", len, out.len())?;
    out.par_iter_mut().enumerate().for_each(|(i, o)| {
        // o sits at c; it takes x at c - shift
        let c = index3(n, i);
        let s: [usize; 3] = std::array::from_fn(|a| (c[a] + n[a] - shift[a] % n[a]) % n[a]);
        *o = x[(s[2] * n[1] + s[1]) * n[0] + s[0]];
    });
    Ok(())
}

/// Soft thresholding by `t` of every value outside the corner `corner` of
/// each image (of shape `n`) of `x`, whose length is a multiple of the
/// image's: `v = max(0, 1 - t / |v|) v`; the corners (the coarsest scaling
/// coefficients) are left as they are.
pub fn shrink_outside<T: Real>(
    x: &mut [Complex<T>],
    n: [usize; 3],
    corner: [usize; 3],
    t: f64,
) -> Result<()> {
    let len = check_images(x.len(), n)?;
    check_extent(n, corner, None)?;
    x.par_iter_mut().enumerate().for_each(|(i, v)| {
        let c = index3(n, i % len);
        if (0..3).any(|a| c[a] >= corner[a]) {
            let f = crate::cpu::sparse::group_factor(v.norm().f64(), t, crate::GroupProx::Shrink);
            *v = *v * T::of(f);
        }
    });
    Ok(())
}

/// The image length of the grid `n`, unless `len` values are not a whole
/// number (one or more) of its images.
pub fn check_images(len: usize, n: [usize; 3]) -> Result<usize> {
    let image: usize = n.iter().product();
    if image == 0 || len == 0 || !len.is_multiple_of(image) {
        return Err(Error::Invalid {
            what: "wavelet coefficients",
            reason: format!("{len} values are not a whole number of {n:?} images"),
        });
    }
    Ok(image)
}
