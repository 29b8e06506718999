//! Stacks on the GPU against the CPU in float64: the slices solved as one
//! batch (one 3-D Toeplitz product that no plane crosses), and slice by
//! slice with several coils (each slice's maps and SENSE term). Without a
//! usable GPU each test prints that it was skipped.
//!
//! Like tests/gpu.rs, this binary also runs on the GPU machine, where
//! `RECON_BIN` and `RECON_REPO` point at the carried binary and checkout.

use crate::common;

use common::*;
use recon_core::{metrics::nrmse, Complex};
use std::process::Command;

/// Runs a synthetic stack of stars (Shepp-Logan, 32 x 32 x 8, SNR 30) on
/// `device` in `precision` with `extra` config lines, checking that the
/// log says `how` the slices were solved; the complex image.
fn run_stack(
    dir: &std::path::Path,
    device: &str,
    precision: &str,
    extra: &str,
    how: &str,
) -> Vec<Complex<f64>> {
    let phantom = repo().join("phantoms/shepp-logan.toml");
    let out = dir.join(format!("{device}-{precision}"));
    let cfg = dir.join(format!("{device}-{precision}.toml"));
    std::fs::write(
        &cfg,
        format!(
            "[grid]\nmatrix = [32, 32, 8]\nfov_mm = 240.0\n[phantom]\nfile = \"{}\"\nsupersample = 2\n\
             [trajectory]\nkind = \"stack-of-stars\"\nspokes = 50\nsamples = 64\n[noise]\nsnr = 30.0\nseed = 1\n\
             [engine]\ndevice = \"{device}\"\nprecision = \"{precision}\"\n{extra}\n\
             [solver]\niterations = 30\nlambda = 0.01\n[output]\ndir = \"{}\"\n",
            phantom.display(),
            out.display()
        ),
    )
    .unwrap();
    let o = Command::new(recon_bin())
        .args(["--config", cfg.to_str().unwrap()])
        .env("HDF5_USE_FILE_LOCKING", "FALSE")
        .env("RECON_CACHE_DIR", dir.join("cache"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{device}: {stderr}");
    assert!(stderr.contains("solved as 8 2-D slices"), "{stderr}");
    assert!(stderr.contains(how), "{stderr}");
    no_hdf5_locking();
    let f = recon_io::hdf5::File::open(out.join("recon.h5")).unwrap();
    let v: Vec<Complex<f32>> = f.dataset("recon").unwrap().read_raw().unwrap();
    v.iter()
        .map(|c| Complex::new(c.re as f64, c.im as f64))
        .collect()
}

#[test]
fn a_batch_of_slices_on_the_gpu_matches_the_cpu_f64() {
    if gpu(recon_cuda::Options::default()).is_none() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    // One coil and the uniform quadratic prior: `auto` takes the batch.
    let cpu = run_stack(tmp.path(), "cpu", "f64", "", "one batch");
    let gpu = run_stack(tmp.path(), "cuda", "f32", "", "one batch");
    let e = nrmse(&gpu, &cpu);
    println!("batch of 8 slices: GPU f32 against CPU f64, nrmse {e:.2e}");
    // float32 through the NUFFT and 30 CG iterations of one 3-D Toeplitz
    // product (the whole pipeline's bound in tests/gpu.rs is 0.05 dB).
    assert!(e < 5e-3, "nrmse {e:e}");
}

#[test]
fn a_stack_with_several_coils_on_the_gpu_matches_the_cpu_f64() {
    if gpu(recon_cuda::Options::default()).is_none() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let coils =
        "[coils]\ncount = 4\narrangement = \"ring\"\nradius = 1.2\n[sense]\nmaps = \"estimate\"";
    let cpu = run_stack(tmp.path(), "cpu", "f64", coils, "one after the other");
    let gpu = run_stack(tmp.path(), "cuda", "f32", coils, "one after the other");
    let e = nrmse(&gpu, &cpu);
    println!("8 slices of 4 coils: GPU f32 against CPU f64, nrmse {e:.2e}");
    // As the series test's float32 chain (gridding for the maps, NUFFT,
    // CG) against float64.
    assert!(e < 2e-2, "nrmse {e:e}");
}
