//! The kernel sources: the `.cu` files, compiled by NVRTC once per process
//! and architecture, loaded by [`load_all`] (every kernel a file's
//! launchers use is loaded with the device, so that a missing one fails at
//! start-up, not mid-run); and sum.cu's kernels by variant.

use crate::error::err;
use crate::Variant;
use cudarc::nvrtc::{compile_ptx_with_opts, CompileOptions, Ptx};
use recon_core::Result;
use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

pub(crate) const SUM_CU: &str = include_str!("../kernels/sum.cu");
pub(crate) const VECTOR_CU: &str = include_str!("../kernels/vector.cu");
pub(crate) const NUFFT_CU: &str = include_str!("../kernels/nufft.cu");
pub(crate) const LINES_CU: &str = include_str!("../kernels/lines.cu");
pub(crate) const SPARSE_CU: &str = include_str!("../kernels/sparse.cu");
pub(crate) const WAVELET_CU: &str = include_str!("../kernels/wavelet.cu");

/// PTX per (source, architecture), compiled once per process.
pub(crate) fn ptx(name: &'static str, src: &'static str, arch: String) -> Result<Ptx> {
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

/// Loads the module of `src` (named `name`) for `arch`, and a function of it
/// by name for each of `names`, failing on the first missing one.
pub(crate) fn load_all(
    ctx: &std::sync::Arc<cudarc::driver::CudaContext>,
    arch: &str,
    name: &'static str,
    src: &'static str,
    names: &[String],
) -> Result<(
    std::sync::Arc<cudarc::driver::CudaModule>,
    Vec<cudarc::driver::CudaFunction>,
)> {
    use crate::error::Ctx;
    let m = ctx
        .load_module(ptx(name, src, arch.to_string())?)
        .at(&format!("load {name}"))?;
    let funcs = names
        .iter()
        .map(|f| m.load_function(f).at(&format!("load kernel {f}")))
        .collect::<Result<_>>()?;
    Ok((m, funcs))
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
    pub module: std::sync::Arc<cudarc::driver::CudaModule>,
    by_name: HashMap<String, cudarc::driver::CudaFunction>,
}

impl SumKernels {
    pub(crate) fn load(
        ctx: &std::sync::Arc<cudarc::driver::CudaContext>,
        arch: &str,
    ) -> Result<Self> {
        let names = sum_kernels();
        let (module, funcs) = load_all(ctx, arch, "sum.cu", SUM_CU, &names)?;
        Ok(SumKernels {
            module,
            by_name: names.into_iter().zip(funcs).collect(),
        })
    }

    /// The kernel that runs `variant` (see [`sum_kernel`]), and its name.
    pub(crate) fn get(
        &self,
        variant: Variant,
        rows: bool,
        per_thread: u32,
    ) -> Result<(&str, &cudarc::driver::CudaFunction)> {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// NVRTC needs no GPU: where libnvrtc loads, every kernel file must
    /// compile for Hopper and export every kernel the backend loads.
    #[test]
    fn kernels_compile_with_nvrtc() {
        if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
            println!(
                "skipped: libnvrtc not found (the kernels are compiled on the GPU machine instead)"
            );
            return;
        }
        for (name, src, funcs) in [
            ("sum.cu", SUM_CU, sum_kernels()),
            (
                "vector.cu",
                VECTOR_CU,
                crate::vector::NAMES.map(String::from).to_vec(),
            ),
            ("nufft.cu", NUFFT_CU, crate::nufft::kernel_names()),
            ("lines.cu", LINES_CU, crate::lines::kernel_names()),
            (
                "sparse.cu",
                SPARSE_CU,
                crate::sparse::NAMES.map(String::from).to_vec(),
            ),
            (
                "wavelet.cu",
                WAVELET_CU,
                crate::wavelet::NAMES.map(String::from).to_vec(),
            ),
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
