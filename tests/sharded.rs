//! The sharded operator (`recon_ops::Sharded`): a stack split over a
//! backend's shards gives the same maps as the stack on one device. On the
//! CPU's stand-in shards, SENSE split by coils (the one F shared by a
//! part's coils) against the unsplit stack in float64; the checks of bad
//! splits; the summation engine's slabs (Q's split). The GPU versions (two
//! GPUs) are in tests/gpu_ops.rs and tests/gpu.rs.

use crate::common;

use common::*;
use recon_core::{metrics::nrmse, Backend, Complex, CpuBackend, Grid};
use recon_encoding::{Encoding, Engine, Plan};
use recon_ops::testing::{adjoint_error, normal_error, random};
use recon_ops::{Compose, Diagonal, Gradient, LinearOp, Sharded, Shared, Stack};

type Cpu = CpuBackend<f64>;

/// The stack over `maps` of F after each map, F one shared `Encoding`.
fn sense<'a>(
    be: &Cpu,
    plan: &'a Plan<'a, Cpu>,
    q: &[Complex<f64>],
    maps: &[Vec<Complex<f64>>],
) -> Box<dyn LinearOp<Cpu> + 'a> {
    let f = Shared::new(Encoding::new(be, plan, Some(q)).unwrap());
    let blocks = maps
        .iter()
        .map(|s| -> Box<dyn LinearOp<Cpu> + 'a> {
            let d = Diagonal::new(be, be.upload(s).unwrap()).unwrap();
            Box::new(Compose::new(be, f.clone(), d).unwrap())
        })
        .collect();
    Box::new(Stack::new(be, blocks).unwrap())
}

#[test]
fn sense_split_over_shards_is_the_unsplit_stack() {
    let be = Cpu::with_shards(3).unwrap();
    let grid = Grid::new([8, 6, 10], [200.0, 150.0, 240.0]).unwrap();
    let mut rng = Rng::new(11);
    let traj = random_traj(&grid, 300, &mut rng);
    let maps: Vec<Vec<Complex<f64>>> = (0..5).map(|_| rng.complex(grid.len())).collect();
    let plan = Plan::new(&be, Engine::Nufft { tolerance: 1e-10 }, &grid, &traj).unwrap();
    let q = common::q(&be, &grid, &traj);
    let mut whole = sense(&be, &plan, &q, &maps);
    // coils [0, 2), [2, 4), [4, 5) on shards 0, 1, 2
    let ranges = [0..2, 2..4, 4..5];
    let mut split = Sharded::new(&be, 3, |b, p| {
        Ok(sense(b, &plan, &q, &maps[ranges[p].clone()]))
    })
    .unwrap();
    assert_eq!(split.parts(), 3);
    assert_eq!(split.shape(), whole.shape());
    let [m, n] = whole.shape();
    let x = random::<f64>(n, 12);
    let y = random::<f64>(m, 13);
    // The same products, summed in another order: float64 rounding.
    let same = |a: &Vec<Complex<f64>>, b: &Vec<Complex<f64>>, what: &str| {
        let e = nrmse(a, b);
        assert!(e < 1e-12, "{what}: split vs whole {e:e}");
    };
    let (mut a, mut b) = (be.zeros(m).unwrap(), be.zeros(m).unwrap());
    split.forward(&be, &mut a, &x).unwrap();
    whole.forward(&be, &mut b, &x).unwrap();
    same(&a, &b, "forward");
    let (mut a, mut b) = (be.zeros(n).unwrap(), be.zeros(n).unwrap());
    split.adjoint(&be, &mut a, &y).unwrap();
    whole.adjoint(&be, &mut b, &y).unwrap();
    same(&a, &b, "adjoint");
    split.normal(&be, &mut a, &x).unwrap();
    whole.normal(&be, &mut b, &x).unwrap();
    same(&a, &b, "normal");
    // as F's own checks (tests/encoding_op.rs)
    let e = adjoint_error(&be, &mut split, 14).unwrap();
    assert!(e < 1e-12, "adjoint {e:e}");
    let e = normal_error(&be, &mut split, 15).unwrap();
    assert!(e < 1e-8, "Toeplitz normal vs F^H F {e:e}");
}

#[test]
fn bad_splits_are_refused() {
    let be = Cpu::with_shards(2).unwrap();
    let n = [4, 4, 4];
    let grad = |b: &Cpu, _| -> recon_core::Result<Box<dyn LinearOp<Cpu>>> {
        Ok(Box::new(Gradient::new(b, n)?))
    };
    for parts in [0, 3] {
        let e = Sharded::new(&be, parts, grad).err().unwrap().to_string();
        assert!(e.contains("shard"), "{parts} parts: {e}");
    }
    // parts taking inputs of different lengths
    let e = Sharded::new(
        &be,
        2,
        |b: &Cpu, p| -> recon_core::Result<Box<dyn LinearOp<Cpu>>> {
            Ok(Box::new(Gradient::new(
                b,
                if p == 0 { n } else { [4, 4, 2] },
            )?))
        },
    )
    .err()
    .unwrap()
    .to_string();
    assert!(e.contains("part 1 takes 32 inputs"), "{e}");
    // one part is the operator itself
    let mut one = Sharded::new(&be, 1, grad).unwrap();
    let mut g = Gradient::new(&be, n).unwrap();
    let x = random::<f64>(64, 16);
    let (mut a, mut b) = (be.zeros(192).unwrap(), be.zeros(192).unwrap());
    one.forward(&be, &mut a, &x).unwrap();
    g.forward(&be, &mut b, &x).unwrap();
    assert_eq!(a, b);
}

/// Q's exact sums split over shards as slabs of the lattice: the same
/// values as on one shard, to the bit, with progress counted to the end.
#[test]
fn sums_split_over_shards_are_the_unsplit_sums() {
    use recon_core::{Sign, Targets};
    let grid = Grid::new([6, 4, 10], [120.0, 80.0, 200.0]).unwrap();
    let mut rng = Rng::new(21);
    let traj = random_traj(&grid, 150, &mut rng);
    let coef = rng.complex(traj.len());
    let lattice = grid.displacements();
    let points: Vec<[f64; 3]> = (0..grid.len()).map(|i| grid.voxels().point(i)).collect();
    for targets in [Targets::Lattice(lattice), Targets::List(&points)] {
        let one = Cpu::new();
        let mut whole = vec![Complex::default(); targets.len()];
        one.sum_exp(
            &mut whole,
            targets,
            0,
            &traj,
            &coef,
            Sign::Plus,
            &mut |_, _| {},
        )
        .unwrap();
        // 4 shards of a lattice of 2N = 20 planes, and of a list: uneven slabs.
        let four = Cpu::with_shards(4).unwrap();
        let mut split = vec![Complex::default(); targets.len()];
        let mut last = (0, 0);
        recon_ops::sum_exp_on_shards(
            &four,
            &mut split,
            targets,
            &traj,
            &coef,
            Sign::Plus,
            &mut |d, t| last = (d, t),
        )
        .unwrap();
        // Each target from its own index by the same code: equal to the bit.
        assert_eq!(split, whole);
        assert_eq!(last, (whole.len() as u64, whole.len() as u64));
        // The output has one value per target.
        let mut short = vec![Complex::default(); targets.len() - 1];
        let err = recon_ops::sum_exp_on_shards(
            &four,
            &mut short,
            targets,
            &traj,
            &coef,
            Sign::Plus,
            &mut |_, _| {},
        );
        assert!(err.is_err());
    }
}
