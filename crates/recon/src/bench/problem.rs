//! The benchmark's problem: the book's radial trajectory and the phantom's
//! analytic data, or a scan file's, and float64 references at check points; and the
//! summation ladder's timing of F^H D.

use super::BenchArgs;
use anyhow::Result;
use recon_core::{Backend, Complex, CpuBackend, Grid, Lattice, Real, Sign, Targets};
use recon_encoding::NufftBackend;
use recon_synth::{Phantom, Trajectory};
use std::time::Instant;

/// The benchmark's inputs: trajectory, data, and check points with their
/// float64 references.
pub(super) struct Problem {
    pub grid: Grid,
    pub traj: Vec<[f64; 3]>,
    pub data: Vec<Complex<f64>>,
    /// Indices of the voxels checked (all below `timing_voxels`).
    pub check: Vec<usize>,
    pub fhd_ref: Vec<Complex<f64>>,
    pub q_check: Vec<usize>,
    pub q_ref: Vec<Complex<f64>>,
}

/// A problem's grid, trajectory (cycles/FOV) and data.
pub(super) type Inputs = (Grid, Vec<[f64; 3]>, Vec<Complex<f64>>);

/// The book's problem: a cubic `matrix`, `samples` on the radial
/// trajectory (spokes of 112), and the phantom's analytic data.
pub(super) fn radial(matrix: usize, samples: usize, phantom: &Phantom) -> Result<Inputs> {
    let grid = Grid::new([matrix; 3], [240.0; 3])?;
    let traj = radial_trajectory(&grid, samples)?;
    let data = phantom.kspace(&grid, &traj);
    Ok((grid, traj, data))
}

/// The book's radial trajectory: `samples` on spokes of 112 to Nyquist.
pub(crate) fn radial_trajectory(grid: &Grid, samples: usize) -> Result<Vec<[f64; 3]>> {
    let per_spoke = 112;
    let mut traj = Trajectory::Radial {
        spokes: samples.div_ceil(per_spoke),
        samples: per_spoke,
        kmax: 1.0,
    }
    .generate(grid)?;
    traj.truncate(samples);
    Ok(traj)
}

/// The problem of `grid`, `traj` and `data` with its float64 references.
pub(super) fn problem(
    args: &BenchArgs,
    grid: Grid,
    traj: Vec<[f64; 3]>,
    data: Vec<Complex<f64>>,
) -> Result<Problem> {
    // Check points spread over the timed voxels and over all of Q, fixed by a hash.
    let spread = |count: usize, len: usize, salt: u64| -> Vec<usize> {
        (0..count as u64)
            .map(|i| {
                let mut z = (i + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ salt;
                z = (z ^ (z >> 31)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
                (z % len as u64) as usize
            })
            .collect()
    };
    let timing = args.timing_voxels.min(grid.len());
    let check = spread(args.check_voxels, timing, 1);
    let q_check = spread(args.check_voxels, grid.doubled().iter().product(), 2);
    // sum_m coef_m exp(+i 2pi k_m . x) at the lattice's points `idx`, in
    // float64 on the CPU.
    let cpu = CpuBackend::<f64>::new();
    let direct = |lattice: Lattice, idx: &[usize], coef: &[Complex<f64>]| -> Result<_> {
        let pts: Vec<[f64; 3]> = idx.iter().map(|&i| lattice.point(i)).collect();
        let mut out = vec![Complex::default(); pts.len()];
        cpu.sum_exp(
            &mut out,
            Targets::List(&pts),
            0,
            &traj,
            coef,
            Sign::Plus,
            &mut |_, _| {},
        )?;
        Ok(out)
    };
    let fhd_ref = direct(
        grid.voxels(),
        &check,
        &recon_encoding::mu(&grid, &traj, &data),
    )?;
    let phi2: Vec<Complex<f64>> = traj
        .iter()
        .map(|k| Complex::new(grid.phi(*k).powi(2), 0.0))
        .collect();
    let q_ref = direct(grid.displacements(), &q_check, &phi2)?;
    Ok(Problem {
        grid,
        traj,
        data,
        check,
        fhd_ref,
        q_check,
        q_ref,
    })
}

/// max |out[idx] - ref| / max |ref|
pub(super) fn max_rel_error<T: Real>(
    out: &[Complex<T>],
    idx: &[usize],
    reference: &[Complex<f64>],
) -> f64 {
    let peak = reference.iter().map(|c| c.norm()).fold(0.0, f64::max);
    idx.iter()
        .zip(reference)
        .map(|(&i, r)| (Complex::new(out[i].re.f64(), out[i].im.f64()) - r).norm())
        .fold(0.0, f64::max)
        / peak
}

/// Times F^H D over the leading `voxels` voxels: best of a few runs.
pub(super) fn time_fhd<B: NufftBackend>(
    b: &B,
    p: &Problem,
    voxels: usize,
) -> Result<(f64, Vec<Complex<B::Real>>)> {
    let mu = recon_encoding::mu::<B::Real>(&p.grid, &p.traj, &p.data);
    // A leading share of the voxels, in whole z-planes.
    let mut lat = p.grid.voxels();
    let plane = lat.n[0] * lat.n[1];
    let take = voxels.min(p.grid.len()).div_ceil(plane) * plane;
    lat.n[2] = take / plane;
    let mut out = vec![Complex::default(); take];
    let mut best = f64::INFINITY;
    let mut spent = 0.0;
    let mut runs = 0;
    while runs < 2 || (spent < 1.0 && runs < 10) {
        let t = Instant::now();
        recon_ops::sum_exp_on_shards(
            b,
            &mut out,
            Targets::Lattice(lat),
            &p.traj,
            &mu,
            Sign::Plus,
            &mut |_, _| {},
        )?;
        let s = t.elapsed().as_secs_f64();
        best = best.min(s);
        spent += s;
        runs += 1;
    }
    Ok((best, out))
}
