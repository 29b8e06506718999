//! One GPU: its context, streams, compiled modules, FFT plans, and the
//! vector, FFT and stencil primitives of the backend. The summation engine
//! is in engine.rs, the kernel sources and names in kernels.rs.

use crate::error::Ctx;
use crate::kernels::{ptx, sum_kernels, LINES_CU, NUFFT_CU, SUM_CU, VECTOR_CU, VECTOR_FUNCS};
use cudarc::cufft::{result as fft_result, sys as fft_sys, CudaFft};
use cudarc::driver::{
    CudaContext, CudaFunction, CudaModule, CudaSlice, CudaStream, DevicePtrMut, DeviceRepr,
    LaunchConfig, PushKernelArg, ValidAsZeroBits,
};
use recon_core::{Complex, Direction, Error, Ratio, Result};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Blocks of the first reduction pass; `REDUCE_THREADS` threads each.
const REDUCE_BLOCKS: usize = 1024;
const REDUCE_THREADS: u32 = 256;

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
    pub(crate) sum: Arc<CudaModule>,
    pub(crate) funcs: HashMap<String, CudaFunction>,
    /// sparse.cu's kernels, with typed launchers (sparse.rs).
    pub(crate) sparse: crate::sparse::Kernels,
    pub(crate) ffts: Mutex<HashMap<[usize; 3], CudaFft>>,
    /// The pruned Toeplitz product's plans, per image shape (toeplitz.rs).
    pub(crate) toeplitz: Mutex<HashMap<[usize; 3], crate::toeplitz::Passes>>,
    pub(crate) partial: Mutex<CudaSlice<f64>>,
    /// Whether it reads another GPU's memory directly (enable_peer_access).
    pub(crate) peers: bool,
}

impl Device {
    pub fn open(ordinal: usize) -> Result<Self> {
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
        let arch = format!("compute_{major}{minor}");
        let sum = ctx
            .load_module(ptx("sum.cu", SUM_CU, arch.clone())?)
            .at("load sum.cu")?;
        let vec = ctx
            .load_module(ptx("vector.cu", VECTOR_CU, arch.clone())?)
            .at("load vector.cu")?;
        let nufft = ctx
            .load_module(ptx("nufft.cu", NUFFT_CU, arch.clone())?)
            .at("load nufft.cu")?;
        let lines = ctx
            .load_module(ptx("lines.cu", LINES_CU, arch.clone())?)
            .at("load lines.cu")?;
        let sparse = crate::sparse::Kernels::load(&ctx, &arch)?;
        let mut funcs = HashMap::new();
        for f in sum_kernels() {
            let func = sum.load_function(&f).at(&format!("load kernel {f}"))?;
            funcs.insert(f, func);
        }
        for f in VECTOR_FUNCS {
            funcs.insert(
                f.to_string(),
                vec.load_function(f).at(&format!("load kernel {f}"))?,
            );
        }
        for f in crate::nufft::kernel_names() {
            let func = nufft.load_function(&f).at(&format!("load kernel {f}"))?;
            funcs.insert(f, func);
        }
        for f in crate::lines::kernel_names() {
            let func = lines.load_function(&f).at(&format!("load kernel {f}"))?;
            funcs.insert(f, func);
        }
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
            sum,
            funcs,
            sparse,
            ffts: Mutex::new(HashMap::new()),
            toeplitz: Mutex::new(HashMap::new()),
            partial: Mutex::new(partial),
            peers: false,
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

    pub fn free_memory(&self) -> Result<u64> {
        self.ctx.bind_to_thread().at("bind context")?;
        Ok(self.ctx.mem_get_info().at("query free memory")?.0 as u64)
    }

    /// Fails with a clear message when `bytes` more would not fit.
    /// Fails with [`Error::OutOfMemory`] when `bytes` more would not fit.
    pub(crate) fn ensure_fits(&self, bytes: usize, what: &str) -> Result<()> {
        let free = self.free_memory()?;
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

    pub(crate) fn f(&self, name: &str) -> &CudaFunction {
        &self.funcs[name]
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

    /// `y = y + a c x`, with c = `ratio.of(s)`, or 1 without scalars.
    pub fn axpy(
        &self,
        y: &mut CudaSlice<f32>,
        a: f64,
        ratio: Option<(Ratio, &CudaSlice<f64>)>,
        x: &CudaSlice<f32>,
    ) -> Result<()> {
        let n = (y.len() / 2) as i64;
        let null = 0u64;
        let mut b = self.stream.launch_builder(self.f("axpy"));
        b.arg(y).arg(&a);
        let slots = ratio.map(|(r, _)| r).unwrap_or(Ratio {
            num: 0,
            den: 0,
            floor: 0,
        });
        let [num, den, floor] = [slots.num, slots.den, slots.floor].map(|v| v as i32);
        match ratio {
            Some((_, s)) => b.arg(s),
            None => b.arg(&null),
        };
        b.arg(&num).arg(&den).arg(&floor).arg(x).arg(&n);
        unsafe { b.launch(self.cfg(n as usize)) }
            .at("launch axpy")
            .map(|_| ())
    }

    /// `y = x + c y`, with c = `ratio.of(s)`.
    pub fn xpby(
        &self,
        y: &mut CudaSlice<f32>,
        x: &CudaSlice<f32>,
        ratio: Ratio,
        s: &CudaSlice<f64>,
    ) -> Result<()> {
        let n = (y.len() / 2) as i64;
        let [num, den, floor] = [ratio.num, ratio.den, ratio.floor].map(|v| v as i32);
        let mut b = self.stream.launch_builder(self.f("xpby"));
        b.arg(y)
            .arg(x)
            .arg(s)
            .arg(&num)
            .arg(&den)
            .arg(&floor)
            .arg(&n);
        unsafe { b.launch(self.cfg(n as usize)) }
            .at("launch xpby")
            .map(|_| ())
    }

    pub fn mul_scaled(&self, x: &mut CudaSlice<f32>, y: &CudaSlice<f32>, scale: f32) -> Result<()> {
        let n = (x.len() / 2) as i64;
        let mut b = self.stream.launch_builder(self.f("mul_scaled"));
        b.arg(x).arg(y).arg(&scale).arg(&n);
        unsafe { b.launch(self.cfg(n as usize)) }
            .at("launch mul")
            .map(|_| ())
    }

    /// A coil's map applied to x (`CoilOp` as 0, 1, 2).
    pub fn coil(
        &self,
        out: &mut CudaSlice<f32>,
        op: i32,
        s: &CudaSlice<f32>,
        x: &CudaSlice<f32>,
    ) -> Result<()> {
        let n = (out.len() / 2) as i64;
        let mut b = self.stream.launch_builder(self.f("coil"));
        b.arg(out).arg(&op).arg(s).arg(x).arg(&n);
        unsafe { b.launch(self.cfg(n as usize)) }
            .at("launch coil")
            .map(|_| ())
    }

    /// The 2n grid `out` = x zero-padded.
    pub fn pad(&self, out: &mut CudaSlice<f32>, x: &CudaSlice<f32>, n: [usize; 3]) -> Result<()> {
        let [nx, ny, nz] = n.map(|v| v as i32);
        let mut b = self.stream.launch_builder(self.f("pad"));
        b.arg(out).arg(x).arg(&nx).arg(&ny).arg(&nz);
        unsafe { b.launch(self.rows_cfg(4 * n[1] * n[2], 2 * n[0])) }
            .at("launch pad")
            .map(|_| ())
    }

    pub fn crop(&self, out: &mut CudaSlice<f32>, x: &CudaSlice<f32>, n: [usize; 3]) -> Result<()> {
        let [nx, ny, nz] = n.map(|v| v as i32);
        let mut b = self.stream.launch_builder(self.f("crop"));
        b.arg(out).arg(x).arg(&nx).arg(&ny).arg(&nz);
        unsafe { b.launch(self.rows_cfg(n[1] * n[2], n[0])) }
            .at("launch crop")
            .map(|_| ())
    }

    /// `Re <x, y>`, read back to the host.
    pub fn dot_re(&self, x: &CudaSlice<f32>, y: &CudaSlice<f32>) -> Result<f64> {
        let mut out = self.zeros::<f64>(1)?;
        self.dot_re_to(&mut out, 0, x, y)?;
        let mut host = [0.0f64];
        self.stream
            .memcpy_dtoh(&out, &mut host)
            .at("copy dot product to host")?;
        self.stream.synchronize().at("synchronize after dot")?;
        Ok(host[0])
    }

    /// `s[slot] = Re <x, y>`, by two fixed passes (a partial sum per block,
    /// then their sum by one block), left on the device.
    pub fn dot_re_to(
        &self,
        s: &mut CudaSlice<f64>,
        slot: usize,
        x: &CudaSlice<f32>,
        y: &CudaSlice<f32>,
    ) -> Result<()> {
        let n = (x.len() / 2) as i64;
        let mut partial = self.partial.lock().expect("reduction buffer poisoned");
        let cfg = LaunchConfig {
            grid_dim: (REDUCE_BLOCKS as u32, 1, 1),
            block_dim: (REDUCE_THREADS, 1, 1),
            shared_mem_bytes: 0,
        };
        let mut b = self.stream.launch_builder(self.f("dot_partial"));
        b.arg(&mut *partial).arg(x).arg(y).arg(&n);
        unsafe { b.launch(cfg) }.at("launch dot_partial")?;
        let mut out = s.slice_mut(slot..slot + 1);
        let count = REDUCE_BLOCKS as i32;
        let mut b = self.stream.launch_builder(self.f("sum_partials"));
        b.arg(&mut out).arg(&*partial).arg(&count);
        let one = LaunchConfig {
            grid_dim: (1, 1, 1),
            ..cfg
        };
        unsafe { b.launch(one) }
            .at("launch sum_partials")
            .map(|_| ())
    }

    pub fn fft3(&self, x: &mut CudaSlice<f32>, shape: [usize; 3], dir: Direction) -> Result<()> {
        let exponent = match dir {
            Direction::Forward => -1,
            Direction::Inverse => 1,
        };
        self.fft3_unnormalised(x, shape, exponent)?;
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
        CudaFft::plan_3d(
            nz,
            ny,
            nx,
            fft_sys::cufftType::CUFFT_C2C,
            self.stream.clone(),
        )
        .at(&format!("cuFFT plan for {shape:?}"))
    }

    /// In-place 3-D FFT `X[k] = sum_j x[j] exp(exponent i 2pi k.j / n)`,
    /// unnormalised, `exponent` = -1 (cuFFT's forward) or +1 (its inverse),
    /// by a plan of the process-wide cache (made once per shape).
    pub fn fft3_unnormalised(
        &self,
        x: &mut CudaSlice<f32>,
        shape: [usize; 3],
        exponent: i32,
    ) -> Result<()> {
        Error::check_len("fft3", 2 * shape.iter().product::<usize>(), x.len())?;
        use std::collections::hash_map::Entry;
        let mut ffts = self.ffts.lock().expect("FFT plans poisoned");
        let plan = match ffts.entry(shape) {
            Entry::Occupied(e) => e.into_mut(),
            Entry::Vacant(e) => e.insert(self.fft_plan(shape)?),
        };
        self.fft_exec(plan, x, exponent)
    }

    /// Runs `plan` in place on `x` (of the plan's size).
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

    /// x = s x
    pub(crate) fn scale(&self, x: &mut CudaSlice<f32>, s: f32) -> Result<()> {
        let n = (x.len() / 2) as i64;
        let mut b = self.stream.launch_builder(self.f("scale"));
        b.arg(x).arg(&s).arg(&n);
        unsafe { b.launch(self.cfg(n as usize)) }
            .at("launch scale")
            .map(|_| ())
    }

    pub fn add_whw(
        &self,
        out: &mut CudaSlice<f32>,
        a: f32,
        x: &CudaSlice<f32>,
        w2: Option<&[CudaSlice<f32>; 3]>,
        d2: Option<&CudaSlice<f32>>,
        n: [usize; 3],
    ) -> Result<()> {
        let [nx, ny, nz] = n.map(|v| v as i32);
        let null = 0u64;
        let mut b = self.stream.launch_builder(self.f("add_whw"));
        b.arg(out).arg(&a).arg(x);
        match w2 {
            Some([wx, wy, wz]) => b.arg(wx).arg(wy).arg(wz),
            None => b.arg(&null).arg(&null).arg(&null),
        };
        match d2 {
            Some(d) => b.arg(d),
            None => b.arg(&null),
        };
        b.arg(&nx).arg(&ny).arg(&nz);
        unsafe { b.launch(self.rows_cfg(n[1] * n[2], n[0])) }
            .at("launch add_whw")
            .map(|_| ())
    }
}
