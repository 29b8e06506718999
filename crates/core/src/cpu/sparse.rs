//! The CPU's primitives of the sparse priors: finite differences, their
//! adjoint, group shrinkage and directional projection (see the
//! [`Backend`](crate::Backend) methods of the same names).

use crate::backend::GroupProx;
use crate::{index3, Complex, Error, Real, Result};
use rayon::prelude::*;

/// `out[a][i] = x[i + e_a] - x[i]`, 0 on the last plane along `a`.
pub fn grad<T: Real>(out: &mut [Complex<T>], x: &[Complex<T>], n: [usize; 3]) -> Result<()> {
    let len = n.iter().product::<usize>();
    Error::check_len("gradient input", len, x.len())?;
    Error::check_len("gradient output (3 per voxel)", 3 * len, out.len())?;
    let stride = [1, n[0], n[0] * n[1]];
    out.par_chunks_mut(len).enumerate().for_each(|(a, part)| {
        part.par_iter_mut().enumerate().for_each(|(i, o)| {
            let c = index3(n, i);
            *o = if c[a] + 1 < n[a] {
                x[i + stride[a]] - x[i]
            } else {
                Complex::default()
            };
        });
    });
    Ok(())
}

/// `out[i] = sum_a y[a][i - e_a] - y[a][i]`, each term where its difference
/// exists: the adjoint of [`grad`].
pub fn grad_adjoint<T: Real>(
    out: &mut [Complex<T>],
    y: &[Complex<T>],
    n: [usize; 3],
) -> Result<()> {
    let len = n.iter().product::<usize>();
    Error::check_len("gradient adjoint input (3 per voxel)", 3 * len, y.len())?;
    Error::check_len("gradient adjoint output", len, out.len())?;
    let stride = [1, n[0], n[0] * n[1]];
    out.par_iter_mut().enumerate().for_each(|(i, o)| {
        let c = index3(n, i);
        let mut acc = Complex::<T>::default();
        for a in 0..3 {
            let y = &y[a * len..][..len];
            if c[a] > 0 {
                acc = acc + y[i - stride[a]];
            }
            if c[a] + 1 < n[a] {
                acc = acc - y[i];
            }
        }
        *o = acc;
    });
    Ok(())
}

/// Shrinks or projects each group of `components` values (see
/// [`GroupProx`]).
pub fn group_prox<T: Real>(
    x: &mut [Complex<T>],
    t: f64,
    components: usize,
    kind: GroupProx,
) -> Result<()> {
    check_groups(x.len(), components)?;
    let len = x.len() / components;
    // Each group's components are `len` apart: gather the factor per group
    // first, then scale each component plane by it.
    let factor: Vec<T> = (0..len)
        .into_par_iter()
        .map(|i| {
            let norm2: f64 = (0..components)
                .map(|a| x[a * len + i].norm_sqr().f64())
                .sum();
            T::of(group_factor(norm2.sqrt(), t, kind))
        })
        .collect();
    x.par_chunks_mut(len).for_each(|part| {
        part.iter_mut().zip(&factor).for_each(|(v, &f)| *v = *v * f);
    });
    Ok(())
}

/// The factor [`GroupProx`] multiplies a group of norm `norm` by.
pub fn group_factor(norm: f64, t: f64, kind: GroupProx) -> f64 {
    match kind {
        GroupProx::Shrink if norm > t => 1.0 - t / norm,
        GroupProx::Shrink => 0.0,
        GroupProx::Project if norm > t => t / norm,
        GroupProx::Project => 1.0,
    }
}

/// Fails unless `len` values split into groups of `components`.
pub fn check_groups(len: usize, components: usize) -> Result<()> {
    if components == 0 || !len.is_multiple_of(components) {
        return Err(Error::Invalid {
            what: "group shrinkage",
            reason: format!("{len} values do not split into groups of {components}"),
        });
    }
    Ok(())
}

/// `v = v - xi (xi . v)` per voxel, `xi` real.
pub fn project_off<T: Real>(v: &mut [Complex<T>], xi: &[Complex<T>]) -> Result<()> {
    Error::check_len("directional field", xi.len(), v.len())?;
    check_groups(v.len(), 3)?;
    let len = v.len() / 3;
    let (vx, rest) = v.split_at_mut(len);
    let (vy, vz) = rest.split_at_mut(len);
    let (xx, xy, xz) = (&xi[..len], &xi[len..2 * len], &xi[2 * len..]);
    vx.par_iter_mut()
        .zip(vy.par_iter_mut().zip(vz.par_iter_mut()))
        .enumerate()
        .for_each(|(i, (a, (b, c)))| {
            let (ex, ey, ez) = (xx[i].re, xy[i].re, xz[i].re);
            // p = xi . v (xi real, so the dot product takes no conjugate)
            let p = *a * ex + *b * ey + *c * ez;
            *a = *a - p * ex;
            *b = *b - p * ey;
            *c = *c - p * ez;
        });
    Ok(())
}
