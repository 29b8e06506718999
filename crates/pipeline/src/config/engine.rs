//! `[engine]`: where and how the encoding operator is computed.

use serde::Deserialize;

/// The floating-point precision of the computation.
#[derive(Debug, Clone, Copy, Deserialize, serde::Serialize, PartialEq, Eq, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Precision {
    F32,
    F64,
}

/// Where to compute.
#[derive(Debug, Clone, Copy, Deserialize, serde::Serialize, PartialEq, Eq, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum DeviceChoice {
    /// The GPU when one is usable, else the CPU (saying why).
    Auto,
    Cpu,
    Cuda,
}

/// How Q, F^H D and F are computed (recon-encoding's engines).
#[derive(Debug, Clone, Copy, Deserialize, serde::Serialize, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum EngineKind {
    /// Non-uniform FFTs to `engine.tolerance`.
    #[default]
    Nufft,
    /// Direct summation: the reference, O(N^3 M).
    Exact,
}

#[derive(Debug, Clone, Deserialize, serde::Serialize, Default)]
#[serde(deny_unknown_fields)]
pub struct EngineCfg {
    #[serde(default)]
    pub kind: EngineKind,
    /// The image model's voxel basis: "box" (each voxel a uniform box, the
    /// default) or "delta" (a point at each voxel centre, as SigPy and
    /// torchkbnufft model an image).
    #[serde(default)]
    pub basis: BasisCfg,
    /// nufft only: the relative L2 error the sums may have, 1e-14 to 1e-1
    /// (at least 1e-6 in f32); default 1e-6.
    pub tolerance: Option<f64>,
    #[serde(default = "default_device")]
    pub device: DeviceChoice,
    /// f32 or f64; the GPU computes in f32 only.
    #[serde(default = "default_precision")]
    pub precision: Precision,
    /// CPU threads; 0 uses every core.
    #[serde(default)]
    pub threads: usize,
    /// exact only: GPU summation kernel, 1 to 6 (the book's optimisation
    /// ladder); default 5.
    pub variant: Option<u32>,
    /// exact only: GPU outputs per thread of variants 5 and 6: 1, 2, 4 or
    /// 8; default 4.
    pub per_thread: Option<u32>,
    /// exact only: GPU threads per block of variants 5 and 6: a multiple of
    /// 32, to 1024; default 256.
    pub block: Option<u32>,
}

/// `engine.basis` (recon_core::Basis).
#[derive(Debug, Clone, Copy, Deserialize, serde::Serialize, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum BasisCfg {
    #[default]
    Box,
    Delta,
}

impl EngineCfg {
    /// The voxel basis as recon-core takes it.
    pub fn basis(&self) -> recon_core::Basis {
        match self.basis {
            BasisCfg::Box => recon_core::Basis::Box,
            BasisCfg::Delta => recon_core::Basis::Delta,
        }
    }

    /// The engine as recon-encoding takes it.
    pub fn engine(&self) -> recon_encoding::Engine {
        match self.kind {
            EngineKind::Exact => recon_encoding::Engine::Exact,
            EngineKind::Nufft => recon_encoding::Engine::Nufft {
                tolerance: self
                    .tolerance
                    .unwrap_or(recon_encoding::Engine::DEFAULT_TOLERANCE),
            },
        }
    }

    pub fn variant(&self) -> u32 {
        self.variant.unwrap_or(5)
    }

    pub fn per_thread(&self) -> u32 {
        self.per_thread.unwrap_or(4)
    }

    pub fn block(&self) -> u32 {
        self.block.unwrap_or(256)
    }
}

fn default_device() -> DeviceChoice {
    DeviceChoice::Auto
}

fn default_precision() -> Precision {
    Precision::F32
}

impl Default for DeviceChoice {
    fn default() -> Self {
        default_device()
    }
}

impl Default for Precision {
    fn default() -> Self {
        default_precision()
    }
}
