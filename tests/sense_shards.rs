//! SENSE's data term (recon-encoding's `SenseTerm`: the stack over coils of
//! F after each map, split by `Sharded`) with its coils shared among
//! shards, on CPU shards that split and gather as several GPUs do: the
//! operator, the right-hand side and a solve against one device's, and the
//! rules of the split.

use crate::common;

use common::*;
use recon_cg::{DataTerm, Normal, Params, Problem, Toeplitz};
use recon_core::{metrics::nrmse, Backend, Complex, CpuBackend, Grid, Stencil};
use recon_encoding::SenseTerm;

type C = Complex<f64>;

struct Fixture {
    grid: Grid,
    traj: Vec<[f64; 3]>,
    q: Vec<C>,
    maps: Vec<Vec<C>>,
    data: Vec<C>,
}

fn fixture(coils: usize, seed: u64) -> Fixture {
    let grid = Grid::new([6, 4, 8], [150.0; 3]).unwrap();
    let mut rng = Rng::new(seed);
    let traj = random_traj(&grid, 60, &mut rng);
    let cpu = CpuBackend::<f64>::new();
    let q = common::q(&cpu, &grid, &traj);
    let maps = (0..coils).map(|_| rng.complex(grid.len())).collect();
    let data = rng.complex(coils * traj.len());
    Fixture {
        grid,
        traj,
        q,
        maps,
        data,
    }
}

type Cpu = CpuBackend<f64>;

fn split(
    b: &Cpu,
    f: &Fixture,
    parts: Option<usize>,
) -> recon_core::Result<SenseTerm<'static, Cpu>> {
    let t = Toeplitz::new(b, &f.grid, &f.q)?;
    SenseTerm::new(b, &exact(b, &f.grid, &f.traj), t, &f.maps, parts)
}

fn sense(b: &Cpu, f: &Fixture, parts: usize) -> SenseTerm<'static, Cpu> {
    split(b, f, Some(parts)).unwrap()
}

/// `sum_c S_c^H F^H D_c`, each part through a plan of its own; returns it
/// and the progress calls.
fn rhs(b: &Cpu, f: &Fixture, s: &mut SenseTerm<'static, Cpu>) -> (Vec<C>, Vec<(u64, u64)>) {
    let plan = exact(b, &f.grid, &f.traj);
    let mut calls = Vec::new();
    let out = s
        .rhs(b, &plan, &f.data, &mut |d, t| calls.push((d, t)))
        .unwrap();
    (out, calls)
}

#[test]
fn coils_shared_among_shards_give_one_devices_operator_rhs_and_solve() {
    let f = fixture(7, 51);
    let one = CpuBackend::<f64>::new();
    let three = CpuBackend::<f64>::with_shards(3).unwrap();
    let mut s1 = sense(&one, &f, 1);
    let mut s3 = sense(&three, &f, 3);
    assert_eq!((s1.devices(), s3.devices()), (1, 3));
    assert_eq!((s3.coils(), s3.map_peak()), (s1.coils(), s1.map_peak()));

    // The operator: the same products, summed in three groups and gathered,
    // so only float64 rounding of the regrouped sum differs.
    let x = Rng::new(52).complex(f.grid.len());
    let (mut a1, mut a3) = (one.zeros(x.len()).unwrap(), three.zeros(x.len()).unwrap());
    s1.apply(&one, &mut a1, &x).unwrap();
    s3.apply(&three, &mut a3, &x).unwrap();
    let err = nrmse(&a3, &a1);
    assert!(
        err < 1e-14,
        "operator shared among 3 shards vs one: {err:e}"
    );
    assert!(a1.iter().any(|v| v.norm() > 0.0));
    // A second application reuses the shards' buffers.
    s3.apply(&three, &mut a3, &x).unwrap();
    assert!(nrmse(&a3, &a1) < 1e-14);

    // The right-hand side, each part through its own plan, and progress
    // counting every coil once whatever the thread that did it.
    let (b1, _) = rhs(&one, &f, &mut s1);
    let (b3, calls) = rhs(&three, &f, &mut s3);
    let err = nrmse(&b3, &b1);
    assert!(err < 1e-14, "right-hand side shared vs one: {err:e}");
    let want: Vec<(u64, u64)> = (1..=7).map(|d| (d, 7)).collect();
    assert_eq!(calls, want);

    // The solve: CG on the shared operator follows the one-device CG up to
    // rounding amplified by 20 iterations.
    let w = Stencil::uniform(f.grid.n);
    let params = Params {
        iterations: 20,
        tolerance: 0.0,
    };
    let peak = recon_cg::q_peak(&f.grid, &f.q).unwrap();
    let mut p1 = Problem::on_device(&one, &f.grid, peak, Box::new(s1), b1).unwrap();
    let mut p3 = Problem::on_device(&three, &f.grid, peak, Box::new(s3), b3).unwrap();
    let (x1, i1) = p1.solve(&one, &w, 0.05, &params, &mut |_, _| {}).unwrap();
    let (x3, i3) = p3.solve(&three, &w, 0.05, &params, &mut |_, _| {}).unwrap();
    assert_eq!(i1.iterations, i3.iterations);
    let err = nrmse(&x3, &x1);
    assert!(err < 1e-10, "solve shared vs one: {err:e}");
}

#[test]
fn the_split_follows_the_coils_the_shards_and_the_grid() {
    let three = CpuBackend::<f64>::with_shards(3).unwrap();
    // Two coils: two parts, however many shards are asked.
    let f = fixture(2, 53);
    assert_eq!(sense(&three, &f, 3).devices(), 2);
    // Without maps there is no SENSE (one coil's data term is F^H F).
    let t = Toeplitz::new(&three, &f.grid, &f.q).unwrap();
    let plan = exact(&three, &f.grid, &f.traj);
    let e = SenseTerm::new(&three, &plan, t, &[], Some(3))
        .err()
        .expect("refused");
    assert!(e.to_string().contains("none given"), "{e}");
    // By default a grid this small stays on one device.
    assert!(f.grid.len() < recon_encoding::SHARE_FROM_VOXELS);
    assert_eq!(split(&three, &f, None).unwrap().devices(), 1);
    // More parts than shards, or none, are refused.
    for parts in [0, 4] {
        let e = split(&three, &f, Some(parts)).err().expect("refused");
        assert!(e.to_string().contains("shard"), "{e}");
    }
    assert!(CpuBackend::<f64>::with_shards(0).is_err());
    // The right-hand side refuses data for another number of coils.
    let mut s = sense(&three, &f, 2);
    let plan = exact(&three, &f.grid, &f.traj);
    let short = &f.data[..f.traj.len()];
    let e = s
        .rhs(&three, &plan, short, &mut |_, _| {})
        .expect_err("refused");
    assert!(
        e.to_string().contains("one value per coil and sample"),
        "{e}"
    );
}
