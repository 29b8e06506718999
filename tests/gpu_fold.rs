//! GPU against CPU float64: CG's map and dot over the Toeplitz product
//! (`Normal::apply_dot`), with the uniform prior folded into the pruned
//! product (its stencil's symbol beside FFT(Q), the grid's faces mended by
//! the dot's pass), without a prior (its dot, too, in the last pass), and
//! with a weighted prior, which takes the product and the prior's own
//! pass; and CG's updates made in the product's first pass, which keep
//! the bits of their own pass. Without a usable GPU each test prints that
//! it was skipped.

use crate::common::*;
use crate::gpu_solver::hermitian;
use recon_cg::{Normal, Regularised, Toeplitz};
use recon_core::{metrics::nrmse, Backend, CgStep, Complex, CpuBackend, Grid, Ratio, Stencil};
use recon_cuda::Options;

/// `A = T + lambda W^H W` (T the Toeplitz product of `q`) applied to each
/// of `vs` in turn by `apply_dot` on one operator: `A v`, `<v, A v>`, and
/// `<v, A v>` again by `dot_re_to` (the sum the product by pieces takes).
/// `composed`: by `apply` and `add_whw` instead, the product and the
/// prior's pass one after the other.
fn map_dot<B: Backend>(
    b: &B,
    grid: &Grid,
    q: &[Complex<B::Real>],
    w: &Stencil,
    lambda: f64,
    vs: &[Vec<Complex<B::Real>>],
    composed: bool,
) -> Vec<(Vec<Complex<B::Real>>, f64, f64)> {
    let mut t = Toeplitz::new(b, grid, q).unwrap();
    let weights = b.upload_weights(w).unwrap();
    let mut a = Regularised::new(b, &mut t, w, lambda).unwrap();
    let mut s = b.scalars(&[0.0; 3]).unwrap();
    vs.iter()
        .map(|v| {
            let x = b.upload(v).unwrap();
            let mut out = b.zeros(grid.len()).unwrap();
            if composed {
                a.data.apply(b, &mut out, &x).unwrap();
                b.add_whw(&mut out, lambda, &x, &weights).unwrap();
            } else {
                a.apply_dot(b, &mut out, &x, &mut s, 1).unwrap();
            }
            b.dot_re_to(&mut s, 2, &x, &out).unwrap();
            let mut host = [0.0; 3];
            b.read_scalars(&mut host, &s).unwrap();
            let mut h = vec![Complex::default(); grid.len()];
            b.download(&mut h, &out).unwrap();
            (h, host[1], host[2])
        })
        .collect()
}

#[test]
fn cg_map_and_dot_with_the_uniform_prior_folded_match_cpu_f64() {
    // Covered shapes (every doubled length has line kernels; along z the
    // columns kernel at 16, 96, 160, 256 and 512, the last two with the
    // product in registers; along x lines of 256 points, two to a block),
    // non-cubic so that the axes' symbols cannot be swapped unseen; and one
    // that the product takes by pieces. Three
    // vectors each through one operator, to catch state the first leaves
    // (the partial sums); the third scaled by 1e15, so that products of
    // its values pass float32's range (the dot's sums run in double: a
    // GCV probe, T z, is not normalised).
    let shapes = [
        ([8, 48, 80], true),
        ([80, 8, 48], true),
        ([48, 80, 8], true),
        ([16, 8, 128], true),
        ([8, 8, 256], true),
        ([128, 8, 16], true),
        ([10, 8, 16], false),
    ];
    let Some(pruned) = gpu(Options::default()) else {
        return;
    };
    let cpu = CpuBackend::<f64>::new();
    for (n, covered) in shapes {
        let grid = Grid::new(n, [200.0; 3]).unwrap();
        let len = grid.len();
        let mut rng = Rng::new(12);
        let q64 = hermitian(&rng.complex(8 * len), grid.doubled());
        let q32 = down(&q64);
        let edges = [0, 1, 2].map(|_| (0..len).map(|_| 1.0 + 0.5 * rng.sym()).collect());
        let weighted = Stencil::weighted(n, edges).unwrap();
        let uniform = Stencil::uniform(n);
        let mut vs: Vec<Vec<Complex<f64>>> = (0..3).map(|_| rng.complex(len)).collect();
        vs[2].iter_mut().for_each(|v| *v *= 1e15);
        let vs32: Vec<Vec<Complex<f32>>> = vs.iter().map(|v| down(v)).collect();
        // lambda 3: the stencil's terms (up to 12 lambda) as large as the
        // product's, so that a wrong symbol or face shows.
        for (what, w, lambda) in [
            ("no prior", &uniform, 0.0),
            ("uniform", &uniform, 3.0),
            ("weighted", &weighted, 3.0),
        ] {
            let want = map_dot(&cpu, &grid, &q64, w, lambda, &vs, false);
            let got = map_dot(&pruned, &grid, &q32, w, lambda, &vs32, false);
            for (round, ((h, dot, _), (want, want_dot, _))) in got.iter().zip(&want).enumerate() {
                let err = nrmse(&up(h), want);
                let dot_err = (dot - want_dot).abs() / want_dot.abs();
                println!("{what} {n:?} round {round}: map {err:.2e}, dot {dot_err:.2e}");
                // float32 FFTs of these sizes round to a few 1e-7
                // relative, and the dot's sums run in double; a wrong
                // symbol or face gives 1e-3 or more.
                assert!(err < 1e-5, "{what} {n:?}: map {err:e}");
                assert!(dot_err < 1e-5, "{what} {n:?}: dot {dot_err:e}");
            }
            // Without a prior the fused map has the plain product's bits,
            // but its dot, summed per block of the last pass, rounds
            // otherwise than `dot_re_to`, which the product by pieces
            // takes: a covered shape that silently took the pieces would
            // give the same bits.
            if lambda == 0.0 {
                assert_eq!(
                    got.iter().any(|(_, fused, plain)| fused != plain),
                    covered,
                    "{what} {n:?}: the fused dot {}",
                    if covered {
                        "did not run where it should"
                    } else {
                        "ran where it should not"
                    }
                );
            }
            // The fold rounds otherwise than the product and the prior's
            // pass one after the other: a covered shape whose uniform
            // prior silently took the pass would give the same bits.
            if lambda > 0.0 {
                let composed = map_dot(&pruned, &grid, &q32, w, lambda, &vs32, true);
                let folded = covered && what == "uniform";
                assert_eq!(
                    got.iter().zip(&composed).any(|(a, b)| a.0 != b.0),
                    folded,
                    "{what} {n:?}: the fold ran where it should {}",
                    if folded { "have" } else { "not have" }
                );
            }
        }
    }
}

#[test]
fn cg_updates_made_in_the_products_first_pass_keep_their_bits_and_match_cpu_f64() {
    // CG's updates x = x + c p, p = r + d p, then the map and dot of the
    // new p (`toeplitz_update_dot`): where the pruned product covers the
    // shape, its first pass makes the updates as it reads p, one launch
    // fewer, with the same arithmetic, so x, p, A p and <p, A p> keep
    // every bit of `cg_update` followed by `toeplitz_dot`; and they match
    // the CPU's in float64 (its default: the two calls). Shapes with x
    // lines of 96 points (blocks of 4 lines) and 256 (2 a block); with the
    // uniform prior folded and without; coefficients from the scalars,
    // and with the floor above them (both 0: p becomes r, x stays); each
    // operator twice, to catch state the first call leaves.
    let Some(b) = gpu(Options::default()) else {
        return;
    };
    let cpu = CpuBackend::<f64>::new();
    // s: the floor, <r_old, r_old>, <p, A p>, <r, r>, and the slot the
    // dot goes to; step = s[1] / s[2], beta = s[3] / s[1].
    let step = Ratio {
        num: 1,
        den: 2,
        floor: 0,
    };
    let beta = Ratio {
        num: 3,
        den: 1,
        floor: 0,
    };
    for n in [[48, 32, 64], [128, 8, 16]] {
        let grid = Grid::new(n, [200.0; 3]).unwrap();
        let (len, d) = (grid.len(), grid.doubled());
        let mut rng = Rng::new(21);
        let q64 = hermitian(&rng.complex(8 * len), d);
        let plan = b.toeplitz_plan(n).unwrap();
        let fq = b.fft_q(&down(&q64), d).unwrap();
        let w = b.upload_weights(&Stencil::uniform(n)).unwrap();
        let (plan64, fq64) = (cpu.toeplitz_plan(n).unwrap(), cpu.fft_q(&q64, d).unwrap());
        let w64 = cpu.upload_weights(&Stencil::uniform(n)).unwrap();
        let work = || b.zeros(d.iter().product()).unwrap();
        let (mut work1, mut work2) = (work(), work());
        let mut work64 = cpu.zeros(d.iter().product()).unwrap();
        let r32 = down(&rng.complex(len));
        let (r, r64) = (b.upload(&r32).unwrap(), cpu.upload(&up(&r32)).unwrap());
        for (floor, lambda) in [(0.0, None), (0.0, Some(3.0)), (10.0, Some(3.0))] {
            let prior = lambda.map(|a| (a, &w));
            let prior64 = lambda.map(|a| (a, &w64));
            let init = [floor, 2.0, 3.0, 1.5, 0.0];
            let (mut s1, mut s2) = (b.scalars(&init).unwrap(), b.scalars(&init).unwrap());
            let mut s64 = cpu.scalars(&init).unwrap();
            let (x0, p0) = (down(&rng.complex(len)), down(&rng.complex(len)));
            let (mut x1, mut p1) = (b.upload(&x0).unwrap(), b.upload(&p0).unwrap());
            let (mut x2, mut p2) = (b.upload(&x0).unwrap(), b.upload(&p0).unwrap());
            let mut x64 = cpu.upload(&up(&x0)).unwrap();
            let mut p64 = cpu.upload(&up(&p0)).unwrap();
            let (mut out1, mut out2) = (b.zeros(len).unwrap(), b.zeros(len).unwrap());
            let mut out64 = cpu.zeros(len).unwrap();
            for round in 0..2 {
                let what = format!("{n:?}, floor {floor}, prior {lambda:?}, round {round}");
                let before = b.line_and_vector_launches();
                let u = CgStep {
                    x: &mut x1,
                    a: 1.0,
                    step,
                    r: &r,
                    beta,
                };
                b.toeplitz_update_dot(
                    &plan, u, &mut out1, &mut p1, &fq, &mut work1, prior, &mut s1, 4,
                )
                .unwrap();
                let fused = b.line_and_vector_launches() - before;
                let before = b.line_and_vector_launches();
                b.cg_update(&mut x2, 1.0, step, &mut p2, &r, beta, &s2)
                    .unwrap();
                b.toeplitz_dot(&plan, &mut out2, &p2, &fq, &mut work2, prior, &mut s2, 4)
                    .unwrap();
                let apart = b.line_and_vector_launches() - before;
                let u = CgStep {
                    x: &mut x64,
                    a: 1.0,
                    step,
                    r: &r64,
                    beta,
                };
                cpu.toeplitz_update_dot(
                    &plan64,
                    u,
                    &mut out64,
                    &mut p64,
                    &fq64,
                    &mut work64,
                    prior64,
                    &mut s64,
                    4,
                )
                .unwrap();
                println!("{what}: {fused} launches against {apart}");
                assert_eq!(
                    fused + 1,
                    apart,
                    "{what}: the updates were not made in the first pass"
                );
                let host = |v| b.to_host(v).unwrap();
                for (name, a, c, want) in [
                    ("x", &x1, &x2, &x64),
                    ("p", &p1, &p2, &p64),
                    ("A p", &out1, &out2, &out64),
                ] {
                    let (a, c) = (host(a), host(c));
                    let differ = a.iter().zip(&c).filter(|(a, c)| a != c).count();
                    assert_eq!(differ, 0, "{what}: {differ} values of {name} differ");
                    let err = nrmse(&up(&a), &cpu.to_host(want).unwrap());
                    println!("{what}: {name} against the CPU in float64 {err:.2e}");
                    // float32 updates round to ~6e-8, the products' FFTs
                    // to a few 1e-7 (as the fold's test); a coefficient
                    // or point wrong gives 1e-2 or more.
                    assert!(err < 1e-5, "{what}: {name} {err:e}");
                }
                let (mut h1, mut h2, mut h64) = ([0.0; 5], [0.0; 5], [0.0; 5]);
                b.read_scalars(&mut h1, &s1).unwrap();
                b.read_scalars(&mut h2, &s2).unwrap();
                cpu.read_scalars(&mut h64, &s64).unwrap();
                assert_eq!(h1, h2, "{what}: the scalars differ");
                // The dot against |p| |A p| (Q here is Hermitian but not
                // positive, so <p, A p> itself may be small): rounding of
                // float32 products summed in double.
                let norm =
                    |v: &Vec<Complex<f64>>| v.iter().map(|z| z.norm_sqr()).sum::<f64>().sqrt();
                let scale = norm(&cpu.to_host(&p64).unwrap()) * norm(&cpu.to_host(&out64).unwrap());
                let dot_err = (h1[4] - h64[4]).abs() / scale;
                println!("{what}: <p, A p> against the CPU in float64 {dot_err:.2e}");
                assert!(dot_err < 1e-6, "{what}: <p, A p> {dot_err:e}");
                if floor > 0.0 {
                    // Gated: p is r and x is as it was.
                    assert_eq!(host(&p1), r32, "{what}");
                    assert_eq!(host(&x1), x0, "{what}");
                }
            }
        }
    }
}
