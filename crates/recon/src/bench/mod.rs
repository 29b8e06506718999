//! `recon bench`: the book's reference problem, timed stage by stage.
//!
//! Default problem: a 128^3 image, 284,592 samples on a 3-D radial
//! trajectory (2541 spokes of 112), Q on 256^3. For each summation variant
//! it times F^H D on a leading share of the voxels, and reports voxel-sample
//! pairs per second, the share of the device's special-function bound, and
//! the largest error against float64 at sampled voxels (max |out - ref| over
//! max |ref|). Then, for each engine of `--engines` (the exact engine with
//! the fastest variant 5 shape, and the NUFFT at `--tolerance`): Q, F^H D,
//! the CG time per iteration, and F^H D + CG end to end ([`stages`]).

pub(crate) mod built;
mod problem;
mod stages;

pub(crate) use problem::radial_trajectory;
use problem::{max_rel_error, problem, radial, time_fhd, Problem};

use anyhow::{Context, Result};
use recon_core::CpuBackend;
use recon_encoding::NufftBackend;
use recon_synth::Phantom;
use serde::Serialize;
use std::path::PathBuf;

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
    /// Engines whose stages are timed: exact, nufft, or both.
    #[arg(long, value_delimiter = ',', default_values_t = [String::from("exact"), String::from("nufft")])]
    pub engines: Vec<String>,
    /// The NUFFT engine's tolerance.
    #[arg(long, default_value_t = recon_encoding::Engine::DEFAULT_TOLERANCE)]
    pub tolerance: f64,
    /// The GPU's Toeplitz product in CG: pruned and fused (where the grid
    /// allows), or the pieces (pad, 3-D FFTs, product, crop) for comparison.
    #[arg(long, value_enum, default_value = "pruned")]
    pub toeplitz: ToeplitzChoice,
    /// The GPU's kernels chained by programmatic dependent launch (where
    /// the GPU has it), or launched plainly for comparison.
    #[arg(long, value_enum, default_value = "chained")]
    pub launches: LaunchChoice,
    /// Also try these per-thread x block shapes for variant 5, e.g. 2x256,4x128.
    #[arg(long, value_delimiter = ',')]
    pub tune: Vec<String>,
    /// Time the stages on this scan file's trajectory and data (as
    /// `recon simulate` writes, say) instead of the radial problem.
    #[arg(long, conflicts_with_all = ["matrix", "samples", "phantom"])]
    pub scan: Option<PathBuf>,
    /// Phantom whose analytic k-space gives the data (default: the shipped
    /// phantoms/sodium-brain.toml, found beside the installed binary).
    #[arg(long)]
    pub phantom: Option<PathBuf>,
    /// Write the results as JSON here.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ToeplitzChoice {
    Pruned,
    Pieces,
}

#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LaunchChoice {
    Chained,
    Plain,
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
    matrix: [usize; 3],
    samples: usize,
    q_grid: [usize; 3],
    sfu_bound_pairs_per_s: Option<f64>,
    toeplitz: ToeplitzChoice,
    launches: LaunchChoice,
    variants: Vec<Row>,
    stages: Vec<stages::Stages>,
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
        self.engines()?;
        Ok(())
    }

    /// Whether `--engines` names the NUFFT (its grids count in memory).
    fn times_nufft(&self) -> Result<bool> {
        Ok(self
            .engines()?
            .iter()
            .any(|e| matches!(e, recon_encoding::Engine::Nufft { .. })))
    }

    /// `--engines` and `--tolerance`, checked for float32 (both backends
    /// are timed in float32).
    fn engines(&self) -> Result<Vec<recon_encoding::Engine>> {
        use recon_encoding::Engine;
        if self.engines.is_empty() {
            anyhow::bail!("--engines needs exact, nufft or both");
        }
        self.engines
            .iter()
            .map(|e| match e.as_str() {
                "exact" => Ok(Engine::Exact),
                "nufft" => {
                    let n = Engine::Nufft {
                        tolerance: self.tolerance,
                    };
                    n.check(4).context("--tolerance")?;
                    Ok(n)
                }
                e => anyhow::bail!("--engines takes exact and nufft, got {e:?}"),
            })
            .collect()
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
    let (grid, traj, data) = match &args.scan {
        Some(path) => {
            let scan = recon_io::scan::read_scan(path, false)
                .with_context(|| format!("--scan {}", path.display()))?;
            (scan.grid, scan.traj, scan.data)
        }
        // The book's problem on a GPU; the same sampling density at 48^3
        // on the CPU, where the book's problem would take over an hour.
        None => {
            let matrix = args.matrix.unwrap_or(if use_gpu { 128 } else { 48 });
            let samples = args
                .samples
                .unwrap_or(if use_gpu { 284_592 } else { 15_008 });
            check_memory([matrix; 3], samples, use_gpu, args.times_nufft()?)?;
            let phantom_path = match &args.phantom {
                Some(p) => p.clone(),
                None => shipped("phantoms/sodium-brain.toml")?,
            };
            let phantom = Phantom::load(&phantom_path)
                .with_context(|| format!("--phantom {}", phantom_path.display()))?;
            radial(matrix, samples, &phantom)?
        }
    };
    if args.scan.is_some() {
        check_memory(grid.n, traj.len(), use_gpu, args.times_nufft()?)?;
    }
    ui.log(&format!(
        "bench: {} image, {} samples, Q on {}; computing float64 references on the CPU...",
        shape(grid.n),
        traj.len(),
        shape(grid.doubled())
    ));
    let p = problem(args, grid, traj, data).context("building the benchmark problem")?;
    let mut rows = Vec::new();
    let pairs = |voxels: usize| voxels as f64 * p.traj.len() as f64;
    let timing = args.timing_voxels.min(p.grid.len());
    let plane = p.grid.n[0] * p.grid.n[1];
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
        if args.launches == LaunchChoice::Plain {
            // Chaining is fixed when a GPU is opened: open it again so.
            let options = recon_cuda::Options {
                chained_launches: false,
                ..b.options.clone()
            };
            drop(b);
            b = recon_cuda::CudaBackend::new(options).context("opening the GPU again")?;
        }
        b.options.pruned_toeplitz = args.toeplitz == ToeplitzChoice::Pruned;
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
        results(&b, args, &p, rows, Some(sfu), ui)?
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
        results(&b, args, &p, rows, None, ui)?
    };
    print_table(&results, timed);
    if let Some(path) = &args.json {
        let json = serde_json::to_string_pretty(&results)? + "\n";
        recon_io::write_atomic(path, |tmp| crate::output::write_text(tmp, &json))?;
    }
    Ok(())
}

/// Every engine's stages on `b`, after the memory check.
fn results<B>(
    b: &B,
    args: &BenchArgs,
    p: &Problem,
    variants: Vec<Row>,
    sfu: Option<f64>,
    ui: &crate::Bars,
) -> Result<Results>
where
    B: NufftBackend,
    B::Real: recon_q::Stored,
{
    if let Some(free) = b.memory_available() {
        let nufft = args.times_nufft()?;
        crate::pipeline::check_device_memory(
            &b.describe(),
            free,
            p.grid.n,
            p.traj.len(),
            nufft,
            1,
            0,
        )?;
    }
    let stages = args
        .engines()?
        .into_iter()
        .map(|e| stages::stages(b, e, args, p, ui))
        .collect::<Result<Vec<_>>>()?;
    Ok(Results {
        device: b.describe(),
        matrix: p.grid.n,
        samples: p.traj.len(),
        q_grid: p.grid.doubled(),
        sfu_bound_pairs_per_s: sfu,
        toeplitz: args.toeplitz,
        launches: args.launches,
        variants,
        stages,
    })
}

fn print_table(r: &Results, timed: usize) {
    println!("recon bench: {}", r.device);
    println!(
        "problem: {} image, {} samples, Q on {}; variants timed on F^H D over {} voxels",
        shape(r.matrix),
        r.samples,
        shape(r.q_grid),
        timed
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
    stages::print(&r.stages, &shape(r.q_grid));
}

/// The benchmark's host memory: the pipeline's estimate for its problem.
/// `128^3`, or `96x64x48` where the sizes differ.
fn shape(n: [usize; 3]) -> String {
    if n[0] == n[1] && n[1] == n[2] {
        format!("{}^3", n[0])
    } else {
        format!("{}x{}x{}", n[0], n[1], n[2])
    }
}

fn check_memory(n: [usize; 3], samples: usize, use_gpu: bool, nufft: bool) -> Result<()> {
    use recon_core::memory::{self, gib};
    let run = memory::HostRun {
        q: true,
        solve: true,
        real_bytes: 8,
        on_gpu: use_gpu,
        anatomy_voxels: 0,
        gridding_oversampling: 0.0,
        output_q: false,
        nufft,
        coils: 1,
        extra_vectors: 0,
    };
    let Some(limit) = memory::host_limit() else {
        return Ok(());
    };
    let free = limit.bytes;
    let need = memory::host_bytes(n, samples, &run).map_or(u64::MAX, |(_, b)| b);
    if need > free {
        let fits = memory::largest_cubic(free, |n| {
            memory::host_bytes([n; 3], samples, &run).map(|(_, b)| b)
        });
        anyhow::bail!(
            "not enough memory: the benchmark on {} with {} samples needs about {:.2} GiB of host memory, \
             but {:.2} GiB is available under {}; {}",
            shape(n),
            samples,
            gib(need),
            gib(free),
            limit.what,
            fits.map_or("not even a small matrix fits".into(), |n| format!("the largest cubic matrix that fits is {n}"))
        );
    }
    Ok(())
}
