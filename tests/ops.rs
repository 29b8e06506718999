//! The operator layer (recon-ops) and the sparse priors' solvers on the CPU
//! in float64: adjointness and normal maps of every operator and
//! combination, the proximal maps against their closed forms, and total
//! variation (plain and directional) solved by ADMM and PDHG against a
//! slow, obvious reference: projected gradient on the dual, with an exact
//! dense difference matrix, certified by its duality gap.

use crate::common;
use crate::tv_reference;

use common::*;
use recon_cg::{
    admm, pdhg, Circulant, Gram, Normal, Preconditioner, Sparse, SparseParams, Toeplitz,
};
use recon_core::{metrics::nrmse, Backend, Complex, CpuBackend, Grid, GroupProx, Result};
use recon_ops::testing::{adjoint_error, normal_error, random};
use recon_ops::{
    Compose, Diagonal, Directional, Gradient, GroupNorm, Identity, LinearOp, Norm, Quadratic,
    Scaled, Stack, Sum,
};
use tv_reference::{dense_k, tv_reference};

type Cpu = CpuBackend<f64>;
type V = Vec<Complex<f64>>;

/// A smooth, positive reference image with edges (a bright box in a ramp).
fn reference(n: [usize; 3]) -> Vec<f64> {
    (0..n.iter().product())
        .map(|i| {
            let c = recon_core::index3(n, i);
            let inside = (1..n[0] - 1).contains(&c[0]) && (1..n[1] - 2).contains(&c[1]);
            0.2 + 0.05 * c[2] as f64 + if inside { 1.0 } else { 0.0 }
        })
        .collect()
}

/// A W with weighted edges (as the anatomical prior's) and diagonal rows
/// that vanish at some voxels (as a support mask's).
fn weighted_w(n: [usize; 3]) -> recon_core::Stencil {
    let len: usize = n.iter().product();
    let mut rng = Rng::new(9);
    let edges = [0, 1, 2].map(|_| (0..len).map(|_| 0.1 + rng.next_f64()).collect());
    let diag = (0..len)
        .map(|i| if i % 3 == 0 { 0.0 } else { rng.next_f64() })
        .collect();
    recon_core::Stencil::weighted(n, edges)
        .unwrap()
        .with_diag(diag)
        .unwrap()
}

/// Every operator of recon-ops and each combinator, on a small grid.
fn operators(be: &Cpu, n: [usize; 3]) -> Vec<(&'static str, Box<dyn LinearOp<Cpu>>)> {
    let len: usize = n.iter().product();
    let g = || Gradient::new(be, n).unwrap();
    let p = || Directional::from_reference(be, n, &reference(n), 0.1).unwrap();
    let d = || Diagonal::new(be, random(len, 7)).unwrap();
    let quadratic = |w: &recon_core::Stencil| Box::new(Quadratic::new(be, w).unwrap());
    vec![
        ("identity", Box::new(Identity::new(len))),
        ("gradient", Box::new(g())),
        ("uniform W", quadratic(&recon_core::Stencil::uniform(n))),
        ("W of planes", quadratic(&recon_core::Stencil::planes(n))),
        ("weighted W with a diagonal", quadratic(&weighted_w(n))),
        ("directional", Box::new(p())),
        ("diagonal", Box::new(d())),
        ("scaled", Box::new(Scaled::new(-2.5, g()).unwrap())),
        (
            "directional gradient",
            Box::new(Compose::new(be, p(), g()).unwrap()),
        ),
        (
            "sum",
            Box::new(Sum::new(be, d(), Scaled::new(0.5, Identity::new(len)).unwrap()).unwrap()),
        ),
        (
            "stack",
            Box::new(
                Stack::new(
                    be,
                    vec![
                        Box::new(g()),
                        Box::new(d()),
                        Box::new(Compose::new(be, p(), g()).unwrap()),
                    ],
                )
                .unwrap(),
            ),
        ),
    ]
}

#[test]
fn every_operator_is_adjoint_and_its_normal_is_a_h_a() {
    let be = Cpu::new();
    for (name, mut op) in operators(&be, [5, 4, 3]) {
        let adj = adjoint_error(&be, op.as_mut(), 1).unwrap();
        let nor = normal_error(&be, op.as_mut(), 2).unwrap();
        // float64 sums of a few hundred products: rounding near 1e-16.
        assert!(adj < 1e-13, "{name}: <A x, y> vs <x, A^H y> off by {adj:e}");
        assert!(nor < 1e-13, "{name}: normal vs A^H A off by {nor:e}");
    }
}

#[test]
fn quadratic_w_is_the_stencils_rows() {
    // W x row by row from the stencil's definition: a weighted difference
    // per voxel and axis (zero on the last plane), then the diagonal rows.
    let n = [5, 4, 3];
    let len: usize = n.iter().product();
    let w = weighted_w(n);
    let be = Cpu::new();
    let x = random::<f64>(len, 11);
    let mut got = be.zeros(4 * len).unwrap();
    Quadratic::new(&be, &w)
        .unwrap()
        .forward(&be, &mut got, &x)
        .unwrap();
    let (edges, diag) = (w.w.as_ref().unwrap(), w.diag.as_ref().unwrap());
    let stride = w.strides();
    let mut want = vec![Complex::new(0.0, 0.0); 4 * len];
    for d in 0..3 {
        for i in 0..len {
            if recon_core::index3(n, i)[d] + 1 < n[d] {
                want[d * len + i] = (x[i + stride[d]] - x[i]) * edges[d][i];
            }
        }
    }
    for i in 0..len {
        want[3 * len + i] = x[i] * diag[i];
    }
    // one product and one difference per entry: exact to rounding
    assert!(nrmse(&got, &want) < 1e-15);
}

#[test]
fn combinators_refuse_mismatched_shapes() {
    let be = Cpu::new();
    let g = Gradient::new(&be, [3, 3, 3]).unwrap();
    // The gradient's 81 outputs cannot feed a 27-input operator.
    let e = Compose::new(&be, Gradient::new(&be, [3, 3, 3]).unwrap(), g)
        .err()
        .unwrap();
    assert!(e.to_string().contains("81 outputs"), "{e}");
    let e = Sum::new(&be, Identity::new(3), Identity::new(4))
        .err()
        .unwrap();
    assert!(e.to_string().contains("differ"), "{e}");
    assert!(Stack::<Cpu>::new(&be, vec![]).is_err());
    let e = Stack::new(
        &be,
        vec![Box::new(Identity::new(3)), Box::new(Identity::new(4))],
    )
    .err()
    .unwrap();
    assert!(e.to_string().contains("block 1"), "{e}");
    // and maps refuse vectors of the wrong length
    let mut g = Gradient::new(&be, [3, 3, 3]).unwrap();
    let mut out = vec![Complex::default(); 80];
    assert!(g
        .forward(&be, &mut out, &vec![Complex::default(); 27])
        .is_err());
    let e = Directional::from_reference(&be, [2, 2, 2], &[f64::NAN; 8], 0.1)
        .err()
        .unwrap();
    assert!(e.to_string().contains("voxel 0"), "{e}");
    assert!(Directional::from_reference(&be, [2, 2, 2], &[1.0; 8], 0.0).is_err());
}

#[test]
fn gradient_norm_bounds_its_power_iteration() {
    let be = Cpu::new();
    let n = [6, 5, 4];
    let mut g = Gradient::new(&be, n).unwrap();
    let bound = g.norm_squared();
    let est = recon_ops::power_norm(&be, 120, 300, &mut |o, x| g.normal(&be, o, x)).unwrap();
    // The power method approaches the largest eigenvalue from below; 300
    // steps on 120 unknowns come within 1% of the closed form.
    assert!(
        est <= bound * (1.0 + 1e-12) && est > 0.99 * bound,
        "{est} vs {bound}"
    );
}

#[test]
fn proximal_maps_match_their_closed_forms() {
    let be = Cpu::new();
    for components in [1, 3] {
        let groups = 50;
        let v = random::<f64>(components * groups, 3 + components as u64);
        let norm_of = |x: &V, i: usize| -> f64 {
            (0..components)
                .map(|a| x[a * groups + i].norm_sqr())
                .sum::<f64>()
                .sqrt()
        };
        for t in [0.0, 0.3, 0.9, 5.0] {
            let mut s = v.clone();
            be.group_prox(&mut s, t, components, GroupProx::Shrink)
                .unwrap();
            let mut p = v.clone();
            be.group_prox(&mut p, t, components, GroupProx::Project)
                .unwrap();
            for i in 0..groups {
                let (nv, ns, np) = (norm_of(&v, i), norm_of(&s, i), norm_of(&p, i));
                // shrink: |s| = max(0, |v| - t), along v; project: |p| = min(|v|, t)
                assert!((ns - (nv - t).max(0.0)).abs() < 1e-14, "shrink norm");
                assert!((np - nv.min(t)).abs() < 1e-14, "projection norm");
                for a in 0..components {
                    let k = a * groups + i;
                    // Moreau: prox(v) + prox of the conjugate (v) = v
                    assert!((s[k] + p[k] - v[k]).norm() < 1e-14, "Moreau identity");
                    // both along v
                    assert!((s[k] * nv - v[k] * ns).norm() < 1e-13, "shrink direction");
                }
            }
        }
    }
    // the norm itself: sum of the groups' Euclidean norms
    let x = vec![
        Complex::new(3.0, 0.0),
        Complex::new(0.0, 1.0),
        Complex::new(4.0, 0.0),
        Complex::new(0.0, 0.0),
    ];
    let v = GroupNorm { components: 2 }.value(&be, &x).unwrap();
    assert!((v - 6.0).abs() < 1e-15, "|(3, 4)| + |(i, 0)| = 6, got {v}");
    assert!(be
        .group_prox(&mut x.clone(), 1.0, 3, GroupProx::Shrink)
        .is_err());
}

/// A noisy piecewise-constant image: the reference's box, complex.
fn noisy(n: [usize; 3], seed: u64) -> V {
    let r = reference(n);
    let mut rng = Rng::new(seed);
    r.iter()
        .map(|&v| Complex::new(v, 0.3 * v) + Complex::new(0.15 * rng.sym(), 0.15 * rng.sym()))
        .collect()
}

/// Runs ADMM or PDHG with prior `op` and the identity data term.
fn denoise(be: &Cpu, op: &mut dyn LinearOp<Cpu>, f: &V, lambda: f64, pd: bool) -> V {
    let params = SparseParams {
        iterations: 20000,
        tolerance: 1e-8,
        ..Default::default()
    };
    let prior = Sparse {
        op,
        norm: &mut GroupNorm { components: 3 },
        lambda,
        gram: Gram::Laplacian,
    };
    let mut x = be.zeros(f.len()).unwrap();
    let mut eye = Eye(f.len());
    let info = if pd {
        pdhg(be, &mut eye, prior, &mut x, f, &params, &mut |_, _| {}).unwrap()
    } else {
        admm(
            be,
            &mut eye,
            prior,
            &mut x,
            f,
            1.0,
            None,
            &params,
            &mut |_, _| {},
        )
        .unwrap()
    };
    assert!(
        info.relative_residual <= 1e-8,
        "did not converge: {} after {}",
        info.relative_residual,
        info.iterations
    );
    x
}

#[test]
fn tv_denoising_by_admm_and_pdhg_matches_the_dual_reference() {
    let be = Cpu::new();
    let n = [6, 5, 4];
    let f = noisy(n, 21);
    let r = reference(n);
    for (name, k, directional) in [
        ("TV", dense_k(n, None), false),
        ("directional TV", dense_k(n, Some((&r, 0.2))), true),
    ] {
        for lambda in [0.05, 0.3] {
            let reference = tv_reference(&k, &f, lambda);
            for pd in [false, true] {
                let x = if directional {
                    let mut op = Compose::new(
                        &be,
                        Directional::from_reference(&be, n, &r, 0.2).unwrap(),
                        Gradient::new(&be, n).unwrap(),
                    )
                    .unwrap();
                    denoise(&be, &mut op, &f, lambda, pd)
                } else {
                    denoise(&be, &mut Gradient::new(&be, n).unwrap(), &f, lambda, pd)
                };
                let err = nrmse(&x, &reference);
                // The reference is within sqrt(2e-13) |f| of the minimiser;
                // the solvers stop at relative residuals of 1e-8, which
                // leaves the iterate within about 1e-7 of it.
                assert!(
                    err < 1e-6,
                    "{name}, lambda {lambda}, {}: {err:e} from the reference",
                    if pd { "PDHG" } else { "ADMM" }
                );
            }
        }
    }
}

/// Both at relative residuals of 1e-9.
fn tight() -> SparseParams {
    SparseParams {
        iterations: 20000,
        tolerance: 1e-9,
        ..Default::default()
    }
}

#[test]
fn admm_and_pdhg_reach_the_same_minimiser_through_the_toeplitz_product() {
    let be = Cpu::new();
    let p = sparse_problem(Grid::new([6, 4, 4], [100.0; 3]).unwrap(), 120, 0.02, 5);
    let run = |pdhg: bool| {
        let case = SparseCase {
            pdhg,
            preconditioned: false,
            reference: None,
        };
        let (x, info) = p.solve(&be, case, &tight());
        assert!(info.relative_residual <= 1e-9, "{case:?}: {info:?}");
        x
    };
    let err = nrmse(&run(false), &run(true));
    // Both stop at relative residuals of 1e-9; the problem's conditioning
    // (random samples, lambda 2% of F^H D's peak) keeps them within 1e-6.
    assert!(err < 1e-6, "ADMM and PDHG differ by {err:e}");
}

#[test]
fn sparse_solvers_refuse_bad_settings() {
    let be = Cpu::new();
    let n = [3, 3, 3];
    let f = noisy(n, 1);
    let mut eye = Eye(27);
    let mut x = be.zeros(27).unwrap();
    let run = |lambda: f64, params: SparseParams, eye: &mut Eye, x: &mut V| {
        let mut g = Gradient::new(&be, n).unwrap();
        let prior = Sparse {
            op: &mut g,
            norm: &mut GroupNorm { components: 3 },
            lambda,
            gram: Gram::Laplacian,
        };
        admm(&be, eye, prior, x, &f, 1.0, None, &params, &mut |_, _| {})
            .err()
            .map(|e| e.to_string())
    };
    let ok = SparseParams::default();
    for (lambda, params, expect) in [
        (-1.0, ok, "lambda"),
        (f64::NAN, ok, "lambda"),
        (0.1, SparseParams { rho: 0.0, ..ok }, "rho"),
        (
            0.1,
            SparseParams {
                tolerance: f64::INFINITY,
                ..ok
            },
            "tolerance",
        ),
        (0.1, SparseParams { inner: 0, ..ok }, "inner"),
    ] {
        let e = run(lambda, params, &mut eye, &mut x).expect("refused");
        assert!(e.contains(expect), "{e}");
    }
    // an operator of another grid
    let mut g = Gradient::new(&be, [4, 3, 3]).unwrap();
    let prior = Sparse {
        op: &mut g,
        norm: &mut GroupNorm { components: 3 },
        lambda: 0.1,
        gram: Gram::Laplacian,
    };
    assert!(pdhg(&be, &mut eye, prior, &mut x, &f, &ok, &mut |_, _| {}).is_err());
}

#[test]
fn circulant_preconditioner_is_exact_for_full_cartesian_sampling() {
    // Every integer k of the grid: Q is N-periodic, so the Toeplitz product
    // on the N grid is itself circulant and T. Chan's circulant is exact.
    let be = Cpu::new();
    let grid = Grid::new([6, 4, 4], [100.0; 3]).unwrap();
    let traj = recon_synth::Trajectory::Cartesian {}
        .generate(&grid)
        .unwrap();
    let q = common::q(&be, &grid, &traj);
    let eig = recon_cg::toeplitz_eigenvalues(&grid, &q).unwrap();
    let mut m = Circulant::new(&be, grid.n, &eig, 1.0).unwrap();
    m.set_rho(&be, 0.0, Gram::Laplacian).unwrap();
    let mut t = Toeplitz::new(&be, &grid, &q).unwrap();
    let x = random::<f64>(grid.len(), 8);
    let (mut ax, mut back) = (be.zeros(grid.len()).unwrap(), be.zeros(grid.len()).unwrap());
    t.apply(&be, &mut ax, &x).unwrap();
    m.apply(&be, &mut back, &ax).unwrap();
    let err = nrmse(&back, &x);
    // float64 FFTs of a few hundred values: rounding only.
    assert!(err < 1e-12, "M^-1 A x against x: {err:e}");
}

#[test]
fn preconditioned_admm_reaches_the_same_minimiser() {
    let be = Cpu::new();
    let p = sparse_problem(Grid::new([6, 4, 4], [100.0; 3]).unwrap(), 120, 0.02, 15);
    let run = |preconditioned: bool| {
        let case = SparseCase {
            pdhg: false,
            preconditioned,
            reference: None,
        };
        let (x, info) = p.solve(&be, case, &tight());
        assert!(info.relative_residual <= 1e-9, "{case:?}: {info:?}");
        (x, info.iterations)
    };
    let ((plain, n_plain), (pre, n_pre)) = (run(false), run(true));
    let err = nrmse(&plain, &pre);
    println!("ADMM iterations: {n_plain} plain, {n_pre} preconditioned");
    // As for ADMM against PDHG: both at relative residuals of 1e-9.
    assert!(err < 1e-6, "preconditioned ADMM differs by {err:e}");
}

/// `F^H F + lambda grad^H grad`, the quadratic prior through the operator
/// layer: the Toeplitz product and the gradient's own normal map.
struct Layered {
    t: Toeplitz<Cpu>,
    g: Gradient<Cpu>,
    lambda: f64,
    work: V,
}

impl Normal<Cpu> for Layered {
    fn len(&self) -> usize {
        self.work.len()
    }
    fn apply(&mut self, be: &Cpu, out: &mut V, x: &V) -> Result<()> {
        self.t.apply(be, out, x)?;
        self.g.normal(be, &mut self.work, x)?;
        be.axpy(out, self.lambda, &self.work)
    }
}

#[test]
fn the_uniform_quadratic_prior_through_the_operator_layer_gives_the_same_image() {
    // The uniform W's stencil squares to the gradient's normal map (the
    // Neumann Laplacian), so CG with either gives the same iterates.
    let be = Cpu::new();
    let p = sparse_problem(Grid::new([6, 4, 4], [100.0; 3]).unwrap(), 120, 0.0, 25);
    let lambda = 0.05 * p.scale;
    let params = recon_cg::Params {
        iterations: 30,
        tolerance: 0.0,
    };
    let mut t = Toeplitz::new(&be, &p.grid, &p.q).unwrap();
    let w = recon_core::Stencil::uniform(p.grid.n);
    let mut stencil = recon_cg::Regularised::new(&be, &mut t, &w, lambda).unwrap();
    let mut a = be.zeros(p.grid.len()).unwrap();
    recon_cg::solve(&be, &mut stencil, &mut a, &p.b, &params, &mut |_, _| {}).unwrap();
    let mut layered = Layered {
        t: Toeplitz::new(&be, &p.grid, &p.q).unwrap(),
        g: Gradient::new(&be, p.grid.n).unwrap(),
        lambda,
        work: be.zeros(p.grid.len()).unwrap(),
    };
    // The operators: the same sums in another order, float64 rounding.
    let x = random::<f64>(p.grid.len(), 26);
    let (mut u, mut v) = (
        be.zeros(p.grid.len()).unwrap(),
        be.zeros(p.grid.len()).unwrap(),
    );
    stencil.apply(&be, &mut u, &x).unwrap();
    layered.apply(&be, &mut v, &x).unwrap();
    let op = nrmse(&v, &u);
    assert!(op < 1e-14, "operators differ by {op:e}");
    // The images after 30 CG iterations: that rounding, grown by the
    // system's conditioning, stays below float32's (6e-8 relative per
    // operation): the quadratic prior through the layer gives today's
    // image within float32 rounding, not to the bit.
    let mut b = be.zeros(p.grid.len()).unwrap();
    recon_cg::solve(&be, &mut layered, &mut b, &p.b, &params, &mut |_, _| {}).unwrap();
    let err = nrmse(&b, &a);
    assert!(err < 1e-6, "through the layer against the stencil: {err:e}");
}
