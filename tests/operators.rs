//! Operator tests: adjoints, Toeplitz F^H F against the explicit product,
//! W^H W against an explicit W, and f32 against f64.

use crate::common;

use common::*;
use recon_cg::{Normal, Toeplitz};
use recon_core::{metrics::nrmse, Backend, Complex, CpuBackend, Grid, Stencil};

fn small_grid() -> Grid {
    Grid::new([6, 4, 8], [200.0, 150.0, 240.0]).unwrap()
}

#[test]
fn forward_and_fhd_are_adjoint() {
    // <F x, y> = <x, F^H y>
    let grid = small_grid();
    let mut rng = Rng::new(1);
    let traj = random_traj(&grid, 150, &mut rng);
    let x = rng.complex(grid.len());
    let y = rng.complex(traj.len());
    let be = CpuBackend::<f64>::new();
    let fx = common::forward(&be, &grid, &traj, &x);
    let fhy = common::fhd(&be, &grid, &traj, &y);
    let lhs = inner(&fx, &y);
    let rhs = inner(&x, &fhy);
    // f64 sums of ~3e4 terms of size ~V^2: relative agreement to ~1e-13.
    assert!((lhs - rhs).norm() / lhs.norm() < 1e-12, "{lhs} vs {rhs}");
}

#[test]
fn forward_matches_the_explicit_matrix() {
    let grid = small_grid();
    let mut rng = Rng::new(2);
    let traj = random_traj(&grid, 40, &mut rng);
    let x = rng.complex(grid.len());
    let f = explicit_f(&grid, &traj);
    let want: Vec<Complex<f64>> = (0..traj.len())
        .map(|m| (0..grid.len()).map(|n| f[m * grid.len() + n] * x[n]).sum())
        .collect();
    let be = CpuBackend::<f64>::new();
    let got = common::forward(&be, &grid, &traj, &x);
    // Polynomial sin/cos vs std's: both f64-exact to ~1e-15 per term.
    assert!(nrmse(&got, &want) < 1e-12);
}

#[test]
fn toeplitz_matches_explicit_normal_product() {
    // F^H F x by Q and FFTs against F^H (F x) with the explicit matrix.
    let grid = small_grid();
    let mut rng = Rng::new(3);
    let traj = random_traj(&grid, 120, &mut rng);
    let x = rng.complex(grid.len());
    let n = grid.len();
    let (_, want) = explicit_normal(&explicit_f(&grid, &traj), n, &x);

    let be = CpuBackend::<f64>::new();
    let q = common::q(&be, &grid, &traj);
    let mut t = Toeplitz::new(&be, &grid, &q).unwrap();
    let xv = be.upload(&x).unwrap();
    let mut out = be.zeros(n).unwrap();
    t.apply(&be, &mut out, &xv).unwrap();
    let err = nrmse(&out, &want);
    // The bound: f64, relative error < 1e-6 (we see ~1e-14).
    assert!(err < 1e-6, "Toeplitz relative error {err:e}");
}

#[test]
fn pruned_cpu_toeplitz_matches_the_product_by_pieces() {
    // The CPU's pruned product (line FFTs skipping zero and cropped lines,
    // FFT(Q) inside the z pass) against pad, full 3-D FFTs, product,
    // inverse and crop; shapes below, at and past the 16-column blocks.
    let be = CpuBackend::<f64>::new();
    for (i, n) in [[3, 5, 2], [8, 8, 8], [10, 3, 4], [17, 2, 3]]
        .into_iter()
        .enumerate()
    {
        let len: usize = n.iter().product();
        let mut rng = Rng::new(40 + i as u64);
        let x = rng.complex(len);
        let fq = rng.complex(8 * len);
        let mut work = vec![Complex::default(); 8 * len];
        let (mut fast, mut slow) = (vec![Complex::default(); len], vec![Complex::default(); len]);
        let plan = be.toeplitz_plan(n).unwrap();
        be.toeplitz(&plan, &mut fast, &x, &fq, &mut work).unwrap();
        let fft = be.fft_plan(n.map(|v| 2 * v)).unwrap();
        recon_core::toeplitz_by_pieces(&be, &fft, &mut slow, &x, &fq, &mut work, n).unwrap();
        let err = nrmse(&fast, &slow);
        // float64 FFTs of a few thousand points either way: rounding.
        assert!(err < 1e-13, "{n:?}: pruned against by pieces {err:e}");
    }
}

#[test]
fn pad_and_crop_are_adjoint() {
    let n = [3, 4, 2];
    let be = CpuBackend::<f64>::new();
    let mut rng = Rng::new(4);
    let x = rng.complex(24);
    let y = rng.complex(8 * 24);
    let mut px = be.zeros(8 * 24).unwrap();
    be.pad(&mut px, &x, n).unwrap();
    let mut cy = be.zeros(24).unwrap();
    be.crop(&mut cy, &y, n).unwrap();
    // Exact: both sides sum the same products.
    assert!((inner(&px, &y) - inner(&x, &cy)).norm() < 1e-12);
}

#[test]
fn whw_matches_explicit_weighted_differences() {
    // W^H W x from the stencil against W^T (W x) with W built as rows:
    // weighted differences and a diagonal (zero at some voxels, as a mask).
    let n = [4, 3, 5];
    let len = 60;
    let mut rng = Rng::new(5);
    let diag: Vec<f64> = (0..len)
        .map(|i| if i % 3 == 0 { 0.0 } else { rng.next_f64() })
        .collect();
    let w = Stencil::weighted(
        n,
        [0, 1, 2].map(|_| (0..len).map(|_| 0.5 + rng.next_f64()).collect()),
    )
    .unwrap()
    .with_diag(diag.clone())
    .unwrap();
    let stride = w.strides();
    let x = rng.complex(len);
    // W x: one row per existing edge.
    let mut edges = Vec::new();
    for d in 0..3 {
        for idx in 0..len {
            let c = [idx % n[0], (idx / n[0]) % n[1], idx / (n[0] * n[1])];
            if c[d] + 1 < n[d] {
                edges.push((idx, idx + stride[d], w.w.as_ref().unwrap()[d][idx]));
            }
        }
    }
    let mut want = vec![Complex::new(0.0, 0.0); len];
    for &(a, b, wt) in &edges {
        let r = (x[b] - x[a]) * wt; // (W x)_e
        want[b] += r * wt; // W^T r
        want[a] -= r * wt;
    }
    for (i, d) in diag.iter().enumerate() {
        want[i] += x[i] * (d * d); // rows d[i] x[i]
    }
    let be = CpuBackend::<f64>::new();
    let wd = be.upload_weights(&w).unwrap();
    let mut out = vec![Complex::new(0.0, 0.0); len];
    be.add_whw(&mut out, 1.0, &x, &wd).unwrap();
    assert!(nrmse(&out, &want) < 1e-14);
}

#[test]
fn f32_engine_agrees_with_f64_on_q_and_fhd() {
    let grid = Grid::new([8, 8, 8], [220.0; 3]).unwrap();
    let mut rng = Rng::new(6);
    let traj = random_traj(&grid, 500, &mut rng);
    let d = rng.complex(traj.len());
    let b64 = CpuBackend::<f64>::new();
    let b32 = CpuBackend::<f32>::new();
    let q64 = common::q(&b64, &grid, &traj);
    let q32 = common::q(&b32, &grid, &traj);
    let up = |v: Vec<Complex<f32>>| -> Vec<Complex<f64>> {
        v.iter()
            .map(|c| Complex::new(c.re as f64, c.im as f64))
            .collect()
    };
    // f32 phases of up to ~8 turns and 500-term sums: ~1e-6 relative.
    assert!(nrmse(&up(q32), &q64) < 1e-5);
    let f64_ = common::fhd(&b64, &grid, &traj, &d);
    let f32_ = common::fhd(&b32, &grid, &traj, &d);
    assert!(nrmse(&up(f32_), &f64_) < 1e-5);
}

/// The gridding baseline in float64 on the CPU, default settings.
fn cpu_gridding(grid: &Grid, traj: &[[f64; 3]], data: &[Complex<f64>]) -> Vec<Complex<f64>> {
    let p = recon_gridding::Params::default();
    recon_gridding::reconstruct(&CpuBackend::<f64>::new(), grid, traj, data, &p).unwrap()
}

#[test]
fn gridding_estimates_voxel_values() {
    // A dense radial scan of one smooth ellipsoid: the baseline must recover
    // its integral (the scaling) and the image itself reasonably well.
    use recon_synth::{Ellipsoid, Phantom, Trajectory};
    let grid = Grid::new([16, 16, 16], [240.0; 3]).unwrap();
    let e = Ellipsoid {
        value: 10.0,
        semi_axes_mm: [70.0, 90.0, 60.0],
        centre_mm: [5.0, -4.0, 3.0],
        rotation_deg: [0.0, 0.0, 20.0],
    };
    let phantom = Phantom::new("one", "", vec![e]).unwrap();
    let traj = Trajectory::Radial {
        spokes: 3000,
        samples: 16,
        kmax: 1.0,
    }
    .generate(&grid)
    .unwrap();
    let data = phantom.kspace(&grid, &traj);
    let img = cpu_gridding(&grid, &traj, &data);
    let truth = phantom.rasterise(&grid, 4);
    let sum: f64 = img.iter().map(|c| c.re).sum::<f64>() * grid.voxel_volume();
    let integral = phantom.fourier([0.0; 3]).re;
    // The image's sum weighs the samples within about one cycle/FOV of the
    // centre, where 3000 spokes crowd and Pipe-Menon's weights are least
    // exact: 2.5% off here; allow 3%.
    assert!(
        (sum / integral - 1.0).abs() < 0.03,
        "integral {sum:.4e} vs {integral:.4e}"
    );
    let mag: Vec<f64> = img.iter().map(|c| c.norm()).collect();
    let psnr = recon_core::metrics::psnr_db(&mag, &truth);
    // Edge blurring and ringing at 15 mm voxels leave about 29.6 dB; a
    // scale 10% off alone would cost more than 5 dB of that.
    assert!(psnr > 25.0, "gridding PSNR {psnr:.2} dB");
}

#[test]
fn gridding_mean_inside_the_object_matches_the_truth() {
    // The two shipped configs: Shepp-Logan at 32^3 and the sodium phantom at
    // 48^3, both on twisted projections whose samples lie farther apart
    // than one cell of the oversampled grid.
    use recon_synth::{Phantom, Trajectory};
    for (phantom, n, cones, projections, samples, p) in [
        ("shepp-logan", 32, 16, 600, 60, 0.25),
        ("sodium-brain", 48, 24, 1200, 100, 0.3),
    ] {
        let grid = Grid::new([n; 3], [240.0; 3]).unwrap();
        let phantom =
            Phantom::load(&common::repo().join(format!("phantoms/{phantom}.toml"))).unwrap();
        let traj = Trajectory::Tpi {
            cones,
            projections,
            samples,
            p,
            kmax: 1.0,
        }
        .generate(&grid)
        .unwrap();
        let data = phantom.kspace(&grid, &traj);
        let img = cpu_gridding(&grid, &traj, &data);
        let truth = phantom.rasterise(&grid, 4);
        let peak = truth.iter().cloned().fold(0.0, f64::max);
        // Inside the object: where the truth is at least a tenth of its peak.
        let inside: Vec<usize> = (0..truth.len())
            .filter(|&i| truth[i] >= 0.1 * peak)
            .collect();
        let mean = |v: &dyn Fn(usize) -> f64| {
            inside.iter().map(|&i| v(i)).sum::<f64>() / inside.len() as f64
        };
        let (g, t) = (mean(&|i| img[i].norm()), mean(&|i| truth[i]));
        // Measured: 0.985 (Shepp-Logan) and 1.021 (sodium) of the truth.
        // The one-cell trilinear kernel gave 0.41 and 0.84; a Kaiser-Bessel
        // kernel with Pipe-Menon's own scale 0.77 and 1.21. The issue's
        // bound is 5%.
        assert!(
            (g / t - 1.0).abs() < 0.05,
            "{}: gridding mean {g:.4} against the truth's {t:.4}",
            phantom.name
        );
    }
}
