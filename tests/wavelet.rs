//! The wavelet prior on the CPU in float64: Daubechies' filters against
//! their defining identities, one level of the transform against the
//! explicit analysis matrix, the 3-D transform's orthonormality and
//! adjoint, its shifts and the stack of shifted transforms, the norm's
//! proximal maps against their definitions, and denoising by ADMM and PDHG
//! against the closed-form minimiser `W^H shrink(W f, lambda)` (exact for
//! one orthonormal W and the identity data term).

use crate::common;

use common::*;
use recon_cg::{admm, pdhg, Gram, Sparse, SparseParams};
use recon_core::cpu::wavelet::daubechies2;
use recon_core::{metrics::nrmse, Backend, Complex, CpuBackend};
use recon_ops::testing::{adjoint_error, normal_error, random};
use recon_ops::{shifted_wavelets, LinearOp, Norm, Wavelet, WaveletL1};

type Cpu = CpuBackend<f64>;
type V = Vec<Complex<f64>>;

fn dot(a: &V, b: &V) -> Complex<f64> {
    a.iter().zip(b).map(|(x, y)| x.conj() * y).sum()
}

#[test]
fn daubechies_filters_are_orthonormal_with_two_vanishing_moments() {
    let (h, g) = daubechies2();
    let sum = |f: &[f64; 4], p: i32| -> f64 { (0..4).map(|j| f[j] * (j as f64).powi(p)).sum() };
    // Sums of products of double-precision constants: 1e-15.
    let close = |a: f64, b: f64, what: &str| assert!((a - b).abs() < 1e-15, "{what}: {a} vs {b}");
    close(sum(&h, 0), 2f64.sqrt(), "sum h = sqrt 2");
    close(h.iter().map(|v| v * v).sum(), 1.0, "|h| = 1");
    close(
        h[0] * h[2] + h[1] * h[3],
        0.0,
        "h orthogonal to its shift by 2",
    );
    close(sum(&g, 0), 0.0, "sum g = 0");
    close(sum(&g, 1), 0.0, "sum j g_j = 0");
    close((0..4).map(|j| h[j] * g[j]).sum(), 0.0, "h orthogonal to g");
}

#[test]
fn one_level_matches_the_explicit_analysis_matrix() {
    let be = Cpu::new();
    let (h, g) = daubechies2();
    // A 3-D image, a corner, each axis: the primitive against the matrix
    // M[k][(2k + j) mod e] = h_j (k < e/2), g_j (k >= e/2) on each line of
    // the corner, identity elsewhere.
    let n = [12, 10, 8];
    let extent = [8, 10, 6];
    let len: usize = n.iter().product();
    let x: V = random(len, 11);
    for axis in 0..3 {
        let e = extent[axis];
        let mut m = vec![vec![0.0; e]; e];
        for k in 0..e / 2 {
            for j in 0..4 {
                m[k][(2 * k + j) % e] += h[j];
                m[e / 2 + k][(2 * k + j) % e] += g[j];
            }
        }
        // M M^T = I: an orthonormal level
        for a in 0..e {
            for b in 0..e {
                let v: f64 = (0..e).map(|c| m[a][c] * m[b][c]).sum();
                let want = if a == b { 1.0 } else { 0.0 };
                // sums of e products of double constants: 1e-14
                assert!((v - want).abs() < 1e-14, "M M^T at ({a}, {b}) on {e}: {v}");
            }
        }
        let stride = [1, n[0], n[0] * n[1]][axis];
        let mut fwd = be.zeros(len).unwrap();
        let mut inv = be.zeros(len).unwrap();
        be.dwt(&mut fwd, &x, n, extent, axis, false).unwrap();
        be.dwt(&mut inv, &x, n, extent, axis, true).unwrap();
        for i in 0..len {
            let c = recon_core::index3(n, i);
            let (want_f, want_i) = if (0..3).all(|a| c[a] < extent[a]) {
                let p = c[axis];
                let base = i - p * stride;
                let at = |q: usize| x[base + q * stride];
                (
                    (0..e).map(|q| at(q) * m[p][q]).sum::<Complex<f64>>(),
                    (0..e).map(|q| at(q) * m[q][p]).sum::<Complex<f64>>(),
                )
            } else {
                (x[i], x[i])
            };
            // A handful of products per value: 1e-14.
            assert!(
                (fwd[i] - want_f).norm() < 1e-14,
                "forward, axis {axis}, {c:?}"
            );
            assert!(
                (inv[i] - want_i).norm() < 1e-14,
                "inverse, axis {axis}, {c:?}"
            );
        }
    }
    // an odd extent along the axis is refused
    let mut out = be.zeros(len).unwrap();
    let e = be.dwt(&mut out, &x, n, [12, 9, 8], 1, false).unwrap_err();
    assert!(e.to_string().contains("even"), "{e}");
}

#[test]
fn a_linear_ramp_has_no_interior_detail() {
    // Two vanishing moments: the wavelet coefficients of a + b i are 0
    // wherever the filter does not wrap around the line.
    let be = Cpu::new();
    let n = [32, 1, 1];
    let x: V = (0..32)
        .map(|i| Complex::new(0.5 + 0.25 * i as f64, -1.0))
        .collect();
    let mut out = be.zeros(32).unwrap();
    be.dwt(&mut out, &x, n, n, 0, false).unwrap();
    for k in 0..15 {
        // Taps of size 8: the rounding of the sums, 1e-14.
        assert!(out[16 + k].norm() < 1e-14, "detail {k}: {}", out[16 + k]);
    }
    assert!(
        out[31].norm() > 1.0,
        "the wrapped coefficient sees the jump"
    );
}

#[test]
fn the_transform_is_orthonormal_and_its_levels_follow_the_grid() {
    let be = Cpu::new();
    for (n, corner) in [
        ([16, 16, 16], [8, 8, 8]),
        ([64, 16, 8], [8, 8, 8]),
        ([32, 24, 1], [8, 12, 1]),
        ([20, 17, 16], [10, 17, 8]),
    ] {
        let mut w = Wavelet::new(&be, n).unwrap();
        assert_eq!(w.corner(), corner, "{n:?}");
        for shift in [[0, 0, 0], [3, 1, 0], [1, 2, 1]] {
            w.set_shift(shift);
            // float64 sums over a few hundred terms: 1e-13.
            let a = adjoint_error(&be, &mut w, 5).unwrap();
            assert!(a < 1e-13, "adjoint {n:?} {shift:?}: {a:e}");
            // normal = identity = W^H W
            let e = normal_error(&be, &mut w, 6).unwrap();
            assert!(e < 1e-13, "W^H W = I {n:?} {shift:?}: {e:e}");
            // Parseval
            let x: V = random(n.iter().product(), 7);
            let mut c = be.zeros(x.len()).unwrap();
            w.forward(&be, &mut c, &x).unwrap();
            let (nx, nc) = (dot(&x, &x).re, dot(&c, &c).re);
            // Parseval in float64 over thousands of values: 1e-12 relative
            assert!((nx - nc).abs() < 1e-12 * nx, "|W x| = |x| {n:?}");
        }
    }
    let e = Wavelet::new(&be, [8, 8, 8]).err().unwrap().to_string();
    assert!(e.contains("at least 16"), "{e}");
}

#[test]
fn a_shift_rolls_the_image_before_the_transform() {
    let be = Cpu::new();
    let n = [16, 16, 16];
    let len = 4096;
    let x: V = random(len, 9);
    let s = [3, 5, 1];
    let mut w = Wavelet::new(&be, n).unwrap();
    let (mut shifted, mut rolled, mut plain) = (
        be.zeros(len).unwrap(),
        be.zeros(len).unwrap(),
        be.zeros(len).unwrap(),
    );
    w.set_shift(s);
    w.forward(&be, &mut shifted, &x).unwrap();
    be.roll(&mut rolled, &x, n, s).unwrap();
    // roll against its definition at one voxel: out[c + s] = x[c]
    let at = |c: [usize; 3]| (c[2] * n[1] + c[1]) * n[0] + c[0];
    assert_eq!(rolled[at([4, 6, 15])], x[at([1, 1, 14])]);
    assert_eq!(rolled[at([0, 2, 0])], x[at([13, 13, 15])]);
    w.set_shift([0; 3]);
    w.forward(&be, &mut plain, &rolled).unwrap();
    // the same arithmetic on the same values: equal but for rounding
    assert!(nrmse(&shifted, &plain) < 1e-15, "W_s x = W roll(x, s)");
}

/// `t ||c||_1 + |c - v|^2 / 2` over the detail coefficients.
fn prox_objective(be: &Cpu, norm: &mut WaveletL1, c: &V, v: &V, t: f64) -> f64 {
    let d: f64 = c.iter().zip(v).map(|(a, b)| (a - b).norm_sqr()).sum();
    t * norm.value(be, c).unwrap() + d / 2.0
}

#[test]
fn the_norms_proximal_maps_meet_their_definitions() {
    let be = Cpu::new();
    let n = [16, 16, 1];
    let (len, t) = (256, 0.2);
    // two stacked coefficient images
    let v: V = random(2 * len, 13);
    let mut norm = WaveletL1 {
        n,
        corner: [8, 8, 1],
    };
    let mut p = v.clone();
    norm.prox(&be, &mut p, t).unwrap();
    // p minimises the prox objective: no random step lowers it
    let best = prox_objective(&be, &mut norm, &p, &v, t);
    let mut rng = Rng::new(3);
    for _ in 0..50 {
        let step = 1e-3 * rng.next_f64();
        let d: V = random(2 * len, rng.below(1 << 30) as u64);
        let q: V = p.iter().zip(&d).map(|(a, b)| a + b * step).collect();
        let o = prox_objective(&be, &mut norm, &q, &v, t);
        assert!(
            // the objective's float64 rounding: 1e-12
            o >= best - 1e-12,
            "a step lowered the objective: {o} < {best}"
        );
    }
    // the conjugate's map projects: within t outside the corners, 0 inside
    let mut y = v.clone();
    norm.prox_conjugate(&be, &mut y, t).unwrap();
    let moreau: V = v.iter().zip(&p).map(|(a, b)| a - b).collect();
    // the same shrinkage subtracted: float64 rounding
    assert!(nrmse(&y, &moreau) < 1e-14, "Moreau's identity");
    for (i, c) in y.iter().enumerate() {
        let k = recon_core::index3(n, i % len);
        if k[0] < 8 && k[1] < 8 {
            assert!(c.norm() == 0.0, "corner coefficient {i} = {c}");
        } else {
            assert!(c.norm() <= t + 1e-14, "coefficient {i}: |{c}| > {t}");
        }
    }
    // the value: |(3, 4i)| outside the corner of the second image
    let mut x = vec![Complex::default(); 2 * len];
    x[len + 9] = Complex::new(3.0, 4.0);
    x[len] = Complex::new(100.0, 0.0); // in the corner, free
                                       // one exact term: float64 rounding
    assert!((norm.value(&be, &x).unwrap() - 5.0).abs() < 1e-15);
    assert!(
        be.shrink_outside(&mut x[..300].to_vec(), n, [8, 8, 1], t)
            .is_err(),
        "not whole images"
    );
}

#[test]
fn the_stack_of_shifted_transforms_is_orthonormal() {
    let be = Cpu::new();
    let n = [32, 16, 16];
    let len = 8192;
    for shifts in [1, 4] {
        let (mut k, norm) = shifted_wavelets(&be, n, shifts).unwrap();
        assert_eq!(k.shape(), [shifts * len, len]);
        assert_eq!(norm.corner, [8, 8, 8]);
        // K^H K = I, by the scale 1 / sqrt(S): float64 sums, 1e-13
        let a = adjoint_error(&be, &mut k, 5).unwrap();
        let e = normal_error(&be, &mut k, 6).unwrap();
        assert!(
            a < 1e-13 && e < 1e-13,
            "S = {shifts}: adjoint {a:e}, K^H K = I {e:e}"
        );
        // block 0 is the unshifted transform, and the others differ from it
        let x: V = random(len, 8);
        let mut c = be.zeros(shifts * len).unwrap();
        k.forward(&be, &mut c, &x).unwrap();
        let mut w0 = be.zeros(len).unwrap();
        Wavelet::new(&be, n)
            .unwrap()
            .forward(&be, &mut w0, &x)
            .unwrap();
        let s = (shifts as f64).sqrt();
        let block = |b: usize| -> V { c[b * len..][..len].iter().map(|v| v * s).collect() };
        // block 0 is W times 1/sqrt(S), scaled back: float64 rounding
        assert!(nrmse(&block(0), &w0) < 1e-14);
        for b in 1..shifts {
            assert!(nrmse(&block(b), &w0) > 0.1, "block {b} is shifted");
        }
    }
    assert!(shifted_wavelets(&be, n, 0).is_err());
}

#[test]
fn wavelet_denoising_by_admm_and_pdhg_matches_the_closed_form() {
    let be = Cpu::new();
    let n = [16, 16, 16];
    let len = 4096;
    // a box with noise
    let mut rng = Rng::new(17);
    let f: V = (0..len)
        .map(|i| {
            let c = recon_core::index3(n, i);
            let inside = (0..3).all(|a| (4..11).contains(&c[a]));
            Complex::new(if inside { 1.0 } else { 0.2 }, 0.0)
                + Complex::new(0.1 * rng.sym(), 0.1 * rng.sym())
        })
        .collect();
    let lambda = 0.08;
    // x* = W^H shrink(W f, lambda), the coarse corner unshrunk
    let mut w = Wavelet::new(&be, n).unwrap();
    let mut c = be.zeros(len).unwrap();
    w.forward(&be, &mut c, &f).unwrap();
    be.shrink_outside(&mut c, n, w.corner(), lambda).unwrap();
    let mut exact = be.zeros(len).unwrap();
    w.adjoint(&be, &mut exact, &c).unwrap();
    let params = SparseParams {
        iterations: 3000,
        tolerance: 1e-10,
        ..Default::default()
    };
    for pd in [false, true] {
        let (mut op, mut norm) = shifted_wavelets(&be, n, 1).unwrap();
        let prior = Sparse {
            op: &mut op,
            norm: &mut norm,
            lambda,
            gram: Gram::Identity,
        };
        let mut x = be.zeros(len).unwrap();
        let mut eye = Eye(len);
        let info = if pd {
            pdhg(&be, &mut eye, prior, &mut x, &f, &params, &mut |_, _| {}).unwrap()
        } else {
            admm(
                &be,
                &mut eye,
                prior,
                &mut x,
                &f,
                1.0,
                None,
                &params,
                &mut |_, _| {},
            )
            .unwrap()
        };
        let err = nrmse(&x, &exact);
        // Stopped at relative residuals of 1e-10; the minimiser is 1-strongly
        // convex, so x lies within about that of it.
        assert!(
            err < 1e-7,
            "pdhg {pd}: {err:e} after {} iterations",
            info.iterations
        );
    }
}
