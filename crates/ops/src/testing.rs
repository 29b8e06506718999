//! Checks that hold for every linear operator, for tests: the adjoint
//! identity `<A x, y> = <x, A^H y>` and `normal = A^H A`, on pseudo-random
//! vectors from a fixed seed. They return relative errors, so that each
//! test states its own tolerance (f64 on the CPU, f32 on the GPU).

use crate::LinearOp;
use recon_core::{Backend, Complex, Real, Result};

/// `len` complex values with parts uniform in [-1, 1), from `seed`
/// (splitmix64: the same on every machine).
pub fn random<T: Real>(len: usize, seed: u64) -> Vec<Complex<T>> {
    let mut s = seed;
    let mut next = move || {
        s = s.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = s;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        (z >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
    };
    (0..len)
        .map(|_| Complex::new(T::of(next()), T::of(next())))
        .collect()
}

/// `|<A x, y> - <x, A^H y>| / (|A x| |y|)` for random `x` and `y`, over the
/// real and imaginary parts of the inner product (the latter by `i x`).
pub fn adjoint_error<B: Backend>(backend: &B, op: &mut dyn LinearOp<B>, seed: u64) -> Result<f64> {
    let [rows, cols] = op.shape();
    let x: Vec<Complex<B::Real>> = random(cols, seed);
    let y = backend.upload(&random::<B::Real>(rows, seed ^ 0xa5a5))?;
    let ix: Vec<_> = x.iter().map(|v| v * Complex::i()).collect();
    let mut ax = backend.zeros(rows)?;
    let mut ahy = backend.zeros(cols)?;
    op.adjoint(backend, &mut ahy, &y)?;
    let mut worst: f64 = 0.0;
    for x in [x, ix] {
        let x = backend.upload(&x)?;
        op.forward(backend, &mut ax, &x)?;
        // Re <A x, y> against Re <x, A^H y>
        let (lhs, rhs) = (backend.dot_re(&ax, &y)?, backend.dot_re(&x, &ahy)?);
        let scale = (backend.dot_re(&ax, &ax)? * backend.dot_re(&y, &y)?).sqrt();
        worst = worst.max((lhs - rhs).abs() / scale.max(f64::MIN_POSITIVE));
    }
    Ok(worst)
}

/// `|normal(x) - A^H (A x)| / |A^H (A x)|` for a random `x`.
pub fn normal_error<B: Backend>(backend: &B, op: &mut dyn LinearOp<B>, seed: u64) -> Result<f64> {
    let [rows, cols] = op.shape();
    let x = backend.upload(&random::<B::Real>(cols, seed))?;
    let mut ax = backend.zeros(rows)?;
    let mut slow = backend.zeros(cols)?;
    let mut fast = backend.zeros(cols)?;
    op.forward(backend, &mut ax, &x)?;
    op.adjoint(backend, &mut slow, &ax)?;
    op.normal(backend, &mut fast, &x)?;
    let norm = backend.dot_re(&slow, &slow)?.sqrt();
    backend.axpy(&mut fast, -1.0, &slow)?;
    Ok(backend.dot_re(&fast, &fast)?.sqrt() / norm.max(f64::MIN_POSITIVE))
}
