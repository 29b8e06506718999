//! The backend's settings: the summation kernel of the book's ladder and
//! its launch shape, the GPUs to use, the NUFFT's spreading, the
//! Toeplitz product's path, and whether kernels are chained.

use crate::NufftOptions;

/// The summation kernels of the book's optimisation ladder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Variant {
    /// 1: everything in global memory, output accumulated there.
    Naive = 1,
    /// 2: coordinates and accumulators in registers.
    Registers = 2,
    /// 3: samples in chunks through constant memory, array of structs.
    Constant = 3,
    /// 4: hardware sin/cos with explicit range reduction.
    FastTrig = 4,
    /// 5: several outputs per thread, unrolled, tuned block size.
    Tuned = 5,
    /// 6: as 5, samples streamed in chunks with copy/compute overlap.
    Streamed = 6,
}

impl Variant {
    pub const ALL: [Variant; 6] = [
        Variant::Naive,
        Variant::Registers,
        Variant::Constant,
        Variant::FastTrig,
        Variant::Tuned,
        Variant::Streamed,
    ];

    pub fn from_number(n: u32) -> Option<Self> {
        Self::ALL.into_iter().find(|v| *v as u32 == n)
    }

    pub fn describe(self) -> &'static str {
        match self {
            Variant::Naive => "naive gather",
            Variant::Registers => "registers",
            Variant::Constant => "constant memory, AoS chunks",
            Variant::FastTrig => "hardware sin/cos",
            Variant::Tuned => "tuned, several outputs/thread",
            Variant::Streamed => "streamed chunks, copy/compute overlap",
        }
    }
}

/// Launch shape of variants 5 and 6.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tuning {
    /// Outputs per thread: 1, 2, 4 or 8.
    pub per_thread: u32,
    /// Threads per block.
    pub block: u32,
}

impl Default for Tuning {
    fn default() -> Self {
        Tuning {
            per_thread: 4,
            block: 256,
        }
    }
}

/// Backend settings.
#[derive(Debug, Clone)]
pub struct Options {
    pub variant: Variant,
    pub tuning: Tuning,
    /// GPUs to use for the summation engine; `None`: all of them.
    pub devices: Option<Vec<usize>>,
    /// The NUFFT's spreading method and bins.
    pub nufft: NufftOptions,
    /// The Toeplitz product pruned and fused, and FFT(Q) by the line
    /// kernels with its shift folded in, where the grid allows
    /// (toeplitz.rs); `false`: always the pieces, for comparison.
    pub pruned_toeplitz: bool,
    /// The kernels of lines.cu and vector.cu (the Toeplitz product's passes
    /// and the vector updates, all of a CG iteration's) chained by
    /// programmatic dependent launch where the GPU has it (sm_90 on;
    /// launch.rs); `false`: launched plainly, for comparison. Read when
    /// [`CudaBackend::new`](crate::CudaBackend::new) opens the GPUs: a
    /// change afterwards takes effect on a backend opened anew.
    pub chained_launches: bool,
    /// Where compiled kernels are kept across processes (recon's cache
    /// folder); `None`: compiled by every process that needs them.
    pub kernel_cache: Option<std::sync::Arc<dyn crate::KernelCache>>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            variant: Variant::Tuned,
            tuning: Tuning::default(),
            devices: None,
            nufft: NufftOptions::default(),
            pruned_toeplitz: true,
            chained_launches: true,
            kernel_cache: None,
        }
    }
}
