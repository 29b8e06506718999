//! One GPU: its context, streams, compiled modules, FFT plans and kernels.

use crate::{Tuning, Variant};
use cudarc::cufft::{result as fft_result, sys as fft_sys, CudaFft};
use cudarc::driver::{
    CudaContext, CudaFunction, CudaModule, CudaSlice, CudaStream, DevicePtrMut, DeviceRepr,
    LaunchConfig, PushKernelArg, ValidAsZeroBits,
};
use cudarc::nvrtc::{compile_ptx_with_opts, CompileOptions, Ptx};
use recon_core::{Complex, Direction, Error, Result};
use std::collections::HashMap;
use std::fmt::Debug;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

const SUM_CU: &str = include_str!("../kernels/sum.cu");
const VECTOR_CU: &str = include_str!("../kernels/vector.cu");

/// Samples per constant-memory chunk; `CHUNK` in sum.cu.
const CHUNK: usize = 3200;
/// Samples per streamed chunk (variant 6).
const STREAM_CHUNK: usize = 1 << 16;
/// Blocks of the first reduction pass; `REDUCE_THREADS` threads each.
const REDUCE_BLOCKS: usize = 1024;
const REDUCE_THREADS: u32 = 256;

/// A CUDA failure, naming the operation.
pub(crate) fn err(op: impl std::fmt::Display, e: impl Debug) -> Error {
    Error::Device {
        backend: "CUDA",
        op: op.to_string(),
        reason: format!("{e:?}"),
    }
}

trait Ctx<T> {
    fn at(self, op: &str) -> Result<T>;
}

impl<T, E: Debug> Ctx<T> for std::result::Result<T, E> {
    fn at(self, op: &str) -> Result<T> {
        self.map_err(|e| err(op, e))
    }
}

/// A lattice of targets; `Lattice` in sum.cu.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct Lattice {
    pub n: [i32; 3],
    pub pad: i32,
    pub origin: [f32; 3],
    pub step: [f32; 3],
}

impl From<&recon_core::Lattice> for Lattice {
    fn from(l: &recon_core::Lattice) -> Self {
        Lattice {
            n: l.n.map(|v| v as i32),
            pad: 0,
            origin: l.origin.map(|v| v as f32),
            step: l.step.map(|v| v as f32),
        }
    }
}

/// A k-space sample and its coefficient; `Sample` in sum.cu.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct Sample {
    pub kx: f32,
    pub ky: f32,
    pub kz: f32,
    pub cr: f32,
    pub ci: f32,
}

// SAFETY: plain #[repr(C)] structs of i32/f32, laid out as in sum.cu.
unsafe impl DeviceRepr for Lattice {}
unsafe impl DeviceRepr for Sample {}
unsafe impl ValidAsZeroBits for Sample {}

pub(crate) enum TargetSpec {
    Lattice(Lattice),
    /// x, y, z per target.
    List(Vec<f32>),
}

/// One summation: shared by the GPUs, each taking a share of the targets.
pub(crate) struct Job<'a> {
    pub targets: TargetSpec,
    pub samples: &'a [Sample],
    pub sign: f32,
    pub variant: Variant,
    pub tuning: Tuning,
}

pub(crate) fn as_floats(x: &[Complex<f32>]) -> &[f32] {
    // SAFETY: Complex<f32> is #[repr(C)] { re, im }.
    unsafe { std::slice::from_raw_parts(x.as_ptr() as *const f32, 2 * x.len()) }
}

pub(crate) fn as_floats_mut(x: &mut [Complex<f32>]) -> &mut [f32] {
    // SAFETY: as above.
    unsafe { std::slice::from_raw_parts_mut(x.as_mut_ptr() as *mut f32, 2 * x.len()) }
}

/// PTX per (source, architecture), compiled once per process.
fn ptx(name: &'static str, src: &'static str, arch: String) -> Result<Ptx> {
    static CACHE: OnceLock<Mutex<HashMap<(&'static str, String), Ptx>>> = OnceLock::new();
    let cache = CACHE.get_or_init(|| Mutex::new(HashMap::new()));
    let mut cache = cache.lock().expect("PTX cache poisoned");
    if let Some(p) = cache.get(&(name, arch.clone())) {
        return Ok(p.clone());
    }
    let opts = CompileOptions {
        options: vec![format!("--gpu-architecture={arch}"), "--std=c++17".into()],
        name: Some(name.to_string()),
        ..Default::default()
    };
    let p = compile_ptx_with_opts(src, opts).map_err(|e| match e {
        cudarc::nvrtc::CompileError::CompileError { log, .. } => err(
            format!("NVRTC compile of {name}"),
            log.to_string_lossy().into_owned(),
        ),
        e => err(format!("NVRTC compile of {name}"), e),
    })?;
    cache.insert((name, arch), p.clone());
    Ok(p)
}

pub(crate) struct Device {
    ordinal: usize,
    name: String,
    sms: u32,
    clock_khz: u32,
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    copy_stream: Arc<CudaStream>,
    sum: Arc<CudaModule>,
    funcs: HashMap<String, CudaFunction>,
    ffts: Mutex<HashMap<[usize; 3], CudaFft>>,
    partial: Mutex<CudaSlice<f64>>,
}

/// Outputs-per-thread counts the tuned kernels are compiled for.
pub const PER_THREAD: [u32; 4] = [1, 2, 4, 8];

/// The kernel of sum.cu that runs `variant`; `rows`: the lattice row
/// kernel of variants 5 and 6 (else their generic one).
fn sum_kernel(variant: Variant, rows: bool, per_thread: u32) -> String {
    let g = if rows { "" } else { "g" };
    match variant {
        Variant::Naive => "sum_v1".into(),
        Variant::Registers => "sum_v2".into(),
        Variant::Constant => "sum_v3".into(),
        Variant::FastTrig => "sum_v4".into(),
        // The same kernels; variant 6 streams the samples to them.
        Variant::Tuned | Variant::Streamed => format!("sum_v5{g}_{per_thread}"),
    }
}

/// Every kernel of sum.cu the backend may launch.
fn sum_kernels() -> Vec<String> {
    let mut names: Vec<String> = Variant::ALL
        .iter()
        .flat_map(|&v| {
            [true, false]
                .into_iter()
                .flat_map(move |rows| PER_THREAD.map(|p| sum_kernel(v, rows, p)))
        })
        .collect();
    names.sort();
    names.dedup();
    names
}

const VECTOR_FUNCS: [&str; 9] = [
    "axpy",
    "xpby",
    "mul_scaled",
    "scale",
    "pad",
    "crop",
    "dot_partial",
    "sum_partials",
    "add_whw",
];

impl Device {
    pub fn open(ordinal: usize) -> Result<Self> {
        let ctx = CudaContext::new(ordinal).at(&format!("open device {ordinal}"))?;
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
            .load_module(ptx("vector.cu", VECTOR_CU, arch)?)
            .at("load vector.cu")?;
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
        let partial = stream
            .alloc_zeros::<f64>(REDUCE_BLOCKS + 1)
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
            ffts: Mutex::new(HashMap::new()),
            partial: Mutex::new(partial),
        })
    }

    pub fn describe(&self) -> String {
        format!("GPU {} {} ({} SMs)", self.ordinal, self.name, self.sms)
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
    fn ensure_fits(&self, bytes: usize, what: &str) -> Result<()> {
        let free = self.free_memory()?;
        if bytes as u64 > free {
            return Err(Error::Invalid {
                what: "GPU memory",
                reason: format!(
                    "{what} needs {:.2} GiB but {} has {:.2} GiB free",
                    bytes as f64 / (1u64 << 30) as f64,
                    self.describe(),
                    free as f64 / (1u64 << 30) as f64
                ),
            });
        }
        Ok(())
    }

    fn f(&self, name: &str) -> &CudaFunction {
        &self.funcs[name]
    }

    /// A grid-stride launch for `n` elements.
    fn cfg(&self, n: usize) -> LaunchConfig {
        let blocks = n.div_ceil(256).clamp(1, self.sms as usize * 16);
        LaunchConfig {
            grid_dim: (blocks as u32, 1, 1),
            block_dim: (256, 1, 1),
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

    pub fn download(&self, out: &mut [f32], x: &CudaSlice<f32>) -> Result<()> {
        self.stream.memcpy_dtoh(x, out).at("copy device to host")?;
        self.stream.synchronize().at("synchronize after download")
    }

    pub fn copy(&self, out: &mut CudaSlice<f32>, x: &CudaSlice<f32>) -> Result<()> {
        self.stream.memcpy_dtod(x, out).at("copy device to device")
    }

    pub fn axpy(&self, y: &mut CudaSlice<f32>, a: f32, x: &CudaSlice<f32>) -> Result<()> {
        let n = (y.len() / 2) as i64;
        let mut b = self.stream.launch_builder(self.f("axpy"));
        b.arg(y).arg(&a).arg(x).arg(&n);
        unsafe { b.launch(self.cfg(n as usize)) }
            .at("launch axpy")
            .map(|_| ())
    }

    pub fn xpby(&self, y: &mut CudaSlice<f32>, x: &CudaSlice<f32>, s: f32) -> Result<()> {
        let n = (y.len() / 2) as i64;
        let mut b = self.stream.launch_builder(self.f("xpby"));
        b.arg(y).arg(x).arg(&s).arg(&n);
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

    pub fn pad(&self, out: &mut CudaSlice<f32>, x: &CudaSlice<f32>, n: [usize; 3]) -> Result<()> {
        let [nx, ny, nz] = n.map(|v| v as i32);
        let mut b = self.stream.launch_builder(self.f("pad"));
        b.arg(out).arg(x).arg(&nx).arg(&ny).arg(&nz);
        unsafe { b.launch(self.cfg(8 * n.iter().product::<usize>())) }
            .at("launch pad")
            .map(|_| ())
    }

    pub fn crop(&self, out: &mut CudaSlice<f32>, x: &CudaSlice<f32>, n: [usize; 3]) -> Result<()> {
        let [nx, ny, nz] = n.map(|v| v as i32);
        let mut b = self.stream.launch_builder(self.f("crop"));
        b.arg(out).arg(x).arg(&nx).arg(&ny).arg(&nz);
        unsafe { b.launch(self.cfg(n.iter().product())) }
            .at("launch crop")
            .map(|_| ())
    }

    pub fn dot_re(&self, x: &CudaSlice<f32>, y: &CudaSlice<f32>) -> Result<f64> {
        let n = (x.len() / 2) as i64;
        let mut partial = self.partial.lock().expect("reduction buffer poisoned");
        let cfg = LaunchConfig {
            grid_dim: (REDUCE_BLOCKS as u32, 1, 1),
            block_dim: (REDUCE_THREADS, 1, 1),
            shared_mem_bytes: 0,
        };
        {
            let mut head = partial.slice_mut(0..REDUCE_BLOCKS);
            let mut b = self.stream.launch_builder(self.f("dot_partial"));
            b.arg(&mut head).arg(x).arg(y).arg(&n);
            unsafe { b.launch(cfg) }.at("launch dot_partial")?;
        }
        {
            let (head, mut tail) = partial.split_at_mut(REDUCE_BLOCKS);
            let head = head.slice(0..REDUCE_BLOCKS);
            let count = REDUCE_BLOCKS as i32;
            let mut b = self.stream.launch_builder(self.f("sum_partials"));
            b.arg(&mut tail).arg(&head).arg(&count);
            let one = LaunchConfig {
                grid_dim: (1, 1, 1),
                ..cfg
            };
            unsafe { b.launch(one) }.at("launch sum_partials")?;
        }
        let mut out = [0.0f64];
        self.stream
            .memcpy_dtoh(&partial.slice(REDUCE_BLOCKS..REDUCE_BLOCKS + 1), &mut out)
            .at("copy dot product to host")?;
        self.stream.synchronize().at("synchronize after dot")?;
        Ok(out[0])
    }

    pub fn fft3(&self, x: &mut CudaSlice<f32>, shape: [usize; 3], dir: Direction) -> Result<()> {
        let mut ffts = self.ffts.lock().expect("FFT plans poisoned");
        if !ffts.contains_key(&shape) {
            // cuFFT is row-major (last dimension fastest): our x-fastest
            // [nx, ny, nz] is its (nz, ny, nx). Its work area counts too.
            let bytes = 2 * x.len() * std::mem::size_of::<f32>();
            self.ensure_fits(bytes, &format!("a cuFFT plan for {shape:?}"))?;
            let [nx, ny, nz] = shape.map(|v| v as i32);
            let plan = CudaFft::plan_3d(
                nz,
                ny,
                nx,
                fft_sys::cufftType::CUFFT_C2C,
                self.stream.clone(),
            )
            .at(&format!("cuFFT plan for {shape:?}"))?;
            ffts.insert(shape, plan);
        }
        let plan = &ffts[&shape];
        let direction = match dir {
            Direction::Forward => cudarc::cufft::FftDirection::Forward,
            Direction::Inverse => cudarc::cufft::FftDirection::Inverse,
        };
        {
            let (ptr, _sync) = x.device_ptr_mut(&self.stream);
            let p = ptr as *mut fft_sys::cufftComplex;
            // SAFETY: in place on a buffer of the plan's size, on the plan's stream.
            unsafe { fft_result::exec_c2c(plan.handle(), p, p, direction as i32) }
                .at("cuFFT exec")?;
        }
        drop(ffts);
        if dir == Direction::Inverse {
            // cuFFT's inverse is unnormalised; the trait's is normalised.
            self.scale(x, 1.0 / shape.iter().product::<usize>() as f32)?;
        }
        Ok(())
    }

    /// x = s x
    fn scale(&self, x: &mut CudaSlice<f32>, s: f32) -> Result<()> {
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
        unsafe { b.launch(self.cfg(n.iter().product())) }
            .at("launch add_whw")
            .map(|_| ())
    }
}

/// Targets per launch: large enough to fill any current GPU, small enough
/// that one launch stays well under a second and progress moves.
const RANGE: usize = 1 << 22;

impl Device {
    /// This GPU's share of a summation: targets `first .. first + out.len()`.
    /// `done` counts finished targets across GPUs; `progress` gets this
    /// GPU's running total.
    pub fn sum_exp(
        &self,
        out: &mut [Complex<f32>],
        first: usize,
        job: &Job<'_>,
        done: &AtomicU64,
        progress: &mut dyn FnMut(u64),
    ) -> Result<()> {
        let count = out.len();
        if count == 0 {
            return Ok(());
        }
        let m = job.samples.len();
        let streamed = job.variant == Variant::Streamed;
        let list_bytes = match &job.targets {
            TargetSpec::List(v) => 4 * v.len(),
            TargetSpec::Lattice(_) => 0,
        };
        let sample_bytes = 20 * if streamed { 2 * STREAM_CHUNK.min(m) } else { m };
        self.ensure_fits(
            8 * count + list_bytes + sample_bytes,
            "the summation engine",
        )?;

        let mut out_dev = self
            .stream
            .alloc_zeros::<f32>(2 * count)
            .at("allocate output")?;
        let (lattice, list_dev) = match &job.targets {
            TargetSpec::Lattice(l) => (*l, None),
            TargetSpec::List(v) => (
                Lattice::default(),
                Some(self.stream.clone_htod(v).at("upload targets")?),
            ),
        };
        let samples_dev = if !streamed && m > 0 {
            // Variants 1, 2 and 5 read them in place; 3 and 4 copy chunks to constant memory.
            Some(self.stream.clone_htod(job.samples).at("upload samples")?)
        } else {
            None
        };
        let pinned = if streamed && m > 0 {
            // SAFETY: filled completely before use.
            let mut p =
                unsafe { self.ctx.alloc_pinned::<Sample>(m) }.at("allocate pinned samples")?;
            p.as_mut_slice()
                .at("map pinned samples")?
                .copy_from_slice(job.samples);
            Some(p)
        } else {
            None
        };
        let mut bufs = if streamed {
            let len = STREAM_CHUNK.min(m.max(1));
            vec![
                self.stream
                    .alloc_zeros::<Sample>(len)
                    .at("allocate stream buffer")?,
                self.stream
                    .alloc_zeros::<Sample>(len)
                    .at("allocate stream buffer")?,
            ]
        } else {
            Vec::new()
        };
        let mut buf_free: [Option<cudarc::driver::CudaEvent>; 2] = [None, None];

        let vpt = job.tuning.per_thread;
        if !PER_THREAD.contains(&vpt) {
            return Err(Error::Invalid {
                what: "CUDA tuning",
                reason: format!("outputs per thread must be 1, 2, 4 or 8, got {vpt}"),
            });
        }
        // Ranges of whole x-rows (whole planes when the lattice allows), so
        // that the row kernels of variants 5 and 6 apply to every range.
        let row = match &job.targets {
            TargetSpec::Lattice(l) => l.n[0].max(1) as usize,
            TargetSpec::List(_) => 1,
        };
        let range = (RANGE / row).max(1) * row;
        let rows_ok = |r0: usize, len: usize| {
            matches!(job.targets, TargetSpec::Lattice(_))
                && row % vpt as usize == 0
                && (first + r0) % row == 0
                && len % row == 0
        };
        let kernel_for = |r0: usize, len: usize| sum_kernel(job.variant, rows_ok(r0, len), vpt);
        let (block, per_block) = match job.variant {
            Variant::Tuned | Variant::Streamed => {
                (job.tuning.block, job.tuning.block as usize * vpt as usize)
            }
            _ => (256, 256),
        };
        let chunk = match job.variant {
            Variant::Naive | Variant::Registers | Variant::Tuned => m.max(1),
            Variant::Streamed => STREAM_CHUNK,
            Variant::Constant | Variant::FastTrig => CHUNK,
        };
        let null = 0u64;
        let sign = job.sign;
        let m_all = m as i32;
        let mut sym = self
            .sum
            .get_global("c_samples", &self.stream)
            .at("find c_samples")?;
        // SAFETY: c_samples is `Sample[CHUNK]` in sum.cu.
        let mut sym = unsafe { sym.transmute_mut::<Sample>(CHUNK) }.ok_or_else(|| {
            err(
                "view c_samples",
                "constant symbol smaller than CHUNK samples",
            )
        })?;

        let mut finished = 0u64;
        for r0 in (0..count).step_by(range) {
            let r1 = (r0 + range).min(count);
            let len = r1 - r0;
            let kernel = kernel_for(r0, len);
            let func = self
                .funcs
                .get(&kernel)
                .ok_or_else(|| err(format!("find kernel {kernel}"), "not loaded"))?;
            let cfg = LaunchConfig {
                grid_dim: (len.div_ceil(per_block) as u32, 1, 1),
                block_dim: (block, 1, 1),
                shared_mem_bytes: 0,
            };
            let abs_first = (first + r0) as i64;
            let n_launch = len as i32;
            let chunks = m.div_ceil(chunk).max(1);
            for c in 0..chunks {
                let c0 = c * chunk;
                let c1 = ((c + 1) * chunk).min(m);
                let mc = (c1 - c0) as i32;
                let mut view = out_dev.slice_mut(2 * r0..2 * r1);
                let mut b = self.stream.launch_builder(func);
                b.arg(&mut view).arg(&lattice);
                match &list_dev {
                    Some(l) => b.arg(l),
                    None => b.arg(&null),
                };
                b.arg(&abs_first).arg(&n_launch);
                let launched = match job.variant {
                    Variant::Naive | Variant::Registers | Variant::Tuned => {
                        let s = samples_dev.as_ref().map(|s| s.slice(0..m));
                        match &s {
                            Some(s) => b.arg(s),
                            None => b.arg(&null),
                        };
                        b.arg(&m_all).arg(&sign);
                        unsafe { b.launch(cfg) }
                    }
                    Variant::Constant | Variant::FastTrig => {
                        if mc > 0 {
                            let src = samples_dev
                                .as_ref()
                                .expect("samples uploaded")
                                .slice(c0..c1);
                            let mut dst = sym.slice_mut(0..c1 - c0);
                            self.stream
                                .memcpy_dtod(&src, &mut dst)
                                .at("copy samples to constant memory")?;
                        }
                        b.arg(&mc).arg(&sign);
                        unsafe { b.launch(cfg) }
                    }
                    Variant::Streamed => {
                        if mc > 0 {
                            let slot = c % 2;
                            // The copy may overwrite this buffer once the kernel that read it is done.
                            if let Some(ev) = &buf_free[slot] {
                                self.copy_stream.wait(ev).at("wait for stream buffer")?;
                            }
                            let host = &pinned
                                .as_ref()
                                .expect("pinned samples")
                                .as_slice()
                                .at("map pinned")?[c0..c1];
                            let mut dst = bufs[slot].slice_mut(0..c1 - c0);
                            self.copy_stream
                                .memcpy_htod(host, &mut dst)
                                .at("stream samples to device")?;
                            let copied = self
                                .copy_stream
                                .record_event(None)
                                .at("record copy event")?;
                            self.stream.wait(&copied).at("wait for copied samples")?;
                        }
                        let slot = c % 2;
                        let src = bufs[slot].slice(0..(c1 - c0).max(1));
                        b.arg(&src).arg(&mc).arg(&sign);
                        let r = unsafe { b.launch(cfg) };
                        buf_free[slot] =
                            Some(self.stream.record_event(None).at("record kernel event")?);
                        r
                    }
                };
                launched.at(&format!("launch {kernel}"))?;
                // Progress by pairs done, in units of targets.
                let now = r0 as u64 + (len as u64 * (c as u64 + 1)) / chunks as u64;
                if c + 1 == chunks || c % 8 == 7 {
                    self.stream.synchronize().at(&format!("run {kernel}"))?;
                    done.fetch_add(now - finished, Ordering::Relaxed);
                    finished = now;
                    progress(finished);
                }
            }
        }
        self.stream
            .memcpy_dtoh(&out_dev, as_floats_mut(out))
            .at("copy sums to host")?;
        self.stream.synchronize().at("synchronize after sums")?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// NVRTC needs no GPU: where libnvrtc loads, both kernel files must
    /// compile for Hopper and export every kernel the backend loads.
    #[test]
    fn kernels_compile_with_nvrtc() {
        if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
            println!(
                "skipped: libnvrtc not found (the kernels are compiled on the GPU machine instead)"
            );
            return;
        }
        let vector: Vec<String> = VECTOR_FUNCS.iter().map(|f| f.to_string()).collect();
        for (name, src, funcs) in [
            ("sum.cu", SUM_CU, sum_kernels()),
            ("vector.cu", VECTOR_CU, vector),
        ] {
            let p = ptx(name, src, "compute_90".into()).unwrap_or_else(|e| panic!("{e}"));
            let text = p.to_src();
            for f in &funcs {
                assert!(
                    text.contains(&format!(".entry {f}(")),
                    "{name} lacks kernel {f}"
                );
            }
        }
    }
}
