//! The NUFFT against direct sums, its adjoint, and bad settings.

use super::*;

/// A fixed pseudo-random stream (SplitMix64).
struct Rng(u64);
impl Rng {
    fn f(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
    }
    fn sym(&mut self) -> f64 {
        2.0 * self.f() - 1.0
    }
}

/// The modes `-M/2 .. M/2` per axis, x fastest, as the plans store them.
fn modes_of(m: [usize; 3]) -> Vec<[f64; 3]> {
    let centred = |i: usize, d: usize| i as f64 - (m[d] / 2) as f64;
    let mut v = Vec::new();
    for z in 0..m[2] {
        for y in 0..m[1] {
            for x in 0..m[0] {
                v.push([centred(x, 0), centred(y, 1), centred(z, 2)]);
            }
        }
    }
    v
}

fn rel_l2(a: &[Complex<f64>], b: &[Complex<f64>]) -> f64 {
    let num: f64 = a.iter().zip(b).map(|(x, y)| (x - y).norm_sqr()).sum();
    let den: f64 = b.iter().map(|y| y.norm_sqr()).sum();
    (num / den).sqrt()
}

fn direct(ks: &[[f64; 3]], x: &[[f64; 3]], c: &[Complex<f64>], sign: f64) -> Vec<Complex<f64>> {
    ks.iter()
        .map(|k| {
            x.iter()
                .zip(c)
                .map(|(p, v)| {
                    let ph = sign * (k[0] * p[0] + k[1] * p[1] + k[2] * p[2]);
                    v * Complex::new(ph.cos(), ph.sin())
                })
                .sum()
        })
        .collect()
}

/// `n` random points in [-pi, pi)^3 with random strengths, and the
/// modes of `m` with random coefficients.
#[allow(clippy::type_complexity)]
fn problem(
    seed: u64,
    m: [usize; 3],
    n: usize,
) -> (
    Vec<[f64; 3]>,
    Vec<Complex<f64>>,
    Vec<[f64; 3]>,
    Vec<Complex<f64>>,
) {
    let mut rng = Rng(seed);
    let x = (0..n)
        .map(|_| [0, 1, 2].map(|_| std::f64::consts::PI * rng.sym()))
        .collect();
    let c = (0..n).map(|_| Complex::new(rng.sym(), rng.sym())).collect();
    let ks = modes_of(m);
    let f = (0..ks.len())
        .map(|_| Complex::new(rng.sym(), rng.sym()))
        .collect();
    (x, c, ks, f)
}

/// The relative L2 errors of `plan`'s type 1 of `c` and type 2 of `f`
/// at `x` against `want1` and `want2`.
fn errors(
    plan: &mut Plan<f64>,
    x: &[[f64; 3]],
    (c, want1): (&[Complex<f64>], &[Complex<f64>]),
    (f, want2): (&[Complex<f64>], &[Complex<f64>]),
) -> (f64, f64) {
    plan.set_points(x).unwrap();
    let mut got1 = vec![Complex::default(); want1.len()];
    plan.type1(&mut got1, c).unwrap();
    let mut got2 = vec![Complex::default(); want2.len()];
    plan.type2(&mut got2, f).unwrap();
    (rel_l2(&got1, want1), rel_l2(&got2, want2))
}

#[test]
fn type1_and_type2_meet_the_tolerance_against_direct_sums() {
    // Non-cubic, with an odd axis.
    let m = [10, 7, 12];
    let (x, c, ks, f) = problem(3, m, 300);
    for sign in [1, -1] {
        let want1 = direct(&ks, &x, &c, sign as f64);
        let want2 = direct(&x, &ks, &f, sign as f64);
        for tol in [1e-2, 1e-3, 1e-6, 1e-9, 1e-12] {
            let mut plan = Plan::new(m, tol, sign).unwrap();
            let (e1, e2) = errors(&mut plan, &x, (&c, &want1), (&f, &want2));
            // The kernel's width is chosen for the tolerance: the
            // relative L2 error stays below it (measured: 0.08 to 0.28 of
            // it; FINUFFT's one-cell-narrower kernel gave 1 to 3 times).
            assert!(e1 < tol, "type 1, sign {sign}, tol {tol:e}: {e1:e}");
            assert!(e2 < tol, "type 2, sign {sign}, tol {tol:e}: {e2:e}");
        }
    }
}

#[test]
fn a_fine_grid_of_one_and_a_half_times_the_modes_meets_the_tolerance() {
    // Lengths that make each axis 1.5 times its modes (odd modes too).
    let m = [16, 12, 21];
    let lengths = [24, 18, 32, 48];
    let (x, c, ks, f) = problem(5, m, 300);
    let want1 = direct(&ks, &x, &c, 1.0);
    let want2 = direct(&x, &ks, &f, 1.0);
    for tol in [1e-1, 1e-2, 1e-3, 1e-4, 1e-5, 1e-6] {
        let up = crate::Upsampling::ThreeHalves(&lengths);
        let mut plan = Plan::with_upsampling(m, tol, 1, up).unwrap();
        // (At least twice the kernel's width: at 1e-6, 10 cells.)
        let want = [24, 18, 32].map(|l: usize| l.max(2 * plan.kernel.width));
        assert_eq!(plan.fine, want, "tol {tol:e}");
        let (e1, e2) = errors(&mut plan, &x, (&c, &want1), (&f, &want2));
        eprintln!(
            "sigma 1.5 tol {tol:e} width {}: {e1:e} {e2:e}",
            plan.kernel.width
        );
        // The kernel's width is chosen for the least ratio (here 1.5): the
        // relative L2 error stays below the tolerance.
        assert!(e1 < tol, "type 1, tol {tol:e}: {e1:e}");
        assert!(e2 < tol, "type 2, tol {tol:e}: {e2:e}");
    }
}

#[test]
fn flat_plans_of_one_z_mode_meet_the_tolerance_against_direct_sums() {
    // 2-D plans (modes [M_x, M_y, 1]): the points' z does not matter
    // (exp(i 0 z) = 1), and a cluster fills bins past SUBPROBLEM_POINTS so
    // that both spreading paths run on the flat grid.
    let m = [18, 14, 1];
    let (mut x, _, ks, _) = problem(5, m, 400);
    let mut rng = Rng(6);
    x.extend((0..2000).map(|_| {
        [
            2.9 + 0.2 * rng.sym(),
            -0.3 + 0.2 * rng.sym(),
            3.0 * rng.sym(),
        ]
    }));
    let c: Vec<Complex<f64>> = (0..x.len())
        .map(|_| Complex::new(rng.sym(), rng.sym()))
        .collect();
    let f: Vec<Complex<f64>> = (0..ks.len())
        .map(|_| Complex::new(rng.sym(), rng.sym()))
        .collect();
    for sign in [1, -1] {
        let want1 = direct(&ks, &x, &c, sign as f64);
        let want2 = direct(&x, &ks, &f, sign as f64);
        for tol in [1e-3, 1e-6, 1e-12] {
            let mut plan = Plan::new(m, tol, sign).unwrap();
            assert_eq!(plan.fine[2], 1, "one plane along a flat z");
            plan.set_points(&x).unwrap();
            let mut got1 = vec![Complex::default(); ks.len()];
            plan.type1(&mut got1, &c).unwrap();
            let mut got2 = vec![Complex::default(); x.len()];
            plan.type2(&mut got2, &f).unwrap();
            let (e1, e2) = (rel_l2(&got1, &want1), rel_l2(&got2, &want2));
            // As in 3-D: the kernel's width is chosen for the tolerance.
            assert!(e1 < tol, "flat type 1, sign {sign}, tol {tol:e}: {e1:e}");
            assert!(e2 < tol, "flat type 2, sign {sign}, tol {tol:e}: {e2:e}");
        }
    }
}

#[test]
fn clustered_points_at_the_periodic_edge_meet_the_tolerance() {
    // 3000 points in a small cluster straddling x = ±pi: every bin they
    // fill holds far more than SUBPROBLEM_POINTS, so they spread through
    // subproblem buffers that wrap around the grid's edge; a sparse
    // uniform sprinkle keeps the direct path in the same run.
    let m = [16, 12, 20];
    let mut rng = Rng(11);
    let mut x: Vec<[f64; 3]> = (0..3000)
        .map(|_| {
            [
                std::f64::consts::PI + 0.3 * rng.sym(),
                0.2 * rng.sym(),
                -std::f64::consts::PI + 0.25 * rng.sym(),
            ]
        })
        .collect();
    x.extend((0..100).map(|_| [0, 1, 2].map(|_| std::f64::consts::PI * rng.sym())));
    let c: Vec<Complex<f64>> = (0..x.len())
        .map(|_| Complex::new(rng.sym(), rng.sym()))
        .collect();
    let ks = modes_of(m);
    let f: Vec<Complex<f64>> = (0..ks.len())
        .map(|_| Complex::new(rng.sym(), rng.sym()))
        .collect();
    let want1 = direct(&ks, &x, &c, 1.0);
    let want2 = direct(&x, &ks, &f, 1.0);
    for tol in [1e-3, 1e-6, 1e-9] {
        let mut plan = Plan::new(m, tol, 1).unwrap();
        plan.set_points(&x).unwrap();
        let pts = plan.points.as_ref().unwrap();
        let largest = (0..pts.bin_start.len() - 1)
            .map(|b| pts.bin_start[b + 1] - pts.bin_start[b])
            .max()
            .unwrap();
        assert!(largest >= spread::SUBPROBLEM_POINTS, "{largest}");
        let mut got1 = vec![Complex::default(); ks.len()];
        plan.type1(&mut got1, &c).unwrap();
        let mut got2 = vec![Complex::default(); x.len()];
        plan.type2(&mut got2, &f).unwrap();
        // As for spread-out points: below the tolerance.
        let (e1, e2) = (rel_l2(&got1, &want1), rel_l2(&got2, &want2));
        assert!(e1 < tol, "type 1 at {tol:e}: {e1:e}");
        assert!(e2 < tol, "type 2 at {tol:e}: {e2:e}");
        // The baseline (non-AVX) copies compute the same sums: equal
        // to rounding (FMA rounds once where they round twice).
        spread::PLAIN_ONLY.store(true, std::sync::atomic::Ordering::Relaxed);
        let mut plain1 = vec![Complex::default(); ks.len()];
        plan.type1(&mut plain1, &c).unwrap();
        let mut plain2 = vec![Complex::default(); x.len()];
        plan.type2(&mut plain2, &f).unwrap();
        spread::PLAIN_ONLY.store(false, std::sync::atomic::Ordering::Relaxed);
        assert!(rel_l2(&plain1, &got1) < 1e-13);
        assert!(rel_l2(&plain2, &got2) < 1e-13);
    }
}

#[test]
fn float32_meets_tolerances_down_to_1e_6() {
    let m = [12, 9, 10];
    let (x, c, ks, f) = problem(5, m, 400);
    let to32 = |v: &[Complex<f64>]| -> Vec<Complex<f32>> {
        v.iter()
            .map(|z| Complex::new(z.re as f32, z.im as f32))
            .collect()
    };
    let to64 = |v: &[Complex<f32>]| -> Vec<Complex<f64>> {
        v.iter()
            .map(|z| Complex::new(z.re as f64, z.im as f64))
            .collect()
    };
    let want1 = direct(&ks, &x, &c, 1.0);
    let want2 = direct(&x, &ks, &f, 1.0);
    for tol in [1e-2, 1e-4, 1e-6] {
        let mut plan = Plan::<f32>::new(m, tol, 1).unwrap();
        plan.set_points(&x).unwrap();
        let mut got1 = vec![Complex::default(); ks.len()];
        plan.type1(&mut got1, &to32(&c)).unwrap();
        let mut got2 = vec![Complex::default(); x.len()];
        plan.type2(&mut got2, &to32(&f)).unwrap();
        let (e1, e2) = (rel_l2(&to64(&got1), &want1), rel_l2(&to64(&got2), &want2));
        // Against float64 direct sums: the kernel's error plus float32
        // rounding, still below the tolerance.
        assert!(e1 < tol, "float32 type 1 at {tol:e}: {e1:e}");
        assert!(e2 < tol, "float32 type 2 at {tol:e}: {e2:e}");
    }
    // Below 1e-6 float32 cannot deliver: refused.
    assert!(Plan::<f32>::new(m, 1e-7, 1).is_err());
}

#[test]
fn type2_is_the_adjoint_of_type1_with_the_opposite_sign() {
    let mut rng = Rng(8);
    let m = [8, 6, 4];
    let x: Vec<[f64; 3]> = (0..50)
        .map(|_| [0, 1, 2].map(|_| 3.0 * rng.sym()))
        .collect();
    let c: Vec<Complex<f64>> = (0..50)
        .map(|_| Complex::new(rng.sym(), rng.sym()))
        .collect();
    let f: Vec<Complex<f64>> = (0..192)
        .map(|_| Complex::new(rng.sym(), rng.sym()))
        .collect();
    let mut p = Plan::new(m, 1e-6, 1).unwrap();
    p.set_points(&x).unwrap();
    let mut a = vec![Complex::default(); 192];
    p.type1(&mut a, &c).unwrap();
    let mut b = vec![Complex::default(); 50];
    p.type1_adjoint(&mut b, &f).unwrap();
    // <A c, f> = <c, A^H f>: the same spread, FFT and correction in
    // reverse, so equal to rounding (1e-12), whatever the tolerance.
    let lhs: Complex<f64> = a.iter().zip(&f).map(|(u, v)| u.conj() * v).sum();
    let rhs: Complex<f64> = c.iter().zip(&b).map(|(u, v)| u.conj() * v).sum();
    assert!((lhs - rhs).norm() <= 1e-12 * lhs.norm(), "{lhs} vs {rhs}");
}

#[test]
fn bad_settings_are_refused() {
    assert!(Plan::<f64>::new([4, 4, 4], 0.5, 1).is_err());
    assert!(Plan::<f64>::new([4, 4, 4], 1e-15, 1).is_err());
    assert!(Plan::<f64>::new([4, 4, 4], f64::NAN, 1).is_err());
    assert!(Plan::<f64>::new([0, 4, 4], 1e-6, 1).is_err());
    assert!(Plan::<f64>::new([4, 4, 4], 1e-6, 0).is_err());
    let mut p = Plan::<f64>::new([4, 4, 4], 1e-6, 1).unwrap();
    let one = [Complex::new(1.0, 0.0)];
    let mut out = vec![Complex::default(); 64];
    // No points set yet.
    assert!(p.type1(&mut out, &one).is_err());
    assert!(p.set_points(&[[f64::NAN, 0.0, 0.0]]).is_err());
    p.set_points(&[[0.0; 3]]).unwrap();
    assert!(p.type1(&mut out[..63], &one).is_err());
    assert!(p.type1(&mut out, &[one[0]; 2]).is_err());
}

#[test]
fn type1_over_coils_matches_direct_sums_through_the_maps() {
    // out[k] = sum_c conj(S_c[k]) sum_m w_m d_cm exp(i k . x_m)
    let m = [6, 5, 4];
    let (x, _, ks, _) = problem(11, m, 300);
    let mut rng = Rng(12);
    let coils = 3;
    let mut cplx = |n: usize| -> Vec<Complex<f64>> {
        (0..n).map(|_| Complex::new(rng.sym(), rng.sym())).collect()
    };
    let d = cplx(coils * x.len());
    let maps: Vec<Vec<Complex<f64>>> = (0..coils).map(|_| cplx(ks.len())).collect();
    let w: Vec<f64> = (0..x.len()).map(|i| 0.5 + (i % 7) as f64 / 7.0).collect();
    let mut want = vec![Complex::default(); ks.len()];
    for (c, s) in maps.iter().enumerate() {
        let wd: Vec<Complex<f64>> = (0..x.len()).map(|i| d[c * x.len() + i] * w[i]).collect();
        for ((o, f), s) in want.iter_mut().zip(direct(&ks, &x, &wd, 1.0)).zip(s) {
            *o += s.conj() * f;
        }
    }
    let b = CpuBackend::<f64>::new();
    let p = b.nufft_plan(m, 1e-10, 1, &x).unwrap();
    let mut out = vec![Complex::new(9.0, 9.0); ks.len()];
    let mut ticks = Vec::new();
    let refs: Vec<&Vec<Complex<f64>>> = maps.iter().collect();
    b.nufft_type1_coils(&p, &mut out, &w, &d, &refs, &mut |i, n| ticks.push((i, n)))
        .unwrap();
    let e = rel_l2(&out, &want);
    // Tolerance 1e-10 per type 1; three coils add no more than their sum.
    assert!(e < 1e-9, "type 1 over coils: {e:e}");
    assert_eq!(ticks, vec![(1, 3), (2, 3), (3, 3)]);

    // Lengths that disagree are named; nothing is computed.
    let bad = |w: &[f64], d: &[Complex<f64>], maps: &[Vec<Complex<f64>>]| {
        let mut out = vec![Complex::default(); ks.len()];
        let maps: Vec<&Vec<Complex<f64>>> = maps.iter().collect();
        b.nufft_type1_coils(&p, &mut out, w, d, &maps, &mut |_, _| {})
            .unwrap_err()
            .to_string()
    };
    assert!(bad(&w, &d, &[]).contains("coil maps"));
    assert!(bad(&w, &d[1..], &maps).contains("one value per coil and sample"));
    assert!(bad(&w, &d, &maps[..2]).contains("one value per coil and sample"));
    let short = vec![maps[0].clone(), maps[1][1..].to_vec(), maps[2].clone()];
    assert!(bad(&w, &d, &short).contains("coil map"));
    assert!(bad(&w[1..], &d[..coils * (x.len() - 1)], &maps).contains("NUFFT"));
}
