//! The CUDA backend: [`recon_core::Backend`] on NVIDIA GPUs, in float32.
//!
//! Key design decision: nothing CUDA is needed to build. cudarc loads
//! libcuda, NVRTC and cuFFT at run time (`dynamic-loading`), and [`probe`]
//! checks for each library before cudarc would panic on a missing one, so a
//! machine without a GPU gets a clear "unavailable" instead. Kernels live in
//! `kernels/*.cu`; the modules a run launches are compiled by NVRTC to
//! machine code for the device's architecture when first needed, kept
//! across processes by a [`KernelCache`] (kernels.rs), and loaded into each
//! device's context.
//!
//! The summation engine keeps the book's optimisation ladder as selectable
//! [`Variant`]s and computes any slab of its output points (each point by
//! the same code whatever the slab, so a sum split over GPUs does not
//! depend on their number). Like every other primitive it runs on the
//! first GPU; only scalars cross to the host per CG iteration. Each GPU is
//! a shard ([`Backend::shard`](recon_core::Backend::shard)), and the work
//! split over several (SENSE's coils, Q's slabs) is split above the
//! backend, by recon-ops' sharded operator, with direct copies between the
//! GPUs. Work is ordered by hand (one stream per GPU, events where two
//! meet): cudarc's automatic event per buffer and launch is off
//! (device.rs).
//!
//! This file opens the GPUs ([`CudaBackend::new`]); backend.rs implements
//! the trait on them, a method at a time.

mod backend;
mod cg_lines;
mod device;
#[cfg(test)]
mod emulate;
mod engine;
mod error;
mod kernels;
mod launch;
mod lines;
mod modules;
mod nufft;
mod nufft_backend;
mod options;
mod peers;
mod plans;
mod pool;
mod probe;
mod sparse;
mod toeplitz;
mod vector;
mod wavelet;

use device::Device;
use recon_core::{Error, Result};
use std::sync::atomic::Ordering;
use std::sync::Arc;

pub use engine::{Lattice, Sample};
pub use kernels::{kernel_stats, KernelCache, KernelStats};
pub use nufft::{CudaNufft, Interpolation, NufftOptions, Spreading, Upsampling};
pub use options::{Options, Tuning, Variant};
pub use plans::{CudaFft3, CudaToeplitz};
pub use probe::{probe, Unavailable};

/// The CUDA backend.
pub struct CudaBackend {
    /// `devices[0]` holds the vectors and runs every primitive; each is a
    /// shard ([`Backend::shard`](recon_core::Backend::shard)) for the work split over several.
    devices: Vec<Arc<Device>>,
    pub options: Options,
}

/// Squared stencil weights on the first device.
pub struct CudaWeights {
    pub(crate) n: [usize; 3],
    /// `None`: every edge weight 1 (the kernel gets null pointers).
    pub(crate) w2: Option<[cudarc::driver::CudaSlice<f32>; 3]>,
    /// `None`: no diagonal (a null pointer).
    pub(crate) d2: Option<cudarc::driver::CudaSlice<f32>>,
}

impl CudaWeights {
    /// `x` and `out` are images of the weights' grid.
    fn check(
        &self,
        x: &cudarc::driver::CudaSlice<f32>,
        out: &cudarc::driver::CudaSlice<f32>,
    ) -> Result<()> {
        let len: usize = self.n.iter().product();
        Error::check_len("W^H W input", 2 * len, x.len())?;
        Error::check_len("W^H W output", 2 * len, out.len())
    }

    /// Every edge weighted 1 and no diagonal: a convolution but at the
    /// grid's faces, which the Toeplitz product can take along.
    fn is_uniform(&self) -> bool {
        self.w2.is_none() && self.d2.is_none()
    }
}

/// The GPUs' contexts that [`CudaBackend::warm_up`] retained, released
/// when dropped.
pub struct Warm {
    _contexts: Vec<Arc<cudarc::driver::CudaContext>>,
}

impl CudaBackend {
    /// Opens the GPUs named by `options.devices` (all by default). Call
    /// [`probe`] first: without libcuda this reports the error cudarc
    /// would otherwise panic on.
    pub fn new(options: Options) -> Result<Self> {
        let count = probe().map_err(|u| error::err("probe", u))?;
        let ordinals = options
            .devices
            .clone()
            .unwrap_or_else(|| (0..count).collect());
        if ordinals.is_empty() {
            return Err(Error::Invalid {
                what: "CUDA devices",
                reason: "the list of devices is empty".into(),
            });
        }
        let mut devices = Vec::new();
        for o in ordinals {
            if o >= count {
                return Err(Error::Invalid {
                    what: "CUDA devices",
                    reason: format!("device {o} requested, but only {count} present"),
                });
            }
            devices.push(Device::open(
                o,
                options.kernel_cache.clone(),
                options.chained_launches,
            )?);
        }
        for i in 1..devices.len() {
            let (first, rest) = devices.split_at_mut(i);
            peers::enable_peer_access(&mut first[0], &mut rest[0])?;
        }
        let devices = devices.into_iter().map(Arc::new).collect();
        Ok(CudaBackend { devices, options })
    }

    /// Starts the driver and retains every GPU's primary context on a
    /// thread of its own, so that a run can read its input meanwhile: what
    /// [`probe`] and opening a device cost once a process (loading the
    /// libraries, starting the driver, making the contexts) is then paid
    /// by the time [`CudaBackend::new`] opens them, which finds the
    /// contexts made. Join the handle once the backend is made and drop
    /// what it returns (the contexts' extra references). Empty where CUDA
    /// cannot run here: the backend says why when it is asked for.
    pub fn warm_up() -> std::thread::JoinHandle<Warm> {
        std::thread::spawn(|| {
            let _contexts = match probe() {
                Ok(count) => (0..count)
                    .filter_map(|o| cudarc::driver::CudaContext::new(o).ok())
                    .collect(),
                Err(_) => Vec::new(),
            };
            Warm { _contexts }
        })
    }

    /// One line per GPU in use.
    pub fn device_names(&self) -> Vec<String> {
        self.devices.iter().map(|d| d.describe()).collect()
    }

    pub fn device_count(&self) -> usize {
        self.devices.len()
    }

    /// Whether the GPUs chain their kernels by programmatic dependent
    /// launch: [`Options::chained_launches`] asked for it and they have it
    /// (sm_90 on).
    pub fn chained_launches(&self) -> bool {
        self.devices.iter().all(|d| d.pdl)
    }

    /// How many kernels of lines.cu and vector.cu (the Toeplitz product's
    /// passes and the vector updates: every kernel of a CG iteration) the
    /// GPUs have launched so far, chained or not: for tests and benchmarks
    /// to count what a step launches.
    pub fn line_and_vector_launches(&self) -> u64 {
        let count = |d: &Arc<Device>| d.chained_count.load(Ordering::Relaxed);
        self.devices.iter().map(count).sum()
    }

    /// The first device's peak of special-function results: one sin and one
    /// cos per pair at 16 results per clock per SM, in pairs per second.
    pub fn sfu_bound_pairs_per_s(&self) -> f64 {
        self.devices.iter().map(|d| d.sfu_bound()).sum()
    }

    /// Bytes the first GPU's memory pool holds and no vector uses: freed
    /// memory kept for the next allocations, until
    /// [`Backend::release_unused_memory`](recon_core::Backend::release_unused_memory) or an allocation that needs it.
    pub fn pool_unused_bytes(&self) -> Result<u64> {
        self.dev0().pool_unused()
    }

    fn dev0(&self) -> &Device {
        &self.devices[0]
    }
}
