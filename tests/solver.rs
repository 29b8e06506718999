//! CG on the Toeplitz normal equations against a dense LAPACK solve.

use crate::common;

use common::*;
use ndarray::{Array1, Array2};
use ndarray_linalg::Solve;
use recon_cg::{Params, Regularised, Toeplitz};
use recon_core::{
    metrics::nrmse, Backend, CoilOp, Complex, CpuBackend, Direction, Grid, GroupProx, Plan3,
    Progress, Ratio, Result, Sign, Stencil, Targets,
};

/// Solves `(F^H F + lambda W^H W) x = F^H y` both ways and compares.
fn compare(lambda_rel: f64, seed: u64) {
    let grid = Grid::new([4, 4, 4], [100.0; 3]).unwrap();
    let n = grid.len();
    let mut rng = Rng::new(seed);
    let traj = random_traj(&grid, 160, &mut rng);
    let y = rng.complex(traj.len());
    let be = CpuBackend::<f64>::new();

    // Dense: A = F^H F + lambda W^H W, b = F^H y.
    let f = explicit_f(&grid, &traj);
    let q = common::q(&be, &grid, &traj);
    let lambda = recon_cg::lambda_abs(lambda_rel, &grid, &q).unwrap();
    let w = Stencil::uniform(grid.n);
    let wd = be.upload_weights(&w).unwrap();
    let mut a = Array2::<Complex<f64>>::zeros((n, n));
    for j in 0..n {
        // column j of W^H W, from the stencil applied to e_j
        let mut e = vec![Complex::new(0.0, 0.0); n];
        e[j] = Complex::new(1.0, 0.0);
        let mut col = vec![Complex::new(0.0, 0.0); n];
        be.add_whw(&mut col, lambda, &e, &wd).unwrap();
        for i in 0..n {
            let ff: Complex<f64> = (0..traj.len())
                .map(|m| f[m * n + i].conj() * f[m * n + j])
                .sum();
            a[[i, j]] = ff + col[i];
        }
    }
    let b: Array1<Complex<f64>> = (0..n)
        .map(|i| (0..traj.len()).map(|m| f[m * n + i].conj() * y[m]).sum())
        .collect();
    let dense = a.solve(&b).unwrap();

    // CG with the Toeplitz operator.
    let fhd = common::fhd(&be, &grid, &traj, &y);
    let mut t = Toeplitz::new(&be, &grid, &q).unwrap();
    let mut op = Regularised::new(&be, &mut t, &w, lambda).unwrap();
    let mut x = be.zeros(n).unwrap();
    let params = Params {
        iterations: 400,
        tolerance: 1e-13,
    };
    let mut seen = 0;
    let info = recon_cg::solve(&be, &mut op, &mut x, &fhd, &params, &mut |_, _| seen += 1).unwrap();
    assert_eq!(seen, info.iterations);
    assert_eq!(info.residuals.len(), info.iterations);
    assert!(info.relative_residual <= 1e-13, "{info:?}");
    let err = nrmse(&x, dense.as_slice().unwrap());
    // Residual 1e-13 times the condition number (<1e4 here) bounds the error.
    assert!(
        err < 1e-8,
        "lambda {lambda_rel}: CG vs dense relative error {err:e}"
    );
}

#[test]
fn cg_matches_dense_solve_unregularised() {
    compare(0.0, 11);
}

#[test]
fn cg_matches_dense_solve_regularised() {
    compare(0.05, 12);
}

#[test]
fn cg_of_zero_rhs_is_zero() {
    let grid = Grid::new([4, 4, 4], [100.0; 3]).unwrap();
    let be = CpuBackend::<f64>::new();
    let mut rng = Rng::new(13);
    let traj = random_traj(&grid, 50, &mut rng);
    let q = common::q(&be, &grid, &traj);
    let mut t = Toeplitz::new(&be, &grid, &q).unwrap();
    let b = be.zeros(64).unwrap();
    let mut x = rng.complex(64);
    let info =
        recon_cg::solve(&be, &mut t, &mut x, &b, &Params::default(), &mut |_, _| {}).unwrap();
    assert_eq!(info.iterations, 0);
    assert!(x.iter().all(|v| v.norm() == 0.0));
}

/// The CPU backend, reading CG's scalars only every `every` iterations as
/// the GPU does: everything else is the CPU's own.
struct Queued {
    cpu: CpuBackend<f64>,
    every: usize,
}

type V = Vec<Complex<f64>>;
type S = Vec<f64>;

impl Backend for Queued {
    type Real = f64;
    type Vector = V;
    type Weights = <CpuBackend<f64> as Backend>::Weights;
    type Scalars = S;
    type Fft = Plan3<f64>;
    /// The FFT plan of the `2n` grid: the product by pieces.
    type ToeplitzPlan = Plan3<f64>;

    fn describe(&self) -> String {
        format!("queued {}", self.cpu.describe())
    }
    fn read_every(&self) -> usize {
        self.every
    }
    fn sum_exp(
        &self,
        out: &mut [Complex<f64>],
        targets: Targets<'_>,
        first: usize,
        sources: &[[f64; 3]],
        coef: &[Complex<f64>],
        sign: Sign,
        progress: Progress<'_>,
    ) -> Result<()> {
        self.cpu
            .sum_exp(out, targets, first, sources, coef, sign, progress)
    }
    fn shard(&self, i: usize) -> Result<Self> {
        Ok(Queued {
            cpu: self.cpu.shard(i)?,
            every: self.every,
        })
    }
    fn transfer(&self, out: &mut V, from: &Self, x: &V) -> Result<()> {
        self.cpu.transfer(out, &from.cpu, x)
    }
    fn zeros(&self, len: usize) -> Result<V> {
        self.cpu.zeros(len)
    }
    fn upload(&self, host: &[Complex<f64>]) -> Result<V> {
        self.cpu.upload(host)
    }
    fn download(&self, out: &mut [Complex<f64>], x: &V) -> Result<()> {
        self.cpu.download(out, x)
    }
    fn len(&self, x: &V) -> usize {
        x.len()
    }
    fn copy(&self, out: &mut V, x: &V) -> Result<()> {
        self.cpu.copy(out, x)
    }
    fn axpy(&self, y: &mut V, a: f64, x: &V) -> Result<()> {
        self.cpu.axpy(y, a, x)
    }
    fn dot_re(&self, x: &V, y: &V) -> Result<f64> {
        self.cpu.dot_re(x, y)
    }
    fn scalars(&self, init: &[f64]) -> Result<S> {
        self.cpu.scalars(init)
    }
    fn read_scalars(&self, out: &mut [f64], s: &S) -> Result<()> {
        self.cpu.read_scalars(out, s)
    }
    fn dot_re_to(&self, s: &mut S, slot: usize, x: &V, y: &V) -> Result<()> {
        self.cpu.dot_re_to(s, slot, x, y)
    }
    fn axpy_ratio(&self, y: &mut V, a: f64, ratio: Ratio, s: &S, x: &V) -> Result<()> {
        self.cpu.axpy_ratio(y, a, ratio, s, x)
    }
    fn xpby_ratio(&self, y: &mut V, x: &V, ratio: Ratio, s: &S) -> Result<()> {
        self.cpu.xpby_ratio(y, x, ratio, s)
    }
    fn fft_plan(&self, shape: [usize; 3]) -> Result<Plan3<f64>> {
        self.cpu.fft_plan(shape)
    }
    fn fft3(&self, plan: &Plan3<f64>, x: &mut V, dir: Direction) -> Result<()> {
        self.cpu.fft3(plan, x, dir)
    }
    fn toeplitz_plan(&self, n: [usize; 3]) -> Result<Plan3<f64>> {
        self.cpu.fft_plan(n.map(|v| 2 * v))
    }
    fn toeplitz(&self, plan: &Plan3<f64>, out: &mut V, x: &V, fq: &V, work: &mut V) -> Result<()> {
        let n = plan.shape().map(|v| v / 2);
        recon_core::toeplitz_by_pieces(self, plan, out, x, fq, work, n)
    }
    fn mul(&self, x: &mut V, y: &V) -> Result<()> {
        self.cpu.mul(x, y)
    }
    fn pad(&self, out: &mut V, x: &V, n: [usize; 3]) -> Result<()> {
        self.cpu.pad(out, x, n)
    }
    fn crop(&self, out: &mut V, x: &V, n: [usize; 3]) -> Result<()> {
        self.cpu.crop(out, x, n)
    }
    fn coil(&self, out: &mut V, op: CoilOp, s: &V, x: &V) -> Result<()> {
        self.cpu.coil(out, op, s, x)
    }
    fn upload_weights(&self, w: &Stencil) -> Result<Self::Weights> {
        self.cpu.upload_weights(w)
    }
    fn add_whw(&self, out: &mut V, a: f64, x: &V, w: &Self::Weights) -> Result<()> {
        self.cpu.add_whw(out, a, x, w)
    }
    fn scale(&self, x: &mut V, a: f64) -> Result<()> {
        self.cpu.scale(x, a)
    }
    fn copy_part(&self, out: &mut V, at: usize, x: &V, from: usize, len: usize) -> Result<()> {
        self.cpu.copy_part(out, at, x, from, len)
    }
    fn grad(&self, out: &mut V, x: &V, n: [usize; 3]) -> Result<()> {
        self.cpu.grad(out, x, n)
    }
    fn grad_adjoint(&self, out: &mut V, y: &V, n: [usize; 3]) -> Result<()> {
        self.cpu.grad_adjoint(out, y, n)
    }
    fn group_prox(&self, x: &mut V, t: f64, components: usize, kind: GroupProx) -> Result<()> {
        self.cpu.group_prox(x, t, components, kind)
    }
    fn project_off(&self, v: &mut V, xi: &V) -> Result<()> {
        self.cpu.project_off(v, xi)
    }
    fn dwt(
        &self,
        out: &mut V,
        x: &V,
        n: [usize; 3],
        extent: [usize; 3],
        axis: usize,
        inverse: bool,
    ) -> Result<()> {
        self.cpu.dwt(out, x, n, extent, axis, inverse)
    }
    fn inverse_sum(&self, out: &mut V, a: &V, rho: f64, b: &V) -> Result<()> {
        self.cpu.inverse_sum(out, a, rho, b)
    }
    fn roll(&self, out: &mut V, x: &V, n: [usize; 3], shift: [usize; 3]) -> Result<()> {
        self.cpu.roll(out, x, n, shift)
    }
    fn shrink_outside(&self, x: &mut V, n: [usize; 3], corner: [usize; 3], t: f64) -> Result<()> {
        self.cpu.shrink_outside(x, n, corner, t)
    }
}

/// CG on a 6^3 Toeplitz problem with `be`: x, what CG reported, and the
/// residuals the callback saw.
fn cg_run<B: Backend<Real = f64, Vector = V>>(
    be: &B,
    tolerance: f64,
) -> (V, recon_cg::Info, Vec<(usize, f64)>) {
    let grid = Grid::new([6, 6, 6], [100.0; 3]).unwrap();
    let mut rng = Rng::new(21);
    let traj = random_traj(&grid, 300, &mut rng);
    let y = rng.complex(traj.len());
    let cpu = CpuBackend::<f64>::new();
    let q = common::q(&cpu, &grid, &traj);
    let fhd = common::fhd(&cpu, &grid, &traj, &y);
    let mut t = Toeplitz::new(be, &grid, &q).unwrap();
    let lambda = recon_cg::lambda_abs(0.01, &grid, &q).unwrap();
    let mut op = Regularised::new(be, &mut t, &Stencil::uniform(grid.n), lambda).unwrap();
    let mut x = be.zeros(grid.len()).unwrap();
    let params = Params {
        iterations: 60,
        tolerance,
    };
    let mut seen = Vec::new();
    let info = recon_cg::solve(be, &mut op, &mut x, &fhd, &params, &mut |i, r| {
        seen.push((i, r))
    })
    .unwrap();
    (x, info, seen)
}

#[test]
fn cg_reading_its_scalars_late_stops_where_it_would_have() {
    // Reading every iteration, CG stops at the tolerance after `stop`
    // iterations. Reading every 8, it queues up to 7 more, which the
    // scalars' gating (recon_core::Ratio) turns into no-ops: the same x to
    // the last bit, the same Info and the same callbacks.
    let one = Queued {
        cpu: CpuBackend::new(),
        every: 1,
    };
    let eight = Queued {
        cpu: CpuBackend::new(),
        every: 8,
    };
    for tolerance in [1e-3, 1e-4, 0.0] {
        let (x1, info1, seen1) = cg_run(&one, tolerance);
        let (x8, info8, seen8) = cg_run(&eight, tolerance);
        println!("tolerance {tolerance}: {} iterations", info1.iterations);
        if tolerance > 0.0 {
            assert!(
                info1.iterations < 60 && info1.iterations % 8 != 0,
                "tolerance {tolerance}: {} iterations do not test the gating",
                info1.iterations
            );
            assert!(info1.relative_residual <= tolerance);
            assert!(info1.residuals[info1.iterations - 2] > tolerance);
        } else {
            assert_eq!(info1.iterations, 60);
        }
        assert_eq!(info1, info8, "tolerance {tolerance}");
        assert_eq!(seen1, seen8, "tolerance {tolerance}");
        assert!(x1 == x8, "tolerance {tolerance}: x differs");
        let expected: Vec<usize> = (1..=info1.iterations).collect();
        assert_eq!(seen1.iter().map(|s| s.0).collect::<Vec<_>>(), expected);
    }
}

/// `out = -x`: negative definite.
struct Negative(usize);

impl<B: Backend> recon_cg::Normal<B> for Negative {
    fn len(&self) -> usize {
        self.0
    }
    fn apply(&mut self, backend: &B, out: &mut B::Vector, x: &B::Vector) -> Result<()> {
        backend.copy(out, &backend.zeros(self.0)?)?;
        backend.axpy(out, -1.0, x)
    }
}

#[test]
fn cg_refuses_an_indefinite_operator_and_a_non_finite_rhs() {
    for every in [1, 8] {
        let be = Queued {
            cpu: CpuBackend::new(),
            every,
        };
        let b = Rng::new(5).complex(64);
        let mut x = be.zeros(64).unwrap();
        let err = recon_cg::solve(
            &be,
            &mut Negative(64),
            &mut x,
            &b,
            &Params::default(),
            &mut |_, _| {},
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("CG broke down") && err.contains("iteration 1"),
            "{err}"
        );
        let mut bad = b.clone();
        bad[3].re = f64::NAN;
        let err = recon_cg::solve(
            &be,
            &mut Negative(64),
            &mut x,
            &bad,
            &Params::default(),
            &mut |_, _| {},
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("right-hand side is not finite"), "{err}");
    }
}
