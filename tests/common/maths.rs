//! Small problems with fixed seeds, the float32/float64 conversions of the
//! GPU tests, and the slow, obvious references (explicit F, the exact
//! engine, dense solves' pieces) that fast paths are checked against.

use super::repo;
use recon_core::{Complex, Grid};

/// A tiny deterministic pseudo-random stream (SplitMix64), so tests need no RNG crate.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }
    pub fn next_f64(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
    }
    /// Uniform in [-1, 1).
    pub fn sym(&mut self) -> f64 {
        2.0 * self.next_f64() - 1.0
    }
    /// Uniform in 0 .. n.
    pub fn below(&mut self, n: usize) -> usize {
        ((self.next_f64() * n as f64) as usize).min(n.saturating_sub(1))
    }
    pub fn complex(&mut self, n: usize) -> Vec<Complex<f64>> {
        (0..n)
            .map(|_| Complex::new(self.sym(), self.sym()))
            .collect()
    }
}

/// Random k-space samples inside Nyquist (at k_z = 0 on a 2-D grid).
pub fn random_traj(grid: &Grid, m: usize, rng: &mut Rng) -> Vec<[f64; 3]> {
    let half = grid.n.map(|n| if n == 1 { 0.0 } else { n as f64 / 2.0 });
    (0..m)
        .map(|_| [0, 1, 2].map(|d| rng.sym() * half[d]))
        .collect()
}

/// The GPU backend, or `None` after printing why the test is skipped: a
/// GPU test without a GPU says so and checks nothing.
pub fn gpu(options: recon_cuda::Options) -> Option<recon_cuda::CudaBackend> {
    match recon_cuda::probe() {
        Err(why) => {
            println!("skipped: no usable GPU ({why})");
            None
        }
        Ok(_) => Some(recon_cuda::CudaBackend::new(options).expect("open the GPU")),
    }
}

/// float32 values widened to float64.
pub fn up(v: &[Complex<f32>]) -> Vec<Complex<f64>> {
    v.iter()
        .map(|c| Complex::new(c.re as f64, c.im as f64))
        .collect()
}

/// float64 values rounded to float32.
pub fn down(v: &[Complex<f64>]) -> Vec<Complex<f32>> {
    v.iter()
        .map(|c| Complex::new(c.re as f32, c.im as f32))
        .collect()
}

/// Complex inner product `<a, b> = sum conj(a) b`.
pub fn inner(a: &[Complex<f64>], b: &[Complex<f64>]) -> Complex<f64> {
    a.iter().zip(b).map(|(x, y)| x.conj() * y).sum()
}

/// The explicit encoding matrix F (M x N), row-major, from its definition.
pub fn explicit_f(grid: &Grid, traj: &[[f64; 3]]) -> Vec<Complex<f64>> {
    let vox = grid.voxels();
    let mut f = Vec::with_capacity(traj.len() * grid.len());
    for k in traj {
        let phi = grid.phi(*k);
        for n in 0..grid.len() {
            let x = vox.point(n);
            let t = k[0] * x[0] + k[1] * x[1] + k[2] * x[2];
            f.push(Complex::from_polar(phi, -std::f64::consts::TAU * t));
        }
    }
    f
}

/// `(F x, F^H F x)` by the explicit matrix `f` (M x N, as [`explicit_f`]).
pub fn explicit_normal(
    f: &[Complex<f64>],
    n: usize,
    x: &[Complex<f64>],
) -> (Vec<Complex<f64>>, Vec<Complex<f64>>) {
    let m = f.len() / n;
    let fx: Vec<Complex<f64>> = (0..m)
        .map(|i| (0..n).map(|j| f[i * n + j] * x[j]).sum())
        .collect();
    let fhfx = (0..n)
        .map(|j| (0..m).map(|i| f[i * n + j].conj() * fx[i]).sum())
        .collect();
    (fx, fhfx)
}

pub fn no_progress() -> impl FnMut(u64, u64) {
    |_, _| {}
}

/// The anatomical-prior fixture (tests/fixtures/prior-robustness*.toml) on
/// an `n^3` grid over 240 mm: noisy TPI data (SNR 30), the sodium truth, and
/// the proton-density reference rasterised at twice the resolution, as a
/// proton scan would be, then averaged onto the grid.
pub struct PriorFixture {
    pub grid: Grid,
    pub traj: Vec<[f64; 3]>,
    pub data: Vec<Complex<f64>>,
    pub truth: Vec<f64>,
    pub reference: Vec<f64>,
}

/// See [`PriorFixture`]; `tpi` is (cones, projections, samples).
pub fn prior_fixture(n: usize, tpi: [usize; 3], seed: u64) -> PriorFixture {
    let grid = Grid::new([n; 3], [240.0; 3]).unwrap();
    let [cones, projections, samples] = tpi;
    let traj = recon_synth::Trajectory::Tpi {
        cones,
        projections,
        samples,
        p: 0.3,
        kmax: 1.0,
    }
    .generate(&grid)
    .unwrap();
    let na = fixture_phantom("prior-robustness.toml");
    let mut data = na.kspace(&grid, &traj);
    recon_synth::add_noise(&mut data, recon_synth::Noise { snr: 30.0, seed });
    PriorFixture {
        reference: reference_on_grid(&grid, &fixture_phantom("prior-robustness-pd.toml")),
        truth: na.rasterise(&grid, 4),
        grid,
        traj,
        data,
    }
}

/// A phantom of tests/fixtures.
pub fn fixture_phantom(name: &str) -> recon_synth::Phantom {
    recon_synth::Phantom::load(&repo().join("tests/fixtures").join(name)).unwrap()
}

/// `pd` rasterised at twice `grid`'s resolution and averaged onto it.
pub fn reference_on_grid(grid: &Grid, pd: &recon_synth::Phantom) -> Vec<f64> {
    let fine = Grid::new(grid.n.map(|n| 2 * n), grid.fov_mm).unwrap();
    let v = recon_core::Volume::new(fine, pd.rasterise(&fine, 2)).unwrap();
    let mut out = vec![0.0; grid.len()];
    recon_prior::resample(&mut out, grid, &v).unwrap();
    out
}

/// SENSE's solver problem on `b`: the data term recon-encoding's
/// `SenseTerm` over `maps` (the exact engine's F, so no NUFFT is made), F^H
/// D given on the host, the coils shared among `parts` devices (`None`: as
/// the grid merits).
pub fn sense_problem<'b, B: recon_encoding::NufftBackend>(
    b: &'b B,
    grid: &Grid,
    traj: &[[f64; 3]],
    q: &[Complex<B::Real>],
    fhd: &[Complex<B::Real>],
    maps: &[Vec<Complex<B::Real>>],
    parts: Option<usize>,
) -> recon_core::Result<recon_cg::Problem<'b, B>> {
    let t = recon_cg::Toeplitz::new(b, grid, q)?;
    let s = recon_encoding::SenseTerm::new(b, &exact(b, grid, traj), t, maps, parts)?;
    let peak = recon_cg::q_peak(grid, q)?;
    recon_cg::Problem::on_device(b, grid, peak, Box::new(s), b.upload(fhd)?)
}

/// The exact engine's plan: the reference every fast path is tested against.
pub fn exact<'b, B: recon_encoding::NufftBackend>(
    b: &'b B,
    grid: &Grid,
    traj: &[[f64; 3]],
) -> recon_encoding::Plan<'b, B> {
    recon_encoding::Plan::new(b, recon_encoding::Engine::Exact, grid, traj).unwrap()
}

/// Q by exact summation on `b`.
pub fn q<B: recon_encoding::NufftBackend>(
    b: &B,
    grid: &Grid,
    traj: &[[f64; 3]],
) -> Vec<Complex<B::Real>> {
    recon_q::compute(&exact(b, grid, traj), &mut no_progress()).unwrap()
}

/// F^H D by exact summation on `b`.
pub fn fhd<B: recon_encoding::NufftBackend>(
    b: &B,
    grid: &Grid,
    traj: &[[f64; 3]],
    data: &[Complex<f64>],
) -> Vec<Complex<B::Real>> {
    let mut out = vec![Complex::default(); grid.len()];
    exact(b, grid, traj)
        .adjoint(&mut out, data, &mut no_progress())
        .unwrap();
    out
}

/// F rho by exact summation on `b`.
pub fn forward<B: recon_encoding::NufftBackend>(
    b: &B,
    grid: &Grid,
    traj: &[[f64; 3]],
    rho: &[Complex<B::Real>],
) -> Vec<Complex<B::Real>> {
    let mut out = vec![Complex::default(); traj.len()];
    exact(b, grid, traj)
        .forward(&mut out, rho, &mut no_progress())
        .unwrap();
    out
}

/// `(F^H F + lambda W^H W) x = F^H D` by CG from Q and F^H D, lambda
/// relative to Q's peak.
#[allow(clippy::type_complexity)]
pub fn cg<B: recon_encoding::NufftBackend>(
    b: &B,
    grid: &Grid,
    q: &[Complex<B::Real>],
    fhd: &[Complex<B::Real>],
    w: &recon_core::Stencil,
    lambda: f64,
    params: &recon_cg::Params,
) -> (Vec<Complex<B::Real>>, recon_cg::Info) {
    recon_cg::Problem::new(b, grid, q, fhd)
        .unwrap()
        .solve(b, w, lambda, params, &mut |_, _| {})
        .unwrap()
}

/// A small Toeplitz problem of the sparse priors: Q and F^H D of random
/// samples and data on `grid`, Q's peak (ADMM's scale) and lambda at
/// `lambda_rel` of the peak of |F^H D|.
pub struct SparseProblem {
    pub grid: Grid,
    pub q: Vec<Complex<f64>>,
    pub b: Vec<Complex<f64>>,
    pub scale: f64,
    pub lambda: f64,
}

pub fn sparse_problem(grid: Grid, samples: usize, lambda_rel: f64, seed: u64) -> SparseProblem {
    let be = recon_core::CpuBackend::<f64>::new();
    let mut rng = Rng::new(seed);
    let traj = random_traj(&grid, samples, &mut rng);
    let y = rng.complex(traj.len());
    let q = q(&be, &grid, &traj);
    let b = fhd(&be, &grid, &traj, &y);
    SparseProblem {
        scale: recon_cg::q_peak(&grid, &q).unwrap(),
        lambda: lambda_rel * b.iter().map(|v| v.norm()).fold(0.0, f64::max),
        grid,
        q,
        b,
    }
}

/// How [`SparseProblem::solve`] solves.
#[derive(Clone, Copy, Debug)]
pub struct SparseCase<'a> {
    pub pdhg: bool,
    /// ADMM preconditioned by the circulant.
    pub preconditioned: bool,
    /// Directional TV with this reference and eta 0.1; else TV.
    pub reference: Option<&'a [f64]>,
}

impl SparseProblem {
    /// x from 0 on backend `be` (its precision), and what the solver did.
    pub fn solve<B: recon_core::Backend + 'static>(
        &self,
        be: &B,
        case: SparseCase<'_>,
        params: &recon_cg::SparseParams,
    ) -> (Vec<Complex<B::Real>>, recon_cg::Info) {
        use recon_core::Real;
        use recon_ops::{Compose, Directional, Gradient, LinearOp};
        let n = self.grid.n;
        let cast = |v: &[Complex<f64>]| -> Vec<Complex<B::Real>> {
            v.iter()
                .map(|c| Complex::new(B::Real::of(c.re), B::Real::of(c.im)))
                .collect()
        };
        let mut t = recon_cg::Toeplitz::new(be, &self.grid, &cast(&self.q)).unwrap();
        let mut op: Box<dyn LinearOp<B>> = match case.reference {
            Some(r) => Box::new(
                Compose::new(
                    be,
                    Directional::from_reference(be, n, r, 0.1).unwrap(),
                    Gradient::new(be, n).unwrap(),
                )
                .unwrap(),
            ),
            None => Box::new(Gradient::new(be, n).unwrap()),
        };
        let prior = recon_cg::Sparse {
            op: op.as_mut(),
            norm: &mut recon_ops::GroupNorm { components: 3 },
            lambda: self.lambda,
            gram: recon_cg::Gram::Laplacian,
        };
        let b = be.upload(&cast(&self.b)).unwrap();
        let mut x = be.zeros(self.grid.len()).unwrap();
        let info = if case.pdhg {
            recon_cg::pdhg(be, &mut t, prior, &mut x, &b, params, &mut |_, _| {}).unwrap()
        } else {
            let mut m = case.preconditioned.then(|| {
                let eig = recon_cg::toeplitz_eigenvalues(&self.grid, &self.q).unwrap();
                recon_cg::Circulant::new(be, n, &eig, 1.0).unwrap()
            });
            let pre = m.as_mut();
            recon_cg::admm(
                be,
                &mut t,
                prior,
                &mut x,
                &b,
                self.scale,
                pre,
                params,
                &mut |_, _| {},
            )
            .unwrap()
        };
        let mut out = vec![Complex::default(); self.grid.len()];
        be.download(&mut out, &x).unwrap();
        (out, info)
    }
}

/// `A = I` on the CPU in float64: the data term of denoising.
pub struct Eye(pub usize);

impl recon_cg::Normal<recon_core::CpuBackend<f64>> for Eye {
    fn len(&self) -> usize {
        self.0
    }
    fn apply(
        &mut self,
        be: &recon_core::CpuBackend<f64>,
        out: &mut Vec<Complex<f64>>,
        x: &Vec<Complex<f64>>,
    ) -> recon_core::Result<()> {
        use recon_core::Backend;
        be.copy(out, x)
    }
}
