//! `recon bench-nufft`: times the NUFFT engine, on the CPU or the GPU.
//!
//! With `--scan`, on a scan file's trajectory, for a side-by-side
//! comparison with FINUFFT on the same points (`scripts/nufft-vs-finufft.py`
//! runs both): F^H D (type 1), the forward model (type 2) and Q, through the
//! encoding plan, host data in and out. With `--random-points M`, the raw
//! transforms on device vectors for M uniform random points (FINUFFT's and
//! cuFINUFFT's throughput test): type 1 and type 2 onto a `--matrix`^3 grid.
//!
//! Each sum is timed as FINUFFT times its execute step: the plan and its
//! sorted points are made once (and timed apart), then each transform runs
//! a few times and the best is kept. The L2 norm of each result is printed
//! so that a script can check that two tools solved the same problem.

use crate::config::{DeviceChoice, EngineCfg, EngineKind, Precision};
use crate::reader::{read_isolated, UnitsArg};
use anyhow::{Context, Result};
use recon_core::{Complex, Real};
use recon_encoding::{Engine, NufftBackend, Plan};
use std::time::Instant;

#[derive(clap::Args, Debug, Clone)]
pub struct BenchNufftArgs {
    /// Scan file (recon's format; `recon simulate` writes one).
    #[arg(
        long,
        conflicts_with = "random_points",
        required_unless_present = "random_points"
    )]
    pub scan: Option<std::path::PathBuf>,
    /// Instead of a scan: this many uniform random points (fixed seed).
    #[arg(long)]
    pub random_points: Option<usize>,
    /// Modes per axis for --random-points.
    #[arg(long, default_value_t = 128)]
    pub matrix: usize,
    /// NUFFT tolerance.
    #[arg(long, default_value_t = 1e-6)]
    pub tolerance: f64,
    /// f32 or f64 (the GPU computes in f32).
    #[arg(long, default_value = "f64")]
    pub precision: Precision,
    /// cpu (default) or cuda.
    #[arg(long, value_enum, default_value = "cpu")]
    pub device: DeviceChoice,
    /// Runs of each transform; the best is reported.
    #[arg(long, default_value_t = 3)]
    pub repeats: usize,
    /// CPU threads; 0 uses every core.
    #[arg(long, default_value_t = 0)]
    pub threads: usize,
    /// GPU spreading: auto, shared, fixed-point or global.
    #[arg(long, default_value = "auto")]
    pub spreading: String,
    /// GPU interpolation: auto, shared or global.
    #[arg(long, default_value = "auto")]
    pub interpolation: String,
    /// GPU fine grid: auto, 2 or 1.5 times the modes.
    #[arg(long, default_value = "auto")]
    pub upsampling: String,
    /// GPU bins in fine cells, e.g. 16x8x8; default the library's (by the
    /// fine grid's upsampling).
    #[arg(long)]
    pub bins: Option<String>,
    /// GPU bins per tile of the sort order, e.g. 4x8x8 (clipped to the
    /// bins there are: 256x256x256 is plain x-fastest order); default the
    /// library's.
    #[arg(long)]
    pub tiles: Option<String>,
    /// GPU points per shared-memory subproblem.
    #[arg(long, default_value_t = recon_cuda::NufftOptions::default().maxsub)]
    pub maxsub: usize,
}

/// The GPU NUFFT settings of the command line.
fn nufft_options(args: &BenchNufftArgs) -> Result<recon_cuda::NufftOptions> {
    use recon_cuda::{Interpolation, Spreading, Upsampling};
    let spreading = match args.spreading.as_str() {
        "auto" => Spreading::Auto,
        "shared" => Spreading::Shared,
        "fixed-point" => Spreading::FixedPoint,
        "global" => Spreading::Global,
        s => anyhow::bail!("--spreading must be auto, shared, fixed-point or global, got {s:?}"),
    };
    let interpolation = match args.interpolation.as_str() {
        "auto" => Interpolation::Auto,
        "shared" => Interpolation::Shared,
        "global" => Interpolation::Global,
        s => anyhow::bail!("--interpolation must be auto, shared or global, got {s:?}"),
    };
    let upsampling = match args.upsampling.as_str() {
        "auto" => Upsampling::Auto,
        "2" => Upsampling::Two,
        "1.5" => Upsampling::ThreeHalves,
        s => anyhow::bail!("--upsampling must be auto, 2 or 1.5, got {s:?}"),
    };
    let bins = args
        .bins
        .as_deref()
        .map(|b| three_sizes("--bins", b))
        .transpose()?;
    let tiles = match &args.tiles {
        Some(t) => three_sizes("--tiles", t)?,
        None => recon_cuda::NufftOptions::default().tiles,
    };
    if !(1..=1 << 20).contains(&args.maxsub) {
        anyhow::bail!("--maxsub must be 1 to 2^20, got {}", args.maxsub);
    }
    Ok(recon_cuda::NufftOptions {
        spreading,
        interpolation,
        upsampling,
        bins,
        maxsub: args.maxsub,
        tiles,
    })
}

/// Three sizes 1 to 256 written like 16x8x8.
fn three_sizes(flag: &str, text: &str) -> Result<[usize; 3]> {
    let sizes: Vec<usize> = text
        .split('x')
        .map(|v| v.parse::<usize>().ok().filter(|&b| (1..=256).contains(&b)))
        .collect::<Option<_>>()
        .unwrap_or_default();
    sizes.try_into().map_err(|_| {
        anyhow::anyhow!("{flag} must be three sizes 1 to 256 like 16x8x8, got {text:?}")
    })
}

/// The best of `repeats` runs of `f`, in seconds.
pub(crate) fn best(repeats: usize, mut f: impl FnMut() -> Result<()>) -> Result<f64> {
    let mut best = f64::INFINITY;
    for _ in 0..repeats {
        let t = Instant::now();
        f()?;
        best = best.min(t.elapsed().as_secs_f64());
    }
    Ok(best)
}

fn norm<T: Real>(v: &[Complex<T>]) -> f64 {
    v.iter()
        .map(|c| c.re.f64().powi(2) + c.im.f64().powi(2))
        .sum::<f64>()
        .sqrt()
}

/// F^H D, F and Q of a scan through the encoding plan.
fn scan_sums<B: NufftBackend>(
    b: &B,
    args: &BenchNufftArgs,
    scan: &recon_io::scan::Scan,
) -> Result<()> {
    let engine = Engine::Nufft {
        tolerance: args.tolerance,
    };
    let (grid, traj) = (&scan.grid, &scan.traj);
    let t = Instant::now();
    let plan = Plan::new(b, engine, grid, traj).context("planning the NUFFT")?;
    let plan_s = t.elapsed().as_secs_f64();
    let mut fhd = vec![Complex::<B::Real>::default(); grid.len()];
    let adjoint_s = best(args.repeats, || {
        Ok(plan.adjoint(&mut fhd, &scan.data, &mut |_, _| {})?)
    })?;
    let mut d = vec![Complex::<B::Real>::default(); traj.len()];
    let forward_s = best(args.repeats, || {
        Ok(plan.forward(&mut d, &fhd, &mut |_, _| {})?)
    })?;
    // Q makes its own plan on the doubled grid each time: timed whole.
    let mut q = vec![Complex::<B::Real>::default(); grid.doubled().iter().product()];
    let q_s = best(args.repeats, || Ok(plan.q(&mut q, &mut |_, _| {})?))?;
    println!(
        "{{\"tool\": \"recon\", \"device\": {:?}, \"engine\": \"{}\", \"precision\": \"{}\", \"threads\": {}, \
         \"matrix\": {:?}, \"samples\": {}, \"plan_s\": {plan_s:.4}, \"type1_s\": {adjoint_s:.4}, \
         \"type2_s\": {forward_s:.4}, \"q_s\": {q_s:.4}, \"type1_norm\": {:e}, \"type2_norm\": {:e}, \
         \"q_norm\": {:e}}}",
        b.describe(),
        engine.describe(),
        B::Real::NAME,
        rayon::current_num_threads(),
        grid.n,
        traj.len(),
        norm(&fhd),
        norm(&d),
        norm(&q)
    );
    Ok(())
}

/// Type 1 and type 2 of `m` random points on the device, results kept there.
fn random_sums<B: NufftBackend>(b: &B, args: &BenchNufftArgs, m: usize) -> Result<()> {
    let modes = [args.matrix; 3];
    let len: usize = modes.iter().product();
    // SplitMix64, fixed seed.
    let mut s = 0x5EED_u64;
    let mut next = move || {
        s = s.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = s;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
    };
    let x: Vec<[f64; 3]> = (0..m)
        .map(|_| [0, 1, 2].map(|_| std::f64::consts::PI * next()))
        .collect();
    let c: Vec<Complex<B::Real>> = (0..m)
        .map(|_| Complex::new(B::Real::of(next()), B::Real::of(next())))
        .collect();
    let c = b.upload(&c)?;
    let t = Instant::now();
    let plan = b.nufft_plan(modes, args.tolerance, 1, &x)?;
    b.synchronize()?;
    let plan_s = t.elapsed().as_secs_f64();
    let mut f = b.zeros(len)?;
    let type1_s = best(args.repeats, || {
        b.nufft_type1(&plan, &mut f, &c)?;
        Ok(b.synchronize()?)
    })?;
    let mut out = b.zeros(m)?;
    let type2_s = best(args.repeats, || {
        b.nufft_type1_adjoint(&plan, &mut out, &f)?;
        Ok(b.synchronize()?)
    })?;
    let (mut hf, mut ho) = (vec![Complex::default(); len], vec![Complex::default(); m]);
    b.download(&mut hf, &f)?;
    b.download(&mut ho, &out)?;
    println!(
        "{{\"tool\": \"recon\", \"device\": {:?}, \"tolerance\": {:e}, \"precision\": \"{}\", \
         \"matrix\": {modes:?}, \"points\": {m}, \"plan_s\": {plan_s:.5}, \"type1_s\": {type1_s:.5}, \
         \"type2_s\": {type2_s:.5}, \"type1_points_per_s\": {:.4e}, \"type2_points_per_s\": {:.4e}, \
         \"type1_norm\": {:e}, \"type2_norm\": {:e}}}",
        b.describe(),
        args.tolerance,
        B::Real::NAME,
        m as f64 / type1_s,
        m as f64 / type2_s,
        norm(&hf),
        norm(&ho)
    );
    Ok(())
}

fn run_on<B: NufftBackend>(b: &B, args: &BenchNufftArgs) -> Result<()> {
    match (&args.scan, args.random_points) {
        (_, Some(m)) => random_sums(b, args, m),
        (Some(path), None) => {
            let (_, scan) = read_isolated(path, UnitsArg::CyclesPerFov, true)?;
            scan_sums(b, args, &scan)
        }
        (None, None) => anyhow::bail!("give --scan or --random-points"),
    }
}

pub fn run(args: &BenchNufftArgs) -> Result<()> {
    if args.repeats == 0 || args.repeats > 100 {
        anyhow::bail!("--repeats must be 1 to 100, got {}", args.repeats);
    }
    if !(1..=1024).contains(&args.matrix) {
        anyhow::bail!("--matrix must be 1 to 1024, got {}", args.matrix);
    }
    if args
        .random_points
        .is_some_and(|m| m == 0 || m > i32::MAX as usize)
    {
        anyhow::bail!("--random-points must be 1 to 2^31 - 1");
    }
    Engine::Nufft {
        tolerance: args.tolerance,
    }
    .check(match args.precision {
        Precision::F32 => 4,
        Precision::F64 => 8,
    })
    .context("--tolerance")?;
    recon_pipeline::backend::set_threads("--threads", args.threads, &crate::note)?;
    let nufft = nufft_options(args)?;
    let engine = EngineCfg {
        kind: EngineKind::Nufft,
        device: args.device,
        precision: args.precision,
        ..Default::default()
    };
    match crate::choose_backend(&engine)? {
        crate::Chosen::Cuda(mut b) => {
            b.options.nufft = nufft;
            run_on(&b, args)
        }
        chosen => crate::on_backend!(chosen, b => run_on(b, args)),
    }
}
