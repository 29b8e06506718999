//! One GPU: its context, streams and memory, and the kernels of each `.cu`
//! file, loaded when first needed and held in that file's `Kernels` beside
//! its typed launchers: vector.rs (vector and stencil primitives), sparse.rs
//! and wavelet.rs (the sparse priors), engine.rs (the summation engine,
//! sum.cu), nufft.rs and lines.rs. kernels.rs has the sources and compiles
//! them. It keeps no plans: cuFFT plans and the Toeplitz product's passes
//! belong to the operators that run them ([`Backend::Fft`],
//! [`Backend::ToeplitzPlan`]).
//!
//! [`Backend::Fft`]: recon_core::Backend::Fft
//! [`Backend::ToeplitzPlan`]: recon_core::Backend::ToeplitzPlan

use crate::error::Ctx;
use cudarc::cufft::{result as fft_result, sys as fft_sys, CudaFft};
use cudarc::driver::{
    CudaContext, CudaSlice, CudaStream, DevicePtrMut, DeviceRepr, LaunchConfig, ValidAsZeroBits,
};
use recon_core::{Complex, Direction, Error, Result};
use std::sync::{Arc, Mutex, OnceLock};

/// Blocks of the first reduction pass; `REDUCE_THREADS` threads each.
pub(crate) const REDUCE_BLOCKS: usize = 1024;
pub(crate) const REDUCE_THREADS: u32 = 256;

pub(crate) fn as_floats(x: &[Complex<f32>]) -> &[f32] {
    // SAFETY: Complex<f32> is #[repr(C)] { re, im }.
    unsafe { std::slice::from_raw_parts(x.as_ptr() as *const f32, 2 * x.len()) }
}

pub(crate) fn as_floats_mut(x: &mut [Complex<f32>]) -> &mut [f32] {
    // SAFETY: as above.
    unsafe { std::slice::from_raw_parts_mut(x.as_mut_ptr() as *mut f32, 2 * x.len()) }
}

pub(crate) struct Device {
    pub(crate) ordinal: usize,
    pub(crate) name: String,
    pub(crate) sms: u32,
    pub(crate) clock_khz: u32,
    pub(crate) ctx: Arc<CudaContext>,
    pub(crate) stream: Arc<CudaStream>,
    pub(crate) copy_stream: Arc<CudaStream>,
    /// The device's modules, each compiled or read and loaded when first
    /// needed, with the functions looked up in them (modules.rs: the line
    /// lengths' and the NUFFT steps' kernels) ...
    pub(crate) modules: crate::modules::Modules,
    /// ... and the typed kernels of the other `.cu` files, looked up once:
    /// sum.cu (engine.rs launches them), nufft.cu's fixed kernels
    /// (nufft.rs), vector.cu, sparse.cu and wavelet.cu (their launchers'
    /// files).
    sum: OnceLock<crate::engine::SumKernels>,
    nufft: OnceLock<crate::nufft::Kernels>,
    vector: OnceLock<crate::vector::Kernels>,
    sparse: OnceLock<crate::sparse::Kernels>,
    wavelet: OnceLock<crate::wavelet::Kernels>,
    pub(crate) partial: Mutex<CudaSlice<f64>>,
    /// Whether it reads another GPU's memory directly (enable_peer_access).
    pub(crate) peers: bool,
    /// Its default memory pool, kept (crate::pool); `None` where the device
    /// has no pools.
    pub(crate) pool: Option<crate::pool::Pool>,
    /// Whether it chains kernels by programmatic dependent launch (asked
    /// for, and sm_90 on; launch.rs).
    pub(crate) pdl: bool,
    /// Kernels launched through `Chained` (launch.rs) so far.
    pub(crate) chained_count: std::sync::atomic::AtomicU64,
}

impl Device {
    /// Opens GPU `ordinal`; its kernels come through `cache` when given,
    /// and are chained (launch.rs) with `chained` where it has PDL.
    pub fn open(
        ordinal: usize,
        cache: Option<Arc<dyn crate::KernelCache>>,
        chained: bool,
    ) -> Result<Self> {
        let ctx = CudaContext::new(ordinal).at(&format!("open device {ordinal}"))?;
        // cudarc would record an event per buffer argument of every launch
        // and make each launch wait on them (it cannot know which stream
        // last wrote a buffer): several driver calls per launch, which made
        // the host, not the GPU, the limit of SENSE's many short kernels.
        // Our work is ordered by hand instead: everything on `stream`, the
        // summation engine's `copy_stream` synchronised by its own events,
        // and copies between GPUs by `transfer`'s waits.
        // SAFETY: called before this context allocates anything; the rules
        // (no use on another stream before the allocation, no free before
        // another stream's use, no concurrent writes) are kept as above.
        unsafe { ctx.disable_event_tracking() };
        let pool = crate::pool::Pool::keep(&ctx)?;
        let name = ctx.name().at("device name")?;
        let (major, minor) = ctx.compute_capability().at("compute capability")?;
        use cudarc::driver::sys::CUdevice_attribute as A;
        let sms = ctx
            .attribute(A::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
            .at("SM count")? as u32;
        let clock_khz = ctx
            .attribute(A::CU_DEVICE_ATTRIBUTE_CLOCK_RATE)
            .at("clock rate")? as u32;
        let stream = ctx.new_stream().at("create stream")?;
        let copy_stream = ctx.new_stream().at("create copy stream")?;
        let modules =
            crate::modules::Modules::new(ctx.clone(), crate::kernels::Arch(major, minor), cache);
        let partial = stream
            .alloc_zeros::<f64>(REDUCE_BLOCKS)
            .at("allocate reduction buffer")?;
        Ok(Device {
            ordinal,
            name,
            sms,
            clock_khz,
            ctx,
            stream,
            copy_stream,
            modules,
            sum: OnceLock::new(),
            nufft: OnceLock::new(),
            vector: OnceLock::new(),
            sparse: OnceLock::new(),
            wavelet: OnceLock::new(),
            partial: Mutex::new(partial),
            peers: false,
            pool,
            pdl: chained && major >= 9,
            chained_count: Default::default(),
        })
    }

    /// sum.cu's kernels (the summation engine), loaded on first use.
    pub(crate) fn sum(&self) -> Result<&crate::engine::SumKernels> {
        crate::modules::once(&self.sum, || crate::engine::SumKernels::load(&self.modules))
    }

    /// nufft.cu's fixed kernels, loaded on first use.
    pub(crate) fn nufft(&self) -> Result<&crate::nufft::Kernels> {
        crate::modules::once(&self.nufft, || crate::nufft::Kernels::load(&self.modules))
    }

    /// vector.cu's kernels, loaded on first use.
    pub(crate) fn vector(&self) -> Result<&crate::vector::Kernels> {
        crate::modules::once(&self.vector, || crate::vector::Kernels::load(&self.modules))
    }

    /// sparse.cu's kernels, loaded on first use.
    pub(crate) fn sparse(&self) -> Result<&crate::sparse::Kernels> {
        crate::modules::once(&self.sparse, || crate::sparse::Kernels::load(&self.modules))
    }

    /// wavelet.cu's kernels, loaded on first use.
    pub(crate) fn wavelet(&self) -> Result<&crate::wavelet::Kernels> {
        crate::modules::once(&self.wavelet, || {
            crate::wavelet::Kernels::load(&self.modules)
        })
    }

    pub fn describe(&self) -> String {
        let peers = if self.peers { ", peer access" } else { "" };
        format!(
            "GPU {} {} ({} SMs{peers})",
            self.ordinal, self.name, self.sms
        )
    }

    /// One sin and one cos per pair at 16 results per clock per SM.
    pub fn sfu_bound(&self) -> f64 {
        self.sms as f64 * 16.0 * self.clock_khz as f64 * 1e3 / 2.0
    }

    /// Bytes free for our buffers: the driver's free memory and what the
    /// memory pool holds unused (crate::pool).
    pub fn free_memory(&self) -> Result<u64> {
        Ok(self.driver_free()? + self.pool_unused()?)
    }

    /// Bytes the memory pool holds and no buffer uses (none without one).
    pub(crate) fn pool_unused(&self) -> Result<u64> {
        self.pool.map_or(Ok(0), |p| p.unused_bytes())
    }

    /// Gives the pool's unused memory back to the driver.
    pub(crate) fn trim_pool(&self) -> Result<()> {
        self.pool.map_or(Ok(()), |p| p.trim(&self.ctx))
    }

    fn driver_free(&self) -> Result<u64> {
        self.ctx.bind_to_thread().at("bind context")?;
        Ok(self.ctx.mem_get_info().at("query free memory")?.0 as u64)
    }

    /// Fails with [`Error::OutOfMemory`] when `bytes` more would not fit.
    /// Where they fit only with the memory the pool holds unused, that
    /// memory goes back to the driver first: cuFFT allocates outside the
    /// pool, and a pool's unused memory may lie in pieces too small.
    pub(crate) fn ensure_fits(&self, bytes: usize, what: &str) -> Result<()> {
        let mut free = self.driver_free()?;
        if bytes as u64 > free && self.pool_unused()? > 0 {
            self.trim_pool()?;
            free = self.driver_free()?;
        }
        if bytes as u64 > free {
            return Err(Error::OutOfMemory {
                device: self.describe(),
                what: what.to_string(),
                need: Some(bytes as u64),
                free: Some(free),
            });
        }
        Ok(())
    }

    /// A grid-stride launch for `n` elements.
    pub(crate) fn cfg(&self, n: usize) -> LaunchConfig {
        let blocks = n.div_ceil(256).clamp(1, self.sms as usize * 16);
        LaunchConfig {
            grid_dim: (blocks as u32, 1, 1),
            block_dim: (256, 1, 1),
            shared_mem_bytes: 0,
        }
    }

    /// A block per row of `width` points, `rows` of them (pad, crop, W^H W).
    pub(crate) fn rows_cfg(&self, rows: usize, width: usize) -> LaunchConfig {
        LaunchConfig {
            grid_dim: (rows as u32, 1, 1),
            block_dim: (width.next_power_of_two().clamp(32, 256) as u32, 1, 1),
            shared_mem_bytes: 0,
        }
    }

    // --- vectors --------------------------------------------------------

    pub fn zeros<T: DeviceRepr + ValidAsZeroBits>(&self, len: usize) -> Result<CudaSlice<T>> {
        self.ensure_fits(len * std::mem::size_of::<T>(), "a vector")?;
        self.stream.alloc_zeros::<T>(len).at("allocate")
    }

    pub fn upload<T: DeviceRepr + ValidAsZeroBits>(&self, host: &[T]) -> Result<CudaSlice<T>> {
        self.ensure_fits(std::mem::size_of_val(host), "an upload")?;
        self.stream.clone_htod(host).at("copy host to device")
    }

    pub fn download<T: DeviceRepr>(&self, out: &mut [T], x: &CudaSlice<T>) -> Result<()> {
        self.stream.memcpy_dtoh(x, out).at("copy device to host")?;
        self.stream.synchronize().at("synchronize after download")
    }

    pub fn copy(&self, out: &mut CudaSlice<f32>, x: &CudaSlice<f32>) -> Result<()> {
        self.stream.memcpy_dtod(x, out).at("copy device to device")
    }

    /// In-place 3-D FFT of `x` (of shape `shape`) by `plan`, made for that
    /// shape by [`Device::fft_plan`]; the inverse normalised.
    pub fn fft3(
        &self,
        plan: &CudaFft,
        x: &mut CudaSlice<f32>,
        shape: [usize; 3],
        dir: Direction,
    ) -> Result<()> {
        let exponent = match dir {
            Direction::Forward => -1,
            Direction::Inverse => 1,
        };
        self.fft_exec(plan, x, exponent)?;
        if dir == Direction::Inverse {
            // cuFFT's inverse is unnormalised; the trait's is normalised.
            self.scale(x, 1.0 / shape.iter().product::<usize>() as f32)?;
        }
        Ok(())
    }

    /// A cuFFT plan for `shape` on this device's stream, after checking
    /// that its work area (as large as the data) fits.
    pub fn fft_plan(&self, shape: [usize; 3]) -> Result<CudaFft> {
        // cuFFT is row-major (last dimension fastest): our x-fastest
        // [nx, ny, nz] is its (nz, ny, nx).
        let bytes = 8 * shape.iter().product::<usize>();
        self.ensure_fits(bytes, &format!("a cuFFT plan for {shape:?}"))?;
        let [nx, ny, nz] = shape.map(|v| v as i32);
        let plan = if nz == 1 {
            // A flat z (a 2-D grid): the 2-D transform of its one plane.
            CudaFft::plan_2d(ny, nx, fft_sys::cufftType::CUFFT_C2C, self.stream.clone())
        } else {
            CudaFft::plan_3d(
                nz,
                ny,
                nx,
                fft_sys::cufftType::CUFFT_C2C,
                self.stream.clone(),
            )
        };
        plan.at(&format!("cuFFT plan for {shape:?}"))
    }

    /// Runs `plan` in place on `x` (of the plan's size), unnormalised:
    /// `X[k] = sum_j x[j] exp(exponent i 2pi k.j / n)`, `exponent` = -1
    /// (cuFFT's forward) or +1 (its inverse).
    pub fn fft_exec(&self, plan: &CudaFft, x: &mut CudaSlice<f32>, exponent: i32) -> Result<()> {
        let direction = if exponent < 0 {
            cudarc::cufft::FftDirection::Forward
        } else {
            cudarc::cufft::FftDirection::Inverse
        };
        // cuFFT runs on the device current to the thread, which with
        // several GPUs may be another's.
        self.ctx.bind_to_thread().at("bind context")?;
        let (ptr, _sync) = x.device_ptr_mut(&self.stream);
        let p = ptr as *mut fft_sys::cufftComplex;
        // SAFETY: in place on a buffer of the plan's size, on the plan's stream.
        unsafe { fft_result::exec_c2c(plan.handle(), p, p, direction as i32) }.at("cuFFT exec")
    }
}
