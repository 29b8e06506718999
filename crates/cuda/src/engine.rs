//! The summation engine on one GPU: a slab of the targets of
//! `out[n] = sum_m c_m exp(sign i 2pi k_m . x_n)`, by the variant and
//! tuning of the book's ladder (kernels in sum.cu). Several GPUs share a
//! sum above the backend (`recon_ops::sum_exp_on_shards`), each a slab.

use crate::device::{as_floats_mut, Device};
use crate::error::{err, Ctx};
use crate::kernels::{Module, SUM};
use crate::modules::Modules;
use crate::{Tuning, Variant};
use cudarc::driver::{
    CudaFunction, CudaModule, DeviceRepr, LaunchConfig, PushKernelArg, ValidAsZeroBits,
};
use recon_core::{Complex, Error, Result, Sign, Targets};
use std::collections::HashMap;
use std::sync::Arc;

/// Samples per constant-memory chunk; `CHUNK` in sum.cu.
const CHUNK: usize = 3200;
/// Samples per streamed chunk (variant 6).
const STREAM_CHUNK: usize = 1 << 16;

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

// The layouts sum.cu's `Lattice` and `Sample` have, whose sizes it checks (NVRTC has no
// offsetof, so the offsets are checked here only).
const _: () = assert!(
    std::mem::size_of::<Lattice>() == 40
        && std::mem::offset_of!(Lattice, origin) == 16
        && std::mem::offset_of!(Lattice, step) == 28
        && std::mem::size_of::<Sample>() == 20
        && std::mem::offset_of!(Sample, cr) == 12
);
unsafe impl ValidAsZeroBits for Sample {}

pub(crate) enum TargetSpec {
    Lattice(Lattice),
    /// x, y, z per target.
    List(Vec<f32>),
}

/// One summation, in the kernels' terms.
pub(crate) struct Job {
    pub targets: TargetSpec,
    pub samples: Vec<Sample>,
    pub sign: f32,
    pub variant: Variant,
    pub tuning: Tuning,
}

impl Job {
    /// [`recon_core::Backend::sum_exp`]'s arguments in float32, with the
    /// ladder's `variant` and `tuning`.
    pub fn new(
        targets: Targets<'_>,
        sources: &[[f64; 3]],
        coef: &[Complex<f32>],
        sign: Sign,
        variant: Variant,
        tuning: Tuning,
    ) -> Result<Self> {
        Error::check_len("sum_exp coefficients", sources.len(), coef.len())?;
        let samples = sources
            .iter()
            .zip(coef)
            .map(|(k, c)| Sample {
                kx: k[0] as f32,
                ky: k[1] as f32,
                kz: k[2] as f32,
                cr: c.re,
                ci: c.im,
            })
            .collect();
        Ok(Job {
            targets: match targets {
                Targets::Lattice(l) => TargetSpec::Lattice(Lattice::from(&l)),
                Targets::List(p) => {
                    TargetSpec::List(p.iter().flat_map(|x| x.map(|v| v as f32)).collect())
                }
            },
            samples,
            sign: match sign {
                Sign::Plus => 1.0,
                Sign::Minus => -1.0,
            },
            variant,
            tuning,
        })
    }
}

/// Targets per launch: large enough to fill any current GPU, small enough
/// that one launch stays well under a second and progress moves.
const RANGE: usize = 1 << 22;

impl Device {
    /// A slab of a summation on this GPU: targets `first .. first +
    /// out.len()`; `progress` gets the running count of finished targets.
    pub fn sum_exp(
        &self,
        out: &mut [Complex<f32>],
        first: usize,
        job: &Job,
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
            Some(self.stream.clone_htod(&job.samples).at("upload samples")?)
        } else {
            None
        };
        let pinned = if streamed && m > 0 {
            // SAFETY: filled completely before use.
            let mut p =
                unsafe { self.ctx.alloc_pinned::<Sample>(m) }.at("allocate pinned samples")?;
            p.as_mut_slice()
                .at("map pinned samples")?
                .copy_from_slice(&job.samples);
            Some(p)
        } else {
            None
        };
        let mut bufs = if streamed {
            let len = STREAM_CHUNK.min(m.max(1));
            let bufs = vec![
                self.stream
                    .alloc_zeros::<Sample>(len)
                    .at("allocate stream buffer")?,
                self.stream
                    .alloc_zeros::<Sample>(len)
                    .at("allocate stream buffer")?,
            ];
            // The copies may use the buffers once they exist (they are
            // freed on `stream` after its last kernel, which waits for the
            // last copy).
            self.copy_stream
                .join(&self.stream)
                .at("order the stream buffers")?;
            bufs
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
                && (first + r0).is_multiple_of(row)
                && len.is_multiple_of(row)
        };
        let sum = self.sum()?;
        let kernel_for = |r0: usize, len: usize| sum.get(job.variant, rows_ok(r0, len), vpt);
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
        let mut sym = sum
            .module
            .get_global("c_samples", &self.stream)
            .at("find c_samples")?;
        // SAFETY: c_samples is `Sample[CHUNK]` in sum.cu.
        let mut sym = unsafe { sym.transmute_mut::<Sample>(CHUNK) }.ok_or_else(|| {
            err(
                "view c_samples",
                "constant symbol smaller than CHUNK samples",
            )
        })?;

        for r0 in (0..count).step_by(range) {
            let r1 = (r0 + range).min(count);
            let len = r1 - r0;
            let (kernel, func) = kernel_for(r0, len)?;
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
                    progress(now);
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
pub(crate) fn sum_kernels() -> Vec<String> {
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

/// sum.cu's module (its constant-memory samples are a symbol of it) and
/// its kernels, looked up by variant, row kernel and outputs per thread.
pub(crate) struct SumKernels {
    pub module: Arc<CudaModule>,
    by_name: HashMap<String, CudaFunction>,
}

impl SumKernels {
    pub(crate) fn load(modules: &Modules) -> Result<Self> {
        let names = sum_kernels();
        let m = Module::whole(SUM);
        let funcs = modules.functions(&m, &names)?;
        Ok(SumKernels {
            module: modules.module(&m)?,
            by_name: names.into_iter().zip(funcs).collect(),
        })
    }

    /// The kernel that runs `variant` (see [`sum_kernel`]), and its name.
    pub(crate) fn get(
        &self,
        variant: Variant,
        rows: bool,
        per_thread: u32,
    ) -> Result<(&str, &CudaFunction)> {
        let name = sum_kernel(variant, rows, per_thread);
        self.by_name
            .get_key_value(&name)
            .map(|(k, f)| (k.as_str(), f))
            .ok_or_else(|| {
                err(
                    format!("find kernel {name}"),
                    "not compiled for this variant",
                )
            })
    }
}
