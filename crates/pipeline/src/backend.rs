//! The backend factory: the one place where the config's (or a command's)
//! engine settings become a concrete backend, CUDA or the CPU in f32 or
//! f64, and where generic stages meet them ([`on_backend!`]). What it tells
//! the user (which device `auto` took, and why) goes through a `note`
//! callback: the library prints nothing.

use crate::config::{self, DeviceChoice, Loaded, Precision};
use crate::{Context, Result};

mod small;
pub use small::small_for_gpu;

/// Runs `$body` with `$b` bound to the backend `$chosen` names (a
/// [`Chosen`] or a reference to one): the one place where a generic stage
/// meets the concrete backends.
#[macro_export]
macro_rules! on_backend {
    ($chosen:expr, $b:ident => $body:expr) => {
        match $chosen {
            $crate::Chosen::Cuda(cuda) => {
                let $b: &recon_cuda::CudaBackend = &cuda;
                $body
            }
            $crate::Chosen::Cpu($crate::config::Precision::F32) => {
                let $b = &recon_core::CpuBackend::<f32>::new();
                $body
            }
            $crate::Chosen::Cpu($crate::config::Precision::F64) => {
                let $b = &recon_core::CpuBackend::<f64>::new();
                $body
            }
        }
    };
}

/// Sets the thread count and picks the backend the config (or `--device`)
/// asks for; `note` gets the lines the user should see.
pub fn backend_for(
    l: &mut Loaded,
    device: Option<DeviceChoice>,
    note: &dyn Fn(&str),
) -> Result<Chosen> {
    settle(l, device, note)?;
    choose_backend(&l.cfg.engine, &config::cache_dir(&l.cfg), note)
}

/// What [`backend_for`] does before it chooses: the thread count set,
/// `device` (`--device`) over the config's, and `auto` turned to the CPU
/// for a problem too small to win back a GPU's opening
/// ([`small_for_gpu`]; `note` says so).
pub fn settle(l: &mut Loaded, device: Option<DeviceChoice>, note: &dyn Fn(&str)) -> Result<()> {
    set_threads("config key `engine.threads`", l.cfg.engine.threads, note)?;
    if let Some(d) = device {
        l.cfg.engine.device = d;
    }
    if let Some(why) = small_for_gpu(l) {
        note(&why);
        l.cfg.engine.device = DeviceChoice::Cpu;
    }
    Ok(())
}

/// Whether `e` (with `device` over its own) may open a GPU: `cuda`, or
/// `auto` in f32.
pub fn may_open_gpu(e: &config::EngineCfg, device: Option<DeviceChoice>) -> bool {
    device.unwrap_or(e.device) != DeviceChoice::Cpu && e.precision != Precision::F64
}

/// The GPUs' driver and contexts started on a thread of their own while
/// `cfg`'s scan file is read, where it may open a GPU ([`may_open_gpu`],
/// [`recon_cuda::CudaBackend::warm_up`]); join it after the backend is
/// chosen. A synthetic run has nothing to read: it opens its GPU beside
/// its synthesis once [`settle`] has decided the device.
pub fn warm_gpu(
    cfg: &config::Config,
    device: Option<DeviceChoice>,
) -> Option<std::thread::JoinHandle<recon_cuda::Warm>> {
    let gpu = cfg.scan.is_some() && may_open_gpu(&cfg.engine, device);
    gpu.then(recon_cuda::CudaBackend::warm_up)
}

/// The backend a run computes on.
pub enum Chosen {
    Cuda(recon_cuda::CudaBackend),
    Cpu(Precision),
}

/// `engine.device`: `cuda` insists on a GPU; `auto` takes one when usable
/// and otherwise says, in one line, why it runs on the CPU. A GPU keeps
/// its compiled kernels in `cache_dir` ([`crate::KernelFiles`]).
/// `note` gets that line, and which GPUs `auto` took.
pub fn choose_backend(
    e: &config::EngineCfg,
    cache_dir: &std::path::Path,
    note: &dyn Fn(&str),
) -> Result<Chosen> {
    let kernels: std::sync::Arc<dyn recon_cuda::KernelCache> =
        std::sync::Arc::new(crate::KernelFiles::new(cache_dir));
    let options = || recon_cuda::Options {
        kernel_cache: Some(kernels.clone()),
        variant: recon_cuda::Variant::from_number(e.variant()).expect("validated"),
        tuning: recon_cuda::Tuning {
            per_thread: e.per_thread(),
            block: e.block(),
        },
        ..Default::default()
    };
    match e.device {
        DeviceChoice::Cpu => Ok(Chosen::Cpu(e.precision)),
        DeviceChoice::Cuda => {
            if e.precision == Precision::F64 {
                crate::bail!(
                    "the GPU computes in f32: use engine.precision = \"f32\" with the cuda device"
                );
            }
            recon_cuda::probe().map_err(|why| {
                crate::Error::Invalid(format!("device = cuda, but CUDA is unavailable: {why}"))
            })?;
            Ok(Chosen::Cuda(
                recon_cuda::CudaBackend::new(options()).context("opening the GPU")?,
            ))
        }
        DeviceChoice::Auto => {
            if e.precision == Precision::F64 {
                note(
                    "device auto: engine.precision = f64 runs on the CPU (the GPU computes in f32)",
                );
                return Ok(Chosen::Cpu(e.precision));
            }
            match recon_cuda::probe() {
                Err(why) => {
                    note(&format!(
                        "device auto: no usable GPU ({why}); running on the CPU"
                    ));
                    Ok(Chosen::Cpu(e.precision))
                }
                Ok(_) => {
                    let b = recon_cuda::CudaBackend::new(options()).context("opening the GPU")?;
                    note(&format!(
                        "device auto: using {}",
                        b.device_names().join(" + ")
                    ));
                    Ok(Chosen::Cuda(b))
                }
            }
        }
    }
}

/// What a run of `l` computes, for [`recon_core::Backend::prepare`] (a GPU
/// compiles the kernels it needs side by side): its engine's NUFFTs (type 1
/// on the image's grid, and Q's on the doubled grid) or the exact engine,
/// the gridding baseline's NUFFTs, the Toeplitz product on its grid, and its
/// prior's operators. What it misses (a stack's slices, another
/// command's work) is compiled when first used.
pub fn workload(l: &Loaded) -> recon_core::Workload {
    use crate::config::PriorKind;
    let n = l.grid.n;
    let nufft = |modes, tolerance, type2| recon_core::NufftUse {
        modes,
        tolerance,
        type2,
    };
    let mut w = recon_core::Workload::default();
    match l.cfg.engine.engine() {
        recon_encoding::Engine::Nufft { tolerance } => {
            w.nufft.push(nufft(n, tolerance, false));
            w.nufft.push(nufft(l.grid.doubled(), tolerance, false));
        }
        recon_encoding::Engine::Exact => w.exact = true,
    }
    // The density compensation convolves (spreads and interpolates); the
    // image only spreads.
    w.nufft.push(nufft(n, recon_gridding::DCF_TOLERANCE, true));
    w.nufft
        .push(nufft(n, recon_gridding::IMAGE_TOLERANCE, false));
    w.toeplitz.push(n);
    match l.cfg.prior.kind {
        PriorKind::Quadratic => {}
        PriorKind::Tv | PriorKind::Dtv => w.sparse = true,
        PriorKind::Wavelet => {
            w.sparse = true;
            w.wavelets = true;
        }
    }
    w
}

/// The CPU cores this process may use (its affinity and cgroup quota
/// counted), at least 1.
pub fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// The most CPU threads a run accepts, per core: beyond the cores, threads
/// only wait for each other (4096 threads on 2 cores turned a 0.1 s run
/// into minutes).
pub const MAX_THREADS_PER_CORE: usize = 4;

/// The threads `threads` (`key`'s value; 0: the default) asks for: itself,
/// or `RAYON_NUM_THREADS` when set, or every core.
fn threads_asked(threads: usize) -> (usize, String) {
    if threads > 0 {
        return (threads, String::new());
    }
    match std::env::var("RAYON_NUM_THREADS")
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
    {
        Some(n) if n > 0 => (n, " (from RAYON_NUM_THREADS)".to_string()),
        _ => (cores(), String::new()),
    }
}

/// Refuses more than [`MAX_THREADS_PER_CORE`] threads per available core.
pub fn check_threads(key: &str, threads: usize) -> Result<()> {
    let (n, from) = threads_asked(threads);
    let (cores, max) = (cores(), MAX_THREADS_PER_CORE * cores());
    if n > max {
        crate::bail!(
            "{key}: {n} threads{from} on {cores} available core(s): at most {max} \
             ({MAX_THREADS_PER_CORE} per core) are accepted, since threads beyond the cores only \
             wait for each other; use 0 for one per core"
        );
    }
    Ok(())
}

/// Checks `threads` ([`check_threads`]), warns above the core count, and
/// sizes the global thread pool. `key` names the setting in messages,
/// `note` gets the warning.
pub fn set_threads(key: &str, threads: usize, note: &dyn Fn(&str)) -> Result<()> {
    check_threads(key, threads)?;
    let (n, from) = threads_asked(threads);
    let cores = cores();
    if n > cores {
        note(&format!(
            "warning: {key}: {n} threads{from} on {cores} available core(s): the extra threads \
             share the cores, which rarely helps"
        ));
    }
    // 0 leaves rayon its default, which is what `threads_asked` counted.
    if threads > 0 {
        rayon::ThreadPoolBuilder::new()
            .num_threads(n)
            .build_global()
            .with_context(|| format!("setting {key}"))?;
    }
    Ok(())
}
