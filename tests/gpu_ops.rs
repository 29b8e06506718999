//! The operator layer and the sparse priors on the GPU against the CPU in
//! float64: the primitives (finite differences, their adjoint, group
//! shrinkage and projection, the directional projection, partial copies),
//! the adjoint identity of the operators in float32, ADMM and PDHG on a
//! small Toeplitz problem, the wavelet prior's primitives and proximal map,
//! and the encoding operator (F on the GPU's NUFFT, its Toeplitz normal,
//! SENSE as the stack over coils of F after each map, fused), and a stack
//! sharded over two GPUs.
//! Without a usable GPU each test prints that it was skipped.

use crate::common;

use common::*;
use recon_cg::SparseParams;
use recon_core::{metrics::nrmse, Backend, Complex, CpuBackend, Grid, GroupProx};
use recon_cuda::{CudaBackend, Options};
use recon_ops::testing::{adjoint_error, normal_error, random};
use recon_ops::{
    shifted_wavelets, Compose, Directional, Gradient, LinearOp, Norm, Quadratic, Stack,
};

fn get(b: &CudaBackend, v: &<CudaBackend as Backend>::Vector) -> Vec<Complex<f64>> {
    let mut h = vec![Complex::default(); b.len(v)];
    b.download(&mut h, v).unwrap();
    up(&h)
}

/// A reference image with edges along every axis.
fn reference(n: [usize; 3]) -> Vec<f64> {
    (0..n.iter().product())
        .map(|i| {
            let c = recon_core::index3(n, i);
            (c[0] * 3 / n[0]) as f64 + 0.5 * (c[1] * 2 / n[1]) as f64 + 0.1 * c[2] as f64
        })
        .collect()
}

#[test]
fn sparse_primitives_match_cpu_f64() {
    let Some(g) = gpu(Options::default()) else {
        return;
    };
    let cpu = CpuBackend::<f64>::new();
    // sizes that are not multiples of a block, to reach the edges
    let n = [7, 5, 3];
    let len = 105;
    let x = random::<f64>(len, 1);
    let f = random::<f64>(3 * len, 2);
    let gx = g.upload(&down(&x)).unwrap();
    let gf = g.upload(&down(&f)).unwrap();
    // float32 inputs and float32 arithmetic of a few terms each: the
    // inputs' rounding (6e-8) bounds everything.
    let close = |what: &str, a: &[Complex<f64>], b: &[Complex<f64>]| {
        let e = nrmse(a, b);
        assert!(e < 1e-6, "{what}: GPU vs CPU {e:e}");
    };
    let (xr, fr) = (up(&down(&x)), up(&down(&f)));

    let mut c = vec![Complex::default(); 3 * len];
    cpu.grad(&mut c, &xr, n).unwrap();
    let mut o = g.zeros(3 * len).unwrap();
    g.grad(&mut o, &gx, n).unwrap();
    close("grad", &get(&g, &o), &c);

    let mut c = vec![Complex::default(); len];
    cpu.grad_adjoint(&mut c, &fr, n).unwrap();
    let mut o = g.zeros(len).unwrap();
    g.grad_adjoint(&mut o, &gf, n).unwrap();
    close("grad_adjoint", &get(&g, &o), &c);

    for components in [1, 3] {
        for kind in [GroupProx::Shrink, GroupProx::Project] {
            let mut c = fr.clone();
            cpu.group_prox(&mut c, 0.7, components, kind).unwrap();
            let mut o = g.upload(&down(&f)).unwrap();
            g.group_prox(&mut o, 0.7, components, kind).unwrap();
            close(
                &format!("group_prox {kind:?} of {components}"),
                &get(&g, &o),
                &c,
            );
        }
    }

    // project_off, through the directional operator (its field is private)
    let mut pc = Directional::from_reference(&cpu, n, &reference(n), 0.1).unwrap();
    let mut pg = Directional::from_reference(&g, n, &reference(n), 0.1).unwrap();
    let mut c = vec![Complex::default(); 3 * len];
    pc.forward(&cpu, &mut c, &fr).unwrap();
    let mut o = g.zeros(3 * len).unwrap();
    pg.forward(&g, &mut o, &gf).unwrap();
    close("project_off", &get(&g, &o), &c);

    let mut o = g.zeros(3 * len).unwrap();
    g.copy_part(&mut o, 10, &gx, 3, 50).unwrap();
    let mut c = vec![Complex::default(); 3 * len];
    cpu.copy_part(&mut c, 10, &xr, 3, 50).unwrap();
    close("copy_part", &get(&g, &o), &c);
    assert!(
        g.copy_part(&mut o, 300, &gx, 0, 50).is_err(),
        "past the end"
    );

    let mut o = g.upload(&down(&x)).unwrap();
    g.scale(&mut o, -1.5).unwrap();
    let c: Vec<_> = xr.iter().map(|v| v * -1.5).collect();
    close("scale", &get(&g, &o), &c);
}

#[test]
fn operators_are_adjoint_on_the_gpu() {
    let Some(g) = gpu(Options::default()) else {
        return;
    };
    let n = [8, 6, 5];
    let dir = || Directional::from_reference(&g, n, &reference(n), 0.1).unwrap();
    let grad = || Gradient::new(&g, n).unwrap();
    // the quadratic prior's W: random edge weights and a diagonal
    let len: usize = n.iter().product();
    let mut rng = Rng::new(12);
    let edges = [0, 1, 2].map(|_| (0..len).map(|_| 0.1 + rng.next_f64()).collect());
    let diag = (0..len).map(|_| rng.next_f64()).collect();
    let w = recon_core::Stencil::weighted(n, edges)
        .unwrap()
        .with_diag(diag)
        .unwrap();
    let mut ops: Vec<(&str, Box<dyn LinearOp<CudaBackend>>)> = vec![
        ("gradient", Box::new(grad())),
        ("weighted W", Box::new(Quadratic::new(&g, &w).unwrap())),
        ("directional", Box::new(dir())),
        (
            "directional gradient",
            Box::new(Compose::new(&g, dir(), grad()).unwrap()),
        ),
        (
            "stack",
            Box::new(
                Stack::new(
                    &g,
                    vec![
                        Box::new(grad()),
                        Box::new(Compose::new(&g, dir(), grad()).unwrap()),
                    ],
                )
                .unwrap(),
            ),
        ),
    ];
    for (name, op) in &mut ops {
        let a = adjoint_error(&g, op.as_mut(), 3).unwrap();
        let m = normal_error(&g, op.as_mut(), 4).unwrap();
        // float32 vectors, double reductions: a few float32 roundings.
        assert!(a < 1e-6, "{name}: adjoint off by {a:e}");
        assert!(m < 1e-6, "{name}: normal off by {m:e}");
    }
}

#[test]
fn admm_and_pdhg_on_the_gpu_match_cpu_f64() {
    let Some(g) = gpu(Options::default()) else {
        return;
    };
    let cpu = CpuBackend::<f64>::new();
    let p = sparse_problem(Grid::new([16, 16, 8], [200.0; 3]).unwrap(), 1500, 0.01, 9);
    let params = SparseParams {
        iterations: 40,
        ..Default::default()
    };
    let r = reference(p.grid.n);
    for (pdhg, preconditioned) in [(false, false), (false, true), (true, false)] {
        for reference in [None, Some(&r[..])] {
            // the same iterations on each device
            let case = SparseCase {
                pdhg,
                preconditioned,
                reference,
            };
            let (c, _) = p.solve(&cpu, case, &params);
            let (gg, _) = p.solve(&g, case, &params);
            let e = nrmse(&up(&gg), &c);
            println!("{case:?}: GPU f32 vs CPU f64 {e:.2e}");
            // float32 over 40 iterations of a contraction: rounding does not
            // grow, but ADMM's rho switches may fall differently; 1e-3 is
            // a hundredth of the PSNR resolution that matters.
            assert!(e < 1e-3, "{case:?}: GPU vs CPU {e:e}");
        }
    }
}

#[test]
fn wavelet_primitives_and_prox_match_cpu_f64() {
    let Some(g) = gpu(Options::default()) else {
        return;
    };
    let cpu = CpuBackend::<f64>::new();
    // not a multiple of a block; a corner short of the grid on two axes
    let n = [18, 10, 6];
    let len = 1080;
    let x = random::<f64>(len, 21);
    let xr = up(&down(&x));
    let gx = g.upload(&down(&x)).unwrap();
    // float32 inputs, four-tap sums in double: the inputs' rounding.
    let close = |what: &str, a: &[Complex<f64>], b: &[Complex<f64>]| {
        let e = nrmse(a, b);
        assert!(e < 1e-6, "{what}: GPU vs CPU {e:e}");
    };
    for axis in 0..3 {
        for inverse in [false, true] {
            let extent = [12, 10, 4];
            let mut c = vec![Complex::default(); len];
            cpu.dwt(&mut c, &xr, n, extent, axis, inverse).unwrap();
            let mut o = g.zeros(len).unwrap();
            g.dwt(&mut o, &gx, n, extent, axis, inverse).unwrap();
            close(
                &format!("dwt axis {axis} inverse {inverse}"),
                &get(&g, &o),
                &c,
            );
        }
    }
    let mut o = g.zeros(len).unwrap();
    assert!(
        g.dwt(&mut o, &gx, n, [12, 9, 4], 1, false).is_err(),
        "odd extent"
    );
    let mut c = vec![Complex::default(); len];
    cpu.roll(&mut c, &xr, n, [5, 13, 2]).unwrap();
    g.roll(&mut o, &gx, n, [5, 13, 2]).unwrap();
    close("roll", &get(&g, &o), &c);
    // two images' worth: the corner of each
    let xx = random::<f64>(2 * len, 23);
    let mut c = up(&down(&xx));
    cpu.shrink_outside(&mut c, n, [9, 5, 3], 0.6).unwrap();
    let mut o = g.upload(&down(&xx)).unwrap();
    g.shrink_outside(&mut o, n, [9, 5, 3], 0.6).unwrap();
    close("shrink_outside", &get(&g, &o), &c);

    // the stack of shifted transforms on the GPU: orthonormal, and its
    // coefficients and their prox as the CPU's
    let n = [32, 16, 8];
    let len = 4096;
    let (mut kg, mut ng) = shifted_wavelets(&g, n, 4).unwrap();
    let (mut kc, mut nc) = shifted_wavelets(&cpu, n, 4).unwrap();
    let a = adjoint_error(&g, &mut kg, 3).unwrap();
    let m = normal_error(&g, &mut kg, 4).unwrap();
    // float32 vectors, double reductions, a dozen passes of four taps
    assert!(
        a < 1e-6 && m < 1e-6,
        "wavelets: adjoint {a:e}, K^H K = I {m:e}"
    );
    let x = random::<f64>(len, 22);
    let mut c = vec![Complex::default(); 4 * len];
    kc.forward(&cpu, &mut c, &up(&down(&x))).unwrap();
    nc.prox(&cpu, &mut c, 0.01).unwrap();
    let mut o = g.zeros(4 * len).unwrap();
    kg.forward(&g, &mut o, &g.upload(&down(&x)).unwrap())
        .unwrap();
    ng.prox(&g, &mut o, 0.01).unwrap();
    close("shifted wavelets, shrunk", &get(&g, &o), &c);
}

#[test]
fn the_encoding_operator_on_the_gpu_matches_cpu_f64() {
    let Some(g) = gpu(Options::default()) else {
        return;
    };
    let cpu = CpuBackend::<f64>::new();
    let grid = Grid::new([16, 12, 10], [200.0; 3]).unwrap();
    let mut rng = Rng::new(31);
    let traj = random_traj(&grid, 2000, &mut rng);
    let engine = |tolerance| recon_encoding::Engine::Nufft { tolerance };
    let pc = recon_encoding::Plan::new(&cpu, engine(1e-10), &grid, &traj).unwrap();
    let pg = recon_encoding::Plan::new(&g, engine(1e-6), &grid, &traj).unwrap();
    let qc = common::q(&cpu, &grid, &traj);
    let qg = down(&qc);
    let mut fc = recon_encoding::Encoding::new(&cpu, &pc, Some(&qc)).unwrap();
    let mut fg = recon_encoding::Encoding::new(&g, &pg, Some(&qg)).unwrap();
    // float32 vectors and a NUFFT at 1e-6
    let a = adjoint_error(&g, &mut fg, 3).unwrap();
    assert!(a < 1e-5, "adjoint on the GPU {a:e}");
    let x = random::<f64>(grid.len(), 4);
    let y = random::<f64>(traj.len(), 5);
    let gx = g.upload(&down(&x)).unwrap();
    let gy = g.upload(&down(&y)).unwrap();
    let (mut c, mut o) = (cpu.zeros(traj.len()).unwrap(), g.zeros(traj.len()).unwrap());
    fc.forward(&cpu, &mut c, &up(&down(&x))).unwrap();
    fg.forward(&g, &mut o, &gx).unwrap();
    let e = nrmse(&get(&g, &o), &c);
    assert!(e < 1e-5, "F: GPU vs CPU {e:e}");
    let (mut c, mut o) = (cpu.zeros(grid.len()).unwrap(), g.zeros(grid.len()).unwrap());
    fc.adjoint(&cpu, &mut c, &up(&down(&y))).unwrap();
    fg.adjoint(&g, &mut o, &gy).unwrap();
    let e = nrmse(&get(&g, &o), &c);
    assert!(e < 1e-5, "F^H: GPU vs CPU {e:e}");
    fc.normal(&cpu, &mut c, &up(&down(&x))).unwrap();
    fg.normal(&g, &mut o, &gx).unwrap();
    let e = nrmse(&get(&g, &o), &c);
    assert!(e < 1e-5, "Toeplitz normal: GPU vs CPU {e:e}");

    // SENSE as the stack over coils of F after each map, F shared: on the
    // GPU its normal map takes the fused passes (each map folded into the
    // Toeplitz product, the coils added in place).
    let maps: Vec<Vec<Complex<f64>>> = (0..3).map(|_| rng.complex(grid.len())).collect();
    let sense = |fc: recon_ops::Shared<_>, be: &CpuBackend<f64>| {
        let blocks: Vec<Box<dyn LinearOp<CpuBackend<f64>> + '_>> = maps
            .iter()
            .map(|s| -> Box<dyn LinearOp<CpuBackend<f64>> + '_> {
                let d = recon_ops::Diagonal::new(be, be.upload(s).unwrap()).unwrap();
                Box::new(Compose::new(be, fc.clone(), d).unwrap())
            })
            .collect();
        Stack::new(be, blocks).unwrap()
    };
    let mut ec = sense(recon_ops::Shared::new(fc), &cpu);
    let fg = recon_ops::Shared::new(fg);
    let blocks: Vec<Box<dyn LinearOp<CudaBackend> + '_>> = maps
        .iter()
        .map(|s| -> Box<dyn LinearOp<CudaBackend> + '_> {
            let d = recon_ops::Diagonal::new(&g, g.upload(&down(s)).unwrap()).unwrap();
            Box::new(Compose::new(&g, fg.clone(), d).unwrap())
        })
        .collect();
    let mut eg = Stack::new(&g, blocks).unwrap();
    ec.normal(&cpu, &mut c, &up(&down(&x))).unwrap();
    eg.normal(&g, &mut o, &gx).unwrap();
    // float32 over three coils' Toeplitz products
    let e = nrmse(&get(&g, &o), &c);
    assert!(e < 1e-5, "SENSE stack normal: GPU vs CPU {e:e}");
}

/// A part of the sharded test: the stack over `maps` of the gradient after
/// each map (no operator here borrows its device).
fn gradient_stack<B: Backend + 'static>(
    b: &B,
    n: [usize; 3],
    maps: &[Vec<Complex<B::Real>>],
) -> recon_core::Result<Box<dyn LinearOp<B>>> {
    let blocks = maps
        .iter()
        .map(|s| -> recon_core::Result<Box<dyn LinearOp<B>>> {
            let d = recon_ops::Diagonal::new(b, b.upload(s)?)?;
            Ok(Box::new(Compose::new(b, Gradient::new(b, n)?, d)?))
        })
        .collect::<recon_core::Result<_>>()?;
    Ok(Box::new(Stack::new(b, blocks)?))
}

#[test]
fn a_stack_sharded_over_two_gpus_matches_cpu_f64() {
    let Some(g) = gpu(Options::default()) else {
        return;
    };
    if g.shards() < 2 {
        println!("skipped: one GPU (the sharded operator needs two)");
        return;
    }
    let cpu = CpuBackend::<f64>::with_shards(2).unwrap();
    let n = [12, 10, 8];
    let len: usize = n.iter().product();
    let mut rng = Rng::new(41);
    let maps: Vec<Vec<Complex<f64>>> = (0..5).map(|_| rng.complex(len)).collect();
    let maps32: Vec<Vec<Complex<f32>>> = maps.iter().map(|m| down(m)).collect();
    let ranges = [0..3, 3..5];
    let mut c = recon_ops::Sharded::new(&cpu, 2, |b, p| {
        gradient_stack(b, n, &maps[ranges[p].clone()])
    })
    .unwrap();
    let mut s = recon_ops::Sharded::new(&g, 2, |b, p| {
        gradient_stack(b, n, &maps32[ranges[p].clone()])
    })
    .unwrap();
    let [m, _] = c.shape();
    let x = random::<f64>(len, 42);
    let y = random::<f64>(m, 43);
    let (gx, gy) = (g.upload(&down(&x)).unwrap(), g.upload(&down(&y)).unwrap());
    // float32 against float64 through a few differences and maps
    let close = |what: &str, got: &[Complex<f64>], want: &[Complex<f64>]| {
        let e = nrmse(got, want);
        assert!(e < 1e-5, "{what}: two GPUs vs CPU {e:e}");
    };
    let (mut o, mut w) = (g.zeros(m).unwrap(), cpu.zeros(m).unwrap());
    s.forward(&g, &mut o, &gx).unwrap();
    c.forward(&cpu, &mut w, &up(&down(&x))).unwrap();
    close("forward", &get(&g, &o), &w);
    let (mut o, mut w) = (g.zeros(len).unwrap(), cpu.zeros(len).unwrap());
    s.adjoint(&g, &mut o, &gy).unwrap();
    c.adjoint(&cpu, &mut w, &up(&down(&y))).unwrap();
    close("adjoint", &get(&g, &o), &w);
    s.normal(&g, &mut o, &gx).unwrap();
    c.normal(&cpu, &mut w, &up(&down(&x))).unwrap();
    close("normal", &get(&g, &o), &w);
}
