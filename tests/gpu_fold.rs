//! GPU against CPU float64: CG's map and dot over the Toeplitz product
//! (`Normal::apply_dot`), with the uniform prior folded into the pruned
//! product (its stencil's symbol beside FFT(Q), the grid's faces mended by
//! the dot's pass), without a prior (its dot, too, in the last pass), and
//! with a weighted prior, which takes the product and the prior's own
//! pass. Without a usable GPU each test prints that it was skipped.

use crate::common::*;
use crate::gpu_solver::hermitian;
use recon_cg::{Normal, Regularised, Toeplitz};
use recon_core::{metrics::nrmse, Backend, Complex, CpuBackend, Grid, Stencil};
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
