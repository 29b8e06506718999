//! `recon bench`: the book's reference problem, timed stage by stage.
//!
//! Default problem: a 128^3 image, 284,592 samples on a 3-D radial
//! trajectory (2541 spokes of 112), Q on 256^3. For each summation variant
//! it times F^H D on a leading share of the voxels, and reports voxel-sample
//! pairs per second, the share of the device's special-function bound, and
//! the largest error against float64 at sampled voxels (max |out - ref| over
//! max |ref|). Then, with the configured variant: Q, F^H D, the CG time per
//! iteration, and F^H D + CG end to end.

use anyhow::{Context, Result};
use recon_cg::{Params, Regularised, Toeplitz};
use recon_core::{Backend, Complex, CpuBackend, Grid, Real, Sign, Stencil, Targets};
use recon_encoding::NufftBackend;
use recon_synth::{Phantom, Trajectory};
use serde::Serialize;
use std::path::PathBuf;
use std::time::Instant;

#[derive(clap::Args, Debug, Clone)]
pub struct BenchArgs {
    /// Where to compute: a GPU when one is usable (auto), or cpu, or cuda.
    #[arg(long, value_enum, default_value = "auto")]
    pub device: crate::config::DeviceChoice,
    /// Image matrix (cubic, even, 4 to 1024); default 128 on a GPU, 48 on
    /// the CPU.
    #[arg(long)]
    pub matrix: Option<usize>,
    /// Number of k-space samples (radial, 112 per spoke); default 284,592
    /// on a GPU, 15,008 (the same density at 48^3) on the CPU.
    #[arg(long)]
    pub samples: Option<usize>,
    /// Variants to time (GPU only), e.g. 1,2,3,4,5,6.
    #[arg(long, value_delimiter = ',', default_values_t = [1u32, 2, 3, 4, 5, 6])]
    pub variants: Vec<u32>,
    /// Voxels used to time each variant (a leading share of the image).
    #[arg(long, default_value_t = 1 << 18)]
    pub timing_voxels: usize,
    /// Voxels checked against float64.
    #[arg(long, default_value_t = 1024)]
    pub check_voxels: usize,
    /// CG iterations for the end-to-end time.
    #[arg(long, default_value_t = 60)]
    pub iterations: usize,
    /// Also try these per-thread x block shapes for variant 5, e.g. 2x256,4x128.
    #[arg(long, value_delimiter = ',')]
    pub tune: Vec<String>,
    /// Phantom whose analytic k-space gives the data (default: the shipped
    /// phantoms/sodium-brain.toml, found beside the installed binary).
    #[arg(long)]
    pub phantom: Option<PathBuf>,
    /// Write the results as JSON here.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

#[derive(Debug, Serialize)]
struct Row {
    variant: String,
    seconds: f64,
    pairs_per_s: f64,
    sfu_percent: Option<f64>,
    max_rel_error: f64,
}

#[derive(Debug, Serialize)]
struct Results {
    device: String,
    matrix: usize,
    samples: usize,
    q_grid: usize,
    sfu_bound_pairs_per_s: Option<f64>,
    variants: Vec<Row>,
    q_seconds: f64,
    q_max_rel_error: f64,
    fhd_seconds: f64,
    cg_ms_per_iteration: f64,
    fhd_plus_cg_seconds: f64,
    iterations: usize,
}

/// The benchmark's inputs: trajectory, data, and check points with their
/// float64 references.
struct Problem {
    grid: Grid,
    traj: Vec<[f64; 3]>,
    data: Vec<Complex<f64>>,
    /// Indices of the voxels checked (all below `timing_voxels`).
    check: Vec<usize>,
    fhd_ref: Vec<Complex<f64>>,
    q_check: Vec<usize>,
    q_ref: Vec<Complex<f64>>,
}

/// The problem's size, settled from the arguments and the device.
#[derive(Debug, Clone, Copy)]
struct Size {
    matrix: usize,
    samples: usize,
}

fn problem(args: &BenchArgs, size: Size, phantom: &Phantom) -> Result<Problem> {
    let grid = Grid::new([size.matrix; 3], [240.0; 3])?;
    let per_spoke = 112;
    let spokes = size.samples.div_ceil(per_spoke);
    let mut traj = Trajectory::Radial {
        spokes,
        samples: per_spoke,
        kmax: 1.0,
    }
    .generate(&grid)?;
    traj.truncate(size.samples);
    let data = phantom.kspace(&grid, &traj);
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
    let cpu = CpuBackend::<f64>::new();
    let vox = grid.voxels();
    let pts: Vec<[f64; 3]> = check.iter().map(|&i| vox.point(i)).collect();
    let mu = recon_encoding::mu::<f64>(&grid, &traj, &data);
    let mut fhd_ref = vec![Complex::default(); pts.len()];
    cpu.sum_exp(
        &mut fhd_ref,
        Targets::List(&pts),
        &traj,
        &mu,
        Sign::Plus,
        &mut |_, _| {},
    )?;
    let disp = grid.displacements();
    let qpts: Vec<[f64; 3]> = q_check.iter().map(|&i| disp.point(i)).collect();
    let phi2: Vec<Complex<f64>> = traj
        .iter()
        .map(|k| Complex::new(grid.phi(*k).powi(2), 0.0))
        .collect();
    let mut q_ref = vec![Complex::default(); qpts.len()];
    cpu.sum_exp(
        &mut q_ref,
        Targets::List(&qpts),
        &traj,
        &phi2,
        Sign::Plus,
        &mut |_, _| {},
    )?;
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
fn max_rel_error<T: Real>(out: &[Complex<T>], idx: &[usize], reference: &[Complex<f64>]) -> f64 {
    let peak = reference.iter().map(|c| c.norm()).fold(0.0, f64::max);
    idx.iter()
        .zip(reference)
        .map(|(&i, r)| (Complex::new(out[i].re.f64(), out[i].im.f64()) - r).norm())
        .fold(0.0, f64::max)
        / peak
}

/// Times F^H D over the leading `voxels` voxels: best of a few runs.
fn time_fhd<B: NufftBackend>(
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
        b.sum_exp(
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

impl BenchArgs {
    /// Checks every number; errors name the option.
    fn check(&self) -> Result<()> {
        if let Some(m) = self.matrix {
            if m < 4 || m % 2 != 0 || m > recon_core::MAX_N {
                anyhow::bail!(
                    "--matrix must be even, from 4 to {}, got {m}",
                    recon_core::MAX_N
                );
            }
        }
        if let Some(s) = self.samples {
            if s == 0 || s > recon_core::MAX_SAMPLES {
                anyhow::bail!(
                    "--samples must be 1 to {}, got {s}",
                    recon_core::MAX_SAMPLES
                );
            }
        }
        for (name, v) in [
            ("--timing-voxels", self.timing_voxels),
            ("--check-voxels", self.check_voxels),
            ("--iterations", self.iterations),
        ] {
            if v == 0 {
                anyhow::bail!("{name} must be at least 1, got 0");
            }
        }
        if self.check_voxels > 1 << 20 {
            anyhow::bail!(
                "--check-voxels must be at most {} (each is checked in float64 on the CPU), got {}",
                1 << 20,
                self.check_voxels
            );
        }
        if self.iterations > 100_000 {
            anyhow::bail!(
                "--iterations must be at most 100000, got {}",
                self.iterations
            );
        }
        for &v in &self.variants {
            if recon_cuda::Variant::from_number(v).is_none() {
                anyhow::bail!("--variants takes numbers from 1 to 6, got {v}");
            }
        }
        for t in &self.tune {
            parse_tuning(t)?;
        }
        Ok(())
    }
}

/// `PERxBLOCK` of `--tune`, checked as `engine.per_thread` and `engine.block` are.
fn parse_tuning(t: &str) -> Result<recon_cuda::Tuning> {
    let bad = || {
        anyhow::anyhow!("--tune takes PERxBLOCK with PER in 1, 2, 4, 8 and BLOCK a multiple of 32 to 1024, got {t:?}")
    };
    let (a, b) = t.split_once('x').ok_or_else(bad)?;
    let (per_thread, block): (u32, u32) =
        (a.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?);
    if ![1, 2, 4, 8].contains(&per_thread) || !(32..=1024).contains(&block) || block % 32 != 0 {
        return Err(bad());
    }
    Ok(recon_cuda::Tuning { per_thread, block })
}

/// A file shipped with recon (`phantoms/...`), looked for beside the
/// binary (a build tree's `target/release/`, an install's `bin/` with
/// `share/recon/`), then in the source tree it was built from.
pub fn shipped(rel: &str) -> Result<PathBuf> {
    let mut tried = Vec::new();
    if let Some(dir) = std::env::current_exe()
        .ok()
        .and_then(|e| e.parent().map(|p| p.to_path_buf()))
    {
        for up in ["..", "../..", "../share/recon"] {
            tried.push(dir.join(up).join(rel));
        }
    }
    tried.push(
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../..")
            .join(rel),
    );
    tried.iter().find(|p| p.is_file()).cloned().ok_or_else(|| {
        anyhow::anyhow!(
            "cannot find the shipped {rel} (looked in {}): give --phantom",
            tried
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )
    })
}

pub fn run(args: &BenchArgs, ui: &crate::Bars) -> Result<()> {
    use crate::pipeline::Ui;
    args.check()?;
    let phantom_path = match &args.phantom {
        Some(p) => p.clone(),
        None => shipped("phantoms/sodium-brain.toml")?,
    };
    let phantom = Phantom::load(&phantom_path)
        .with_context(|| format!("--phantom {}", phantom_path.display()))?;
    if let Some(path) = &args.json {
        recon_io::check_writable_file(path).context("--json")?;
    }
    let use_gpu = match args.device {
        crate::config::DeviceChoice::Cpu => false,
        crate::config::DeviceChoice::Cuda => {
            recon_cuda::probe().map_err(|w| anyhow::anyhow!("CUDA unavailable: {w}"))?;
            true
        }
        crate::config::DeviceChoice::Auto => match recon_cuda::probe() {
            Ok(_) => true,
            Err(w) => {
                eprintln!("bench: no usable GPU ({w}); timing the CPU backend (f32)");
                false
            }
        },
    };
    // The book's problem on a GPU; the same sampling density at 48^3 on
    // the CPU, where the book's problem would take over an hour.
    let size = Size {
        matrix: args.matrix.unwrap_or(if use_gpu { 128 } else { 48 }),
        samples: args
            .samples
            .unwrap_or(if use_gpu { 284_592 } else { 15_008 }),
    };
    check_memory(size, use_gpu)?;
    ui.log(&format!(
        "bench: {}^3 image, {} samples, Q on {}^3; computing float64 references on the CPU...",
        size.matrix,
        size.samples,
        2 * size.matrix
    ));
    let p = problem(args, size, &phantom).context("building the benchmark problem")?;
    let mut rows = Vec::new();
    let pairs = |voxels: usize| voxels as f64 * p.traj.len() as f64;
    let timing = args.timing_voxels.min(p.grid.len());
    let plane = size.matrix * size.matrix;
    let timed = timing.div_ceil(plane) * plane;
    // The backend factory every command uses, for the exact engine in f32.
    let engine = crate::config::EngineCfg {
        kind: crate::config::EngineKind::Exact,
        device: if use_gpu {
            crate::config::DeviceChoice::Cuda
        } else {
            crate::config::DeviceChoice::Cpu
        },
        precision: crate::config::Precision::F32,
        ..Default::default()
    };
    let results = if let crate::Chosen::Cuda(mut b) = crate::choose_backend(&engine)? {
        let sfu = b.sfu_bound_pairs_per_s();
        let default_tuning = b.options.tuning;
        let mut shapes: Vec<(recon_cuda::Variant, recon_cuda::Tuning, String)> = Vec::new();
        for &v in &args.variants {
            let var = recon_cuda::Variant::from_number(v)
                .ok_or_else(|| anyhow::anyhow!("no variant {v}"))?;
            let label = match var {
                recon_cuda::Variant::Tuned | recon_cuda::Variant::Streamed => format!(
                    "{v} {} ({}/thread, block {})",
                    var.describe(),
                    default_tuning.per_thread,
                    default_tuning.block
                ),
                _ => format!("{v} {}", var.describe()),
            };
            shapes.push((var, default_tuning, label));
        }
        for t in &args.tune {
            let tuning = parse_tuning(t)?;
            shapes.push((
                recon_cuda::Variant::Tuned,
                tuning,
                format!(
                    "5 tuned ({}/thread, block {})",
                    tuning.per_thread, tuning.block
                ),
            ));
        }
        let mut best: Option<(f64, recon_cuda::Tuning)> = None;
        // The first device's share: with several GPUs the variants are timed on all of them.
        let sfu_of = |rate: f64| Some(100.0 * rate / sfu);
        for (var, tuning, label) in shapes {
            b.options.variant = var;
            b.options.tuning = tuning;
            let (s, out) = time_fhd(&b, &p, timing)?;
            let rate = pairs(timed) / s;
            let err = max_rel_error(&out, &p.check, &p.fhd_ref);
            eprintln!("  {label}: {s:.4} s, {rate:.3e} pairs/s, error {err:.2e}");
            if var == recon_cuda::Variant::Tuned
                && err <= 1e-5
                && best.is_none_or(|(r, _)| rate > r)
            {
                best = Some((rate, tuning));
            }
            rows.push(Row {
                variant: label,
                seconds: s,
                pairs_per_s: rate,
                sfu_percent: sfu_of(rate),
                max_rel_error: err,
            });
        }
        b.options.variant = recon_cuda::Variant::Tuned;
        b.options.tuning = best.map(|(_, t)| t).unwrap_or(default_tuning);
        end_to_end(&b, args, &p, rows, Some(sfu), ui)?
    } else {
        let b = CpuBackend::<f32>::new();
        let (s, out) = time_fhd(&b, &p, timing)?;
        let rate = pairs(timed) / s;
        let err = max_rel_error(&out, &p.check, &p.fhd_ref);
        rows.push(Row {
            variant: "CPU f32 engine".into(),
            seconds: s,
            pairs_per_s: rate,
            sfu_percent: None,
            max_rel_error: err,
        });
        end_to_end(&b, args, &p, rows, None, ui)?
    };
    print_table(&results, timed);
    if let Some(path) = &args.json {
        let json = serde_json::to_string_pretty(&results)? + "\n";
        recon_io::write_atomic(path, |tmp| crate::output::write_text(tmp, &json))?;
    }
    Ok(())
}

fn end_to_end<B: NufftBackend>(
    b: &B,
    args: &BenchArgs,
    p: &Problem,
    variants: Vec<Row>,
    sfu: Option<f64>,
    ui: &crate::Bars,
) -> Result<Results> {
    use crate::pipeline::Ui;
    if let Some(free) = b.memory_available() {
        crate::pipeline::check_device_memory(&b.describe(), free, p.grid.n, p.traj.len())?;
    }
    ui.log(&format!(
        "bench: Q on {:?} with {}",
        p.grid.doubled(),
        b.describe()
    ));
    // The exact engine: this benchmark times the summation ladder.
    let plan = recon_encoding::Plan::new(b, recon_encoding::Engine::Exact, &p.grid, &p.traj)?;
    let t = Instant::now();
    let q = ui.stage("Q", |pr| recon_q::compute(&plan, pr))?;
    let q_seconds = t.elapsed().as_secs_f64();
    let q_err = max_rel_error(&q, &p.q_check, &p.q_ref);

    // F^H D, then F^H D + CG end to end (the Toeplitz set-up, FFT of Q, included).
    let t = Instant::now();
    let mut fhd = vec![Complex::default(); p.grid.len()];
    ui.stage("F^H D", |pr| plan.adjoint(&mut fhd, &p.data, pr))?;
    let fhd_seconds = t.elapsed().as_secs_f64();
    let t_cg = Instant::now();
    let mut toeplitz = Toeplitz::new(b, &p.grid, &q)?;
    let t_toeplitz = t_cg.elapsed().as_secs_f64();
    let lambda = recon_cg::lambda_abs(0.01, &p.grid, &q)?;
    let mut a = Regularised::new(b, &mut toeplitz, &Stencil::uniform(p.grid.n), lambda)?;
    let rhs = b.upload(&fhd)?;
    let mut x = b.zeros(p.grid.len())?;
    let params = Params {
        iterations: args.iterations,
        tolerance: 0.0,
    };
    let t_setup = t_cg.elapsed().as_secs_f64();
    let t_it = Instant::now();
    let info = ui.solver(params.iterations, |cb| {
        recon_cg::solve(b, &mut a, &mut x, &rhs, &params, cb)
    })?;
    let iters = t_it.elapsed().as_secs_f64();
    let mut xh = vec![Complex::default(); p.grid.len()];
    b.download(&mut xh, &x)?;
    let cg_total = t_cg.elapsed().as_secs_f64();
    // A second Toeplitz set-up shows what the first paid once per process
    // (loading cuFFT, planning the (2N)^3 transform).
    let t = Instant::now();
    drop(Toeplitz::new(b, &p.grid, &q)?);
    let t_toeplitz_warm = t.elapsed().as_secs_f64();
    eprintln!(
        "bench: CG set-up {t_setup:.3} s (Toeplitz {t_toeplitz:.3} s; again, warm: {t_toeplitz_warm:.3} s), \
         {} iterations {iters:.3} s, with download {cg_total:.3} s",
        info.iterations
    );
    Ok(Results {
        device: b.describe(),
        matrix: p.grid.n[0],
        samples: p.traj.len(),
        q_grid: 2 * p.grid.n[0],
        sfu_bound_pairs_per_s: sfu,
        variants,
        q_seconds,
        q_max_rel_error: q_err,
        fhd_seconds,
        cg_ms_per_iteration: 1e3 * iters / info.iterations.max(1) as f64,
        fhd_plus_cg_seconds: fhd_seconds + cg_total,
        iterations: info.iterations,
    })
}

fn print_table(r: &Results, timed: usize) {
    println!("recon bench: {}", r.device);
    println!(
        "problem: {}^3 image, {} samples, Q on {}^3; variants timed on F^H D over {} voxels",
        r.matrix, r.samples, r.q_grid, timed
    );
    if let Some(s) = r.sfu_bound_pairs_per_s {
        println!("special-function bound: {s:.3e} pairs/s (1 sin + 1 cos per pair, 16/clock/SM)");
    }
    println!(
        "{:<52} {:>10} {:>12} {:>8} {:>10}",
        "variant", "time (s)", "pairs/s", "% SFU", "max err"
    );
    for row in &r.variants {
        let sfu = row
            .sfu_percent
            .map(|p| format!("{p:.1}"))
            .unwrap_or_else(|| "-".into());
        println!(
            "{:<52} {:>10.4} {:>12.3e} {:>8} {:>10.2e}",
            row.variant, row.seconds, row.pairs_per_s, sfu, row.max_rel_error
        );
    }
    println!(
        "Q ({}^3)                  {:>8.3} s   (max err {:.2e})",
        r.q_grid, r.q_seconds, r.q_max_rel_error
    );
    println!("F^H D                      {:>8.3} s", r.fhd_seconds);
    println!(
        "CG per iteration           {:>8.3} ms",
        r.cg_ms_per_iteration
    );
    println!(
        "F^H D + {} CG iterations   {:>8.3} s",
        r.iterations, r.fhd_plus_cg_seconds
    );
}

/// The benchmark's host memory: the pipeline's estimate for its problem.
fn check_memory(size: Size, use_gpu: bool) -> Result<()> {
    use recon_core::memory::{self, gib};
    let run = memory::HostRun {
        q: true,
        solve: true,
        real_bytes: 8,
        on_gpu: use_gpu,
        anatomy_voxels: 0,
        gridding_oversampling: 0.0,
        output_q: false,
        // The benchmark times the exact engine.
        nufft: false,
    };
    let Some(free) = memory::available_host_bytes() else {
        return Ok(());
    };
    let need =
        memory::host_bytes([size.matrix; 3], size.samples, &run).map_or(u64::MAX, |(_, b)| b);
    if need > free {
        let fits = memory::largest_cubic(free, |n| {
            memory::host_bytes([n; 3], size.samples, &run).map(|(_, b)| b)
        });
        anyhow::bail!(
            "not enough memory: the benchmark on {}^3 with {} samples needs about {:.2} GiB of host memory, \
             but {:.2} GiB is available; {}",
            size.matrix,
            size.samples,
            gib(need),
            gib(free),
            fits.map_or("not even a small matrix fits".into(), |n| format!("the largest cubic matrix that fits is {n}"))
        );
    }
    Ok(())
}
