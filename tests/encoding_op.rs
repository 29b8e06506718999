//! The encoding operator F as a `LinearOp` (recon-encoding's `Encoding`)
//! on the CPU in float64, by the NUFFT and by the exact sums: adjoint,
//! forward map against the exact engine, normal map by the Toeplitz product
//! against adjoint-after-forward; made without a plan; and
//! SENSE written with the operator layer, the stack over coils of F after
//! each coil's map, against its sum over coils written out.

use crate::common;

use common::*;
use recon_cg::{Normal, Toeplitz};
use recon_core::{metrics::nrmse, Backend, CoilOp, Complex, CpuBackend, Grid};
use recon_encoding::{Encoding, Engine, Plan};
use recon_ops::testing::{adjoint_error, normal_error, random};
use recon_ops::{Compose, Diagonal, LinearOp, Shared, Stack};

type Cpu = CpuBackend<f64>;

fn problem(seed: u64) -> (Grid, Vec<[f64; 3]>) {
    let grid = Grid::new([8, 6, 10], [200.0, 150.0, 240.0]).unwrap();
    let mut rng = Rng::new(seed);
    let traj = random_traj(&grid, 300, &mut rng);
    (grid, traj)
}

#[test]
fn the_encoding_operator_is_f_and_its_normal_the_toeplitz_product() {
    let be = Cpu::new();
    let (grid, traj) = problem(3);
    let plan = Plan::new(&be, Engine::Nufft { tolerance: 1e-10 }, &grid, &traj).unwrap();
    let q = common::q(&be, &grid, &traj);
    let mut f = Encoding::new(&be, &plan, Some(&q)).unwrap();
    assert_eq!(f.shape(), [300, grid.len()]);
    // type 1 and its adjoint share one spreading kernel: exact adjoints up
    // to float64 rounding
    let a = adjoint_error(&be, &mut f, 1).unwrap();
    assert!(a < 1e-12, "adjoint {a:e}");
    // the Toeplitz normal against F^H F through the NUFFT: the NUFFT's
    // tolerance (1e-10) bounds both
    let e = normal_error(&be, &mut f, 2).unwrap();
    assert!(e < 1e-8, "Toeplitz normal vs F^H F {e:e}");
    // F against the exact engine's forward map
    let x = random::<f64>(grid.len(), 4);
    let mut fx = be.zeros(traj.len()).unwrap();
    f.forward(&be, &mut fx, &x).unwrap();
    let exact = common::forward(&be, &grid, &traj, &x);
    let err = nrmse(&fx, &exact);
    assert!(err < 1e-8, "F vs the exact engine {err:e}");
    // without Q, the normal map is the adjoint after the forward map
    let mut plain = Encoding::new(&be, &plan, None).unwrap();
    // the same products as normal_error's own: float64 rounding
    assert!(normal_error(&be, &mut plain, 2).unwrap() < 1e-14);
    // The exact engine's F: the exact sums, through the host.
    let exact_plan = Plan::new(&be, Engine::Exact, &grid, &traj).unwrap();
    let mut fe = Encoding::new(&be, &exact_plan, Some(&q)).unwrap();
    // the exact sums and their adjoint: float64 rounding
    let a = adjoint_error(&be, &mut fe, 5).unwrap();
    assert!(a < 1e-12, "exact adjoint {a:e}");
    let mut ex = be.zeros(traj.len()).unwrap();
    fe.forward(&be, &mut ex, &x).unwrap();
    // the same sums as common::forward's
    let err = nrmse(&ex, &exact);
    assert!(err < 1e-13, "exact F vs the exact engine {err:e}");
    // its Toeplitz normal against F^H F by the exact sums: Q's own rounding
    let e = normal_error(&be, &mut fe, 6).unwrap();
    assert!(e < 1e-10, "exact engine: Toeplitz normal vs F^H F {e:e}");
}

#[test]
fn the_encoding_operator_borrows_nothing_and_makes_its_nufft_when_first_used() {
    let be = Cpu::new();
    let (grid, traj) = problem(7);
    let q = common::q(&be, &grid, &traj);
    // made from the engine, grid and trajectory alone, with a Toeplitz
    // product of its own: no plan outlives it
    let t = Toeplitz::new(&be, &grid, &q).unwrap();
    let mut f = Encoding::with(Engine::Nufft { tolerance: 1e-10 }, &grid, &traj, Some(t)).unwrap();
    // the normal map needs no NUFFT; the forward map makes it
    let x = random::<f64>(grid.len(), 8);
    let mut out = be.zeros(grid.len()).unwrap();
    f.normal(&be, &mut out, &x).unwrap();
    let e = normal_error(&be, &mut f, 9).unwrap();
    // the NUFFT's tolerance (1e-10) bounds F^H F through it, as above
    assert!(e < 1e-8, "Toeplitz normal vs F^H F {e:e}");
    // bad input: a Toeplitz product of another grid, a trajectory with a
    // NaN, a tolerance float64 cannot reach
    let other = Grid::new([4, 4, 4], [100.0; 3]).unwrap();
    let small_q = common::q(&be, &other, &traj);
    let t = Toeplitz::new(&be, &other, &small_q).unwrap();
    let e = Encoding::with(Engine::Nufft { tolerance: 1e-6 }, &grid, &traj, Some(t))
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("Toeplitz product"), "{e}");
    let mut bad = traj.clone();
    bad[3][1] = f64::NAN;
    let e = Encoding::<Cpu>::with(Engine::Exact, &grid, &bad, None)
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("sample 3"), "{e}");
    let e = Encoding::<Cpu>::with(Engine::Nufft { tolerance: 1e-20 }, &grid, &traj, None)
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("tolerance"), "{e}");
}

#[test]
fn sense_is_the_stack_over_coils_of_f_after_each_map() {
    let be = Cpu::new();
    let (grid, traj) = problem(5);
    let mut rng = Rng::new(6);
    let maps: Vec<Vec<Complex<f64>>> = (0..3).map(|_| rng.complex(grid.len())).collect();
    let plan = Plan::new(&be, Engine::Nufft { tolerance: 1e-10 }, &grid, &traj).unwrap();
    let q = common::q(&be, &grid, &traj);
    // E = [F S_1; F S_2; F S_3], the one F (one FFT(Q)) shared by the coils
    let f = Shared::new(Encoding::new(&be, &plan, Some(&q)).unwrap());
    let blocks: Vec<Box<dyn LinearOp<Cpu> + '_>> = maps
        .iter()
        .map(|s| -> Box<dyn LinearOp<Cpu> + '_> {
            let d = Diagonal::new(&be, be.upload(s).unwrap()).unwrap();
            Box::new(Compose::new(&be, f.clone(), d).unwrap())
        })
        .collect();
    let mut e = Stack::new(&be, blocks).unwrap();
    assert_eq!(e.shape(), [3 * traj.len(), grid.len()]);
    // each block as F's adjoint test above
    let a = adjoint_error(&be, &mut e, 7).unwrap();
    assert!(a < 1e-12, "adjoint {a:e}");
    let n = normal_error(&be, &mut e, 8).unwrap();
    assert!(n < 1e-8, "sum_c S_c^H T S_c vs E^H E {n:e}");
    // its normal map is sum_c S_c^H T S_c, written out here
    let mut t = Toeplitz::new(&be, &grid, &q).unwrap();
    let x = random::<f64>(grid.len(), 9);
    let (mut got, mut want) = (be.zeros(grid.len()).unwrap(), be.zeros(grid.len()).unwrap());
    e.normal(&be, &mut got, &x).unwrap();
    let (mut y, mut ty) = (be.zeros(grid.len()).unwrap(), be.zeros(grid.len()).unwrap());
    for s in &maps {
        be.coil(&mut y, CoilOp::Forward, s, &x).unwrap();
        t.apply(&be, &mut ty, &y).unwrap();
        be.coil(&mut want, CoilOp::AddAdjoint, s, &ty).unwrap();
    }
    // the same products in another order: float64 rounding
    let err = nrmse(&got, &want);
    assert!(err < 1e-12, "stack normal vs sum_c S_c^H T S_c {err:e}");

    // The stack's normal map takes F's fused form (each map folded into the
    // Toeplitz product, the coils added in place); the same stack with F's
    // pieces only (map, F^H F, map) gives the same image.
    let blocks: Vec<Box<dyn LinearOp<Cpu> + '_>> = maps
        .iter()
        .map(|s| -> Box<dyn LinearOp<Cpu> + '_> {
            let d = Diagonal::new(&be, be.upload(s).unwrap()).unwrap();
            Box::new(Compose::new(&be, Pieces(f.clone()), d).unwrap())
        })
        .collect();
    let mut by_pieces = Stack::new(&be, blocks).unwrap();
    let mut slow = be.zeros(grid.len()).unwrap();
    by_pieces.normal(&be, &mut slow, &x).unwrap();
    // the same products in another order: float64 rounding
    let err = nrmse(&got, &slow);
    assert!(err < 1e-12, "fused vs by pieces {err:e}");
}

/// An operator with only the required maps: every specialisation hook
/// takes its default, composed of the pieces.
struct Pieces<A>(A);

impl<A: LinearOp<Cpu>> LinearOp<Cpu> for Pieces<A> {
    fn shape(&self) -> [usize; 2] {
        self.0.shape()
    }
    fn forward(
        &mut self,
        b: &Cpu,
        out: &mut Vec<Complex<f64>>,
        x: &Vec<Complex<f64>>,
    ) -> recon_core::Result<()> {
        self.0.forward(b, out, x)
    }
    fn adjoint(
        &mut self,
        b: &Cpu,
        out: &mut Vec<Complex<f64>>,
        y: &Vec<Complex<f64>>,
    ) -> recon_core::Result<()> {
        self.0.adjoint(b, out, y)
    }
    fn normal(
        &mut self,
        b: &Cpu,
        out: &mut Vec<Complex<f64>>,
        x: &Vec<Complex<f64>>,
    ) -> recon_core::Result<()> {
        self.0.normal(b, out, x)
    }
}
