//! [`Backend`] maps composed from its other maps: the defaults a backend
//! without a fused kernel uses.

use super::{Backend, CoilOp, Direction};
use crate::{Complex, Error, Result};

/// [`Backend::fft_q`] by a shift on the host, an upload and `fft3`.
pub fn fft_q_by_pieces<B: Backend + ?Sized>(
    backend: &B,
    q: &[Complex<B::Real>],
    d: [usize; 3],
) -> Result<B::Vector> {
    Error::check_len("Q (2N)^3", d[0] * d[1] * d[2], q.len())?;
    // ifftshift: Qc[m] = Q[(m + N) mod 2N] along each axis, a whole row
    // (two contiguous halves) at a time.
    let mut qc = vec![Complex::default(); q.len()];
    let (row, half) = (d[0], d[0] / 2);
    for (r, out) in qc.chunks_exact_mut(row).enumerate() {
        let (y, z) = (r % d[1], r / d[1]);
        let (sy, sz) = ((y + d[1] / 2) % d[1], (z + d[2] / 2) % d[2]);
        let src = &q[(sz * d[1] + sy) * row..][..row];
        out[..row - half].copy_from_slice(&src[half..]);
        out[row - half..].copy_from_slice(&src[..half]);
    }
    let mut fq = backend.upload(&qc)?;
    // Once per trajectory: the plan is not kept.
    let plan = backend.fft_plan(d)?;
    backend.fft3(&plan, &mut fq, Direction::Forward)?;
    Ok(fq)
}

/// [`Backend::toeplitz`] from its pieces: pad, FFT by `fft` (the plan of
/// the `2n` grid), product, inverse FFT, crop.
pub fn toeplitz_by_pieces<B: Backend + ?Sized>(
    backend: &B,
    fft: &B::Fft,
    out: &mut B::Vector,
    x: &B::Vector,
    fq: &B::Vector,
    work: &mut B::Vector,
    n: [usize; 3],
) -> Result<()> {
    // out = crop(IFFT(FFT(Q) . FFT(pad(x))))
    backend.pad(work, x, n)?;
    backend.fft3(fft, work, Direction::Forward)?;
    backend.mul(work, fq)?;
    backend.fft3(fft, work, Direction::Inverse)?;
    backend.crop(out, work, n)
}

/// [`Backend::toeplitz_dot`] from its pieces: the product, then the
/// prior's pass with the dot ([`Backend::add_whw_dot_to`]), or the dot
/// alone.
#[allow(clippy::too_many_arguments)]
pub fn toeplitz_dot_by_pieces<B: Backend + ?Sized>(
    backend: &B,
    plan: &B::ToeplitzPlan,
    out: &mut B::Vector,
    x: &B::Vector,
    fq: &B::Vector,
    work: &mut B::Vector,
    prior: Option<(f64, &B::Weights)>,
    s: &mut B::Scalars,
    slot: usize,
) -> Result<()> {
    // out = T x (+ a W^H W x), s[slot] = Re <x, out>
    backend.toeplitz(plan, out, x, fq, work)?;
    match prior {
        Some((a, w)) => backend.add_whw_dot_to(out, a, x, w, s, slot),
        None => backend.dot_re_to(s, slot, x, out),
    }
}

/// [`Backend::toeplitz_coil`] from its pieces: `y = s . x`, `ty = T y`,
/// `out (+)= conj(s) . ty`.
#[allow(clippy::too_many_arguments)]
pub fn toeplitz_coil_by_pieces<B: Backend + ?Sized>(
    backend: &B,
    plan: &B::ToeplitzPlan,
    out: &mut B::Vector,
    accumulate: bool,
    s: &B::Vector,
    x: &B::Vector,
    fq: &B::Vector,
    work: &mut B::Vector,
    (y, ty): (&mut B::Vector, &mut B::Vector),
) -> Result<()> {
    backend.coil(y, CoilOp::Forward, s, x)?;
    backend.toeplitz(plan, ty, y, fq, work)?;
    let op = if accumulate {
        CoilOp::AddAdjoint
    } else {
        CoilOp::Adjoint
    };
    backend.coil(out, op, s, ty)
}
