//! The rows of validate's matrix: which engine, device and precision each
//! runs, built through the backend factory every command uses.

use crate::config::{DeviceChoice, EngineCfg, EngineKind, Loaded, Precision};
use crate::pipeline::{self, Inputs, Outputs, Ui};
use anyhow::Result;

/// A row of the matrix: the exact engine on each device and precision,
/// the NUFFT engine at two tolerances in float64 on the CPU, and the NUFFT
/// on the GPU, all on the same data.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Method {
    CpuF64,
    CpuF32,
    GpuAccurate,
    GpuFast,
    /// The NUFFT engine in float64 on the CPU at this tolerance.
    Nufft(f64),
    /// The NUFFT engine at 1e-6 on the GPU (float32).
    GpuNufft,
}

impl Method {
    pub(super) const ALL: [Method; 7] = [
        Method::CpuF64,
        Method::CpuF32,
        Method::GpuAccurate,
        Method::GpuFast,
        Method::Nufft(1e-3),
        Method::Nufft(1e-6),
        Method::GpuNufft,
    ];

    /// A GPU row, run on the CPU in float32 where there is no GPU.
    pub(super) fn wants_gpu(self) -> bool {
        matches!(
            self,
            Method::GpuAccurate | Method::GpuFast | Method::GpuNufft
        )
    }

    pub(super) fn name(self) -> String {
        match self {
            Method::CpuF64 => "exact, CPU float64".into(),
            Method::CpuF32 => "exact, CPU float32".into(),
            Method::GpuAccurate => "exact, GPU accurate sin/cos (variant 2)".into(),
            Method::GpuFast => "exact, GPU hardware sin/cos (variant 5)".into(),
            Method::Nufft(t) => format!("NUFFT {t:e}, CPU float64"),
            Method::GpuNufft => "NUFFT 1e-6, GPU float32".into(),
        }
    }

    /// The engine settings of the row (the config's own thread count).
    fn engine(self, gpu: bool, threads: usize) -> EngineCfg {
        let mut e = EngineCfg {
            kind: EngineKind::Exact,
            device: DeviceChoice::Cpu,
            precision: Precision::F64,
            threads,
            ..Default::default()
        };
        match self {
            Method::CpuF64 => {}
            Method::CpuF32 => e.precision = Precision::F32,
            Method::GpuAccurate | Method::GpuFast => {
                e.precision = Precision::F32;
                if gpu {
                    e.device = DeviceChoice::Cuda;
                    e.variant = Some(if self == Method::GpuFast { 5 } else { 2 });
                }
            }
            Method::Nufft(t) => {
                e.kind = EngineKind::Nufft;
                e.tolerance = Some(t);
            }
            Method::GpuNufft => {
                e.kind = EngineKind::Nufft;
                e.tolerance = Some(1e-6);
                e.precision = Precision::F32;
                if gpu {
                    e.device = DeviceChoice::Cuda;
                }
            }
        }
        e
    }
}

/// Runs one row, through the backend factory every command uses: the GPU
/// rows on the GPU when there is one, else on the CPU in float32.
pub(super) fn run_method(
    m: Method,
    gpu: bool,
    l: &Loaded,
    inputs: &Inputs,
    ui: &impl Ui,
) -> Result<(Outputs, String)> {
    let mut case = l.clone();
    case.cfg.engine = m.engine(gpu, l.cfg.engine.threads);
    let chosen = crate::choose_backend(&case.cfg.engine)?;
    let out = crate::on_backend!(chosen, b => pipeline::reconstruct(b, &case, inputs, ui))?;
    let name = match m {
        _ if m.wants_gpu() && !gpu => {
            format!("{} -> CPU float32 (no GPU)", m.name())
        }
        _ => m.name(),
    };
    Ok((out, name))
}
