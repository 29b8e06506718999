//! The backend factory: the one place where the config's (or a command's)
//! engine settings become a concrete backend, CUDA or the CPU in f32 or
//! f64, and where generic stages meet them ([`on_backend!`]).

use crate::config::{self, DeviceChoice, Loaded, Precision};
use anyhow::{Context, Result};

/// Runs `$body` with `$b` bound to the backend `$chosen` names: the one
/// place where a generic stage meets the concrete backends.
macro_rules! on_backend {
    ($chosen:expr, $b:ident => $body:expr) => {
        match $chosen {
            $crate::Chosen::Cuda(cuda) => {
                let $b = &cuda;
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
pub(crate) use on_backend;

/// Sets the thread count and picks the backend the config (or `--device`)
/// asks for.
pub(crate) fn backend_for(l: &mut Loaded, device: Option<DeviceChoice>) -> Result<Chosen> {
    if l.cfg.engine.threads > 0 {
        rayon::ThreadPoolBuilder::new()
            .num_threads(l.cfg.engine.threads)
            .build_global()
            .context("setting engine.threads")?;
    }
    if let Some(d) = device {
        l.cfg.engine.device = d;
    }
    choose_backend(&l.cfg.engine)
}

pub(crate) enum Chosen {
    Cuda(recon_cuda::CudaBackend),
    Cpu(Precision),
}

/// `engine.device`: `cuda` insists on a GPU; `auto` takes one when usable
/// and otherwise says, in one line, why it runs on the CPU.
pub(crate) fn choose_backend(e: &config::EngineCfg) -> Result<Chosen> {
    let options = || recon_cuda::Options {
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
                anyhow::bail!(
                    "the GPU computes in f32: use engine.precision = \"f32\" with the cuda device"
                );
            }
            recon_cuda::probe()
                .map_err(|why| anyhow::anyhow!("device = cuda, but CUDA is unavailable: {why}"))?;
            Ok(Chosen::Cuda(
                recon_cuda::CudaBackend::new(options()).context("opening the GPU")?,
            ))
        }
        DeviceChoice::Auto => {
            if e.precision == Precision::F64 {
                eprintln!(
                    "device auto: engine.precision = f64 runs on the CPU (the GPU computes in f32)"
                );
                return Ok(Chosen::Cpu(e.precision));
            }
            match recon_cuda::probe() {
                Err(why) => {
                    eprintln!("device auto: no usable GPU ({why}); running on the CPU");
                    Ok(Chosen::Cpu(e.precision))
                }
                Ok(_) => {
                    let b = recon_cuda::CudaBackend::new(options()).context("opening the GPU")?;
                    eprintln!("device auto: using {}", b.device_names().join(" + "));
                    Ok(Chosen::Cuda(b))
                }
            }
        }
    }
}
