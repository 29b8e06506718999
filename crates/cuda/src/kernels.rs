//! The kernel sources, and how they become modules on a device.
//!
//! Key design decision: a run compiles only what it launches, straight to
//! machine code, once per machine. Each module is a `.cu` file or one
//! instance of it (a line length of lines.cu, a kernel width of nufft.cu,
//! given to the file as a macro), compiled when a device first needs it.
//! NVRTC emits CUBIN for the device's own architecture (`sm_XY`), so the
//! driver has no PTX to compile at load; the CUBIN is kept for the process
//! and, through a [`KernelCache`] (recon's cache folder, which the pipeline
//! provides), for every later process on any machine that shares the
//! folder. A module's cache key is a SHA-256 of everything its code
//! depends on: the source and its headers, the options (architecture and instance
//! included), and the NVRTC and driver versions. Loading the modules into
//! a device, and which ones a run needs, is modules.rs.

use crate::error::{err, Ctx};
use cudarc::nvrtc::{result as nvrtc, sys as nvrtc_sys};
use recon_core::Result;
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::ffi::CString;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

/// A kernel source file, with the headers of `kernels/` it includes
/// (`#include "name"`), given to NVRTC by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Source {
    pub name: &'static str,
    pub text: &'static str,
    pub headers: &'static [Header],
}

/// A header of `kernels/`: its name as included, and its text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Header {
    pub name: &'static str,
    pub text: &'static str,
}

macro_rules! source {
    ($file:literal $(, $header:literal)*) => {
        Source {
            name: $file,
            text: include_str!(concat!("../kernels/", $file)),
            headers: &[$(Header {
                name: $header,
                text: include_str!(concat!("../kernels/", $header)),
            }),*],
        }
    };
}

pub(crate) const SUM: Source = source!("sum.cu");
pub(crate) const VECTOR: Source = source!("vector.cu", "chain.cuh", "ratio.cuh", "reduce.cuh");
pub(crate) const NUFFT: Source = source!("nufft.cu", "spread.cuh", "interp.cuh");
pub(crate) const LINES: Source = source!(
    "lines.cu",
    "chain.cuh",
    "dft.cuh",
    "ratio.cuh",
    "reduce.cuh",
    "stockham.cuh"
);
pub(crate) const SPARSE: Source = source!("sparse.cu");
pub(crate) const WAVELET: Source = source!("wavelet.cu");

/// One module: a source, whole or one instance of it (a macro defined to
/// a value).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Module {
    pub source: Source,
    pub define: Option<(&'static str, usize)>,
}

impl Module {
    pub(crate) const fn whole(source: Source) -> Self {
        Module {
            source,
            define: None,
        }
    }

    /// `source` compiled with `-Dmacro_=value`.
    pub(crate) const fn instance(source: Source, macro_: &'static str, value: usize) -> Self {
        Module {
            source,
            define: Some((macro_, value)),
        }
    }

    /// "lines.cu (LENGTH=96)", for errors.
    pub(crate) fn describe(&self) -> String {
        match self.define {
            None => self.source.name.to_string(),
            Some((m, v)) => format!("{} ({m}={v})", self.source.name),
        }
    }

    fn options(&self, arch: Arch) -> Vec<String> {
        let mut o = vec![
            format!("--gpu-architecture=sm_{}{}", arch.0, arch.1),
            "--std=c++17".to_string(),
        ];
        if let Some((m, v)) = self.define {
            o.push(format!("-D{m}={v}"));
        }
        o
    }
}

/// A device's compute capability (major, minor).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Arch(pub i32, pub i32);

/// Compiled kernels kept across processes: recon's cache folder, which
/// the pipeline provides (recon-cuda does no file I/O). `get` returns only
/// bytes that `put` stored under the same key, intact; a store that cannot
/// say so returns `None`, and the module is compiled again.
pub trait KernelCache: Send + Sync + std::fmt::Debug {
    /// The CUBIN stored under `key`, if any.
    fn get(&self, key: &str) -> Option<Vec<u8>>;
    /// Stores `cubin` under `key`. A failure (a read-only or full folder)
    /// is reported through [`KernelStats::not_stored`]; the run goes on.
    fn put(&self, key: &str, cubin: &[u8]) -> std::result::Result<(), String>;
}

/// How this process's modules were obtained: for the run's report
/// (`report.json`'s `kernels`).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct KernelStats {
    /// Modules compiled by NVRTC, each with its seconds (side by side, so
    /// their sum is more than the time they took) ...
    pub compiled: Vec<(String, f64)>,
    /// ... and their seconds together.
    pub compile_seconds: f64,
    /// Modules read from the kernel cache.
    pub cached: Vec<String>,
    /// Seconds spent loading modules into devices (the driver's part).
    pub load_seconds: f64,
    /// Why a compiled module could not be cached, where one could not.
    pub not_stored: Option<String>,
}

pub(crate) fn stats() -> std::sync::MutexGuard<'static, KernelStats> {
    static STATS: Mutex<KernelStats> = Mutex::new(KernelStats {
        compiled: Vec::new(),
        compile_seconds: 0.0,
        cached: Vec::new(),
        load_seconds: 0.0,
        not_stored: None,
    });
    STATS.lock().unwrap_or_else(|e| e.into_inner())
}

/// What this process has compiled, read and loaded so far.
pub fn kernel_stats() -> KernelStats {
    stats().clone()
}

/// NVRTC's version, "major.minor".
fn nvrtc_version() -> String {
    let (mut major, mut minor) = (0, 0);
    // SAFETY: two out-parameters; probe() checked that NVRTC loads.
    let r = unsafe { nvrtc_sys::nvrtcVersion(&mut major, &mut minor) };
    match r {
        nvrtc_sys::nvrtcResult::NVRTC_SUCCESS => format!("{major}.{minor}"),
        e => format!("unknown ({e:?})"),
    }
}

/// The driver's version (e.g. 13000), 0 where it cannot be read (no
/// libcuda: a compile without a GPU, as the tests make).
fn driver_version() -> i32 {
    let mut v = 0;
    // SAFETY: checks that libcuda loads (cudarc would panic otherwise),
    // then one out-parameter.
    unsafe {
        if cudarc::driver::sys::is_culib_present() {
            let _ = cudarc::driver::sys::cuDriverGetVersion(&mut v);
        }
    }
    v
}

/// The cache key of `module` for `arch`: SHA-256 (hex) of its source,
/// options and the compiler's and driver's versions.
pub(crate) fn cache_key(module: &Module, arch: Arch) -> String {
    let mut h = Sha256::new();
    h.update(b"recon kernel v1\0");
    h.update(module.source.name.as_bytes());
    h.update(b"\0");
    h.update(module.source.text.as_bytes());
    for header in module.source.headers {
        h.update(b"\0");
        h.update(header.name.as_bytes());
        h.update(b"\0");
        h.update(header.text.as_bytes());
    }
    for o in module.options(arch) {
        h.update(b"\0");
        h.update(o.as_bytes());
    }
    h.update(b"\0nvrtc ");
    h.update(nvrtc_version().as_bytes());
    h.update(b"\0driver ");
    h.update(driver_version().to_le_bytes());
    hex::encode(h.finalize())
}

/// Compiles `module` for `arch` to CUBIN.
fn compile(module: &Module, arch: Arch) -> Result<Vec<u8>> {
    let what = format!("NVRTC compile of {}", module.describe());
    let cstring = |s: &str| CString::new(s).map_err(|e| err(&what, e));
    let src = cstring(module.source.text)?;
    let name = cstring(module.source.name)?;
    let headers = module.source.headers;
    let texts = headers
        .iter()
        .map(|h| cstring(h.text))
        .collect::<Result<Vec<_>>>()?;
    let names = headers
        .iter()
        .map(|h| cstring(h.name))
        .collect::<Result<Vec<_>>>()?;
    let text_ptrs: Vec<_> = texts.iter().map(|t| t.as_ptr()).collect();
    let name_ptrs: Vec<_> = names.iter().map(|n| n.as_ptr()).collect();
    let mut prog = std::mem::MaybeUninit::uninit();
    // SAFETY: every pointer is to a live NUL-terminated string, the arrays
    // hold `headers.len()` of them, and NVRTC copies what it keeps.
    let prog = unsafe {
        nvrtc_sys::nvrtcCreateProgram(
            prog.as_mut_ptr(),
            src.as_ptr(),
            name.as_ptr(),
            headers.len() as i32,
            text_ptrs.as_ptr(),
            name_ptrs.as_ptr(),
        )
        .result()
        .at(&what)?;
        prog.assume_init()
    };
    // SAFETY: `prog` is a live program; it is destroyed below on every path.
    let out = unsafe {
        match nvrtc::compile_program(prog, &module.options(arch)) {
            Ok(()) => {
                let mut size = 0usize;
                let r = nvrtc_sys::nvrtcGetCUBINSize(prog, &mut size);
                let mut cubin = vec![0u8; size];
                let r2 = match r {
                    nvrtc_sys::nvrtcResult::NVRTC_SUCCESS => {
                        nvrtc_sys::nvrtcGetCUBIN(prog, cubin.as_mut_ptr().cast())
                    }
                    e => e,
                };
                match r2 {
                    nvrtc_sys::nvrtcResult::NVRTC_SUCCESS if size > 0 => Ok(cubin),
                    e => Err(err(&what, format!("no CUBIN ({e:?})"))),
                }
            }
            Err(e) => {
                let log = nvrtc::get_program_log(prog)
                    .map(|l| {
                        std::ffi::CStr::from_ptr(l.as_ptr())
                            .to_string_lossy()
                            .into_owned()
                    })
                    .unwrap_or_default();
                Err(err(&what, format!("{e:?}: {log}")))
            }
        }
    };
    // SAFETY: as above; the program is not used after this.
    let _ = unsafe { nvrtc::destroy_program(prog) };
    out
}

type Cell = Arc<OnceLock<std::result::Result<Arc<Vec<u8>>, String>>>;

/// The CUBIN of `module` for `arch`: this process's, the cache's, or
/// compiled now (and stored in the cache). Different modules compile side
/// by side; the same one once.
pub(crate) fn cubin(
    module: &Module,
    arch: Arch,
    cache: Option<&dyn KernelCache>,
) -> Result<Arc<Vec<u8>>> {
    static CUBINS: OnceLock<Mutex<HashMap<(Module, Arch), Cell>>> = OnceLock::new();
    let cell = CUBINS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .entry((*module, arch))
        .or_default()
        .clone();
    let got = cell.get_or_init(|| {
        let key = cache.map(|_| cache_key(module, arch));
        if let (Some(c), Some(k)) = (cache, &key) {
            if let Some(bytes) = c.get(k) {
                stats().cached.push(module.describe());
                return Ok(Arc::new(bytes));
            }
        }
        let t = Instant::now();
        let bytes = compile(module, arch).map_err(|e| e.to_string())?;
        {
            let mut s = stats();
            let seconds = t.elapsed().as_secs_f64();
            s.compiled.push((module.describe(), seconds));
            s.compile_seconds += seconds;
        }
        if let (Some(c), Some(k)) = (cache, &key) {
            if let Err(why) = c.put(k, &bytes) {
                stats().not_stored.get_or_insert(why);
            }
        }
        Ok(Arc::new(bytes))
    });
    got.clone().map_err(|why| recon_core::Error::Device {
        backend: "CUDA",
        op: format!("compile {}", module.describe()),
        reason: why,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every module the backend may load, with the kernels it must export.
    fn every_module() -> Vec<(Module, Vec<String>)> {
        let mut v = vec![
            (Module::whole(SUM), crate::engine::sum_kernels()),
            (
                Module::whole(VECTOR),
                crate::vector::NAMES.map(String::from).to_vec(),
            ),
            (
                Module::whole(NUFFT),
                crate::nufft::FIXED.map(String::from).to_vec(),
            ),
            (
                Module::whole(SPARSE),
                crate::sparse::NAMES.map(String::from).to_vec(),
            ),
            (
                Module::whole(WAVELET),
                crate::wavelet::NAMES.map(String::from).to_vec(),
            ),
        ];
        for w in crate::nufft::WIDTHS {
            for step in crate::nufft::Step::ALL {
                v.push((step.module(w), vec![step.name(w)]));
            }
        }
        for l in crate::lines::LENGTHS {
            for m in [
                crate::lines::module(l),
                crate::lines::toeplitz_module(l),
                crate::lines::toeplitz_dot_module(l),
            ] {
                v.push((m, crate::lines::kernel_names(m, l)));
            }
        }
        v
    }

    /// NVRTC needs no GPU: where libnvrtc loads, every module must compile
    /// to CUBIN for Hopper and export every kernel the backend loads from
    /// it (the names are in the CUBIN's symbol table).
    #[test]
    fn kernels_compile_with_nvrtc() {
        if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
            println!(
                "skipped: libnvrtc not found (the kernels are compiled on the GPU machine instead)"
            );
            return;
        }
        for (module, funcs) in every_module() {
            let cubin = compile(&module, Arch(9, 0)).unwrap_or_else(|e| panic!("{e}"));
            for f in &funcs {
                let name = format!("\0{f}\0");
                assert!(
                    cubin.windows(name.len()).any(|w| w == name.as_bytes()),
                    "{} lacks kernel {f}",
                    module.describe()
                );
            }
        }
    }

    const EDITED: Source = Source {
        headers: &[Header {
            name: "dft.cuh",
            text: "// another dft.cuh",
        }],
        ..LINES
    };

    #[test]
    fn cache_keys_differ_by_source_instance_and_architecture() {
        if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
            println!("skipped: libnvrtc not found (the key holds NVRTC's version)");
            return;
        }
        let a = cache_key(&Module::instance(LINES, "LENGTH", 96), Arch(9, 0));
        assert_eq!(
            a,
            cache_key(&Module::instance(LINES, "LENGTH", 96), Arch(9, 0))
        );
        for other in [
            cache_key(&Module::instance(LINES, "LENGTH", 128), Arch(9, 0)),
            cache_key(&Module::instance(LINES, "LENGTH", 96), Arch(8, 0)),
            cache_key(&Module::instance(NUFFT, "LENGTH", 96), Arch(9, 0)),
            // the same file with another text of its header
            cache_key(&Module::instance(EDITED, "LENGTH", 96), Arch(9, 0)),
        ] {
            assert_ne!(a, other);
        }
        assert_eq!(a.len(), 64);
    }

    /// A store that remembers what it was given and counts what it served.
    #[derive(Debug, Default)]
    struct Memory(Mutex<HashMap<String, Vec<u8>>>, Mutex<usize>);

    impl KernelCache for Memory {
        fn get(&self, key: &str) -> Option<Vec<u8>> {
            let got = self.0.lock().unwrap().get(key).cloned();
            *self.1.lock().unwrap() += got.is_some() as usize;
            got
        }
        fn put(&self, key: &str, cubin: &[u8]) -> std::result::Result<(), String> {
            self.0.lock().unwrap().insert(key.into(), cubin.to_vec());
            Ok(())
        }
    }

    #[test]
    fn a_module_is_compiled_once_and_served_from_the_cache() {
        if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
            println!("skipped: libnvrtc not found");
            return;
        }
        // An architecture no other test asks for: this process's memo is
        // empty for it, so the store is asked first.
        let store = Memory::default();
        let m = Module::whole(SPARSE);
        let first = cubin(&m, Arch(8, 6), Some(&store)).unwrap();
        assert_eq!(store.0.lock().unwrap().len(), 1, "compiled and stored");
        assert_eq!(*store.1.lock().unwrap(), 0, "nothing to serve before");
        // The process keeps it: the store is not asked again.
        let again = cubin(&m, Arch(8, 6), Some(&store)).unwrap();
        assert!(Arc::ptr_eq(&first, &again));
        assert!(kernel_stats()
            .compiled
            .iter()
            .any(|(n, _)| *n == m.describe()));
        // What was stored is what a fresh process would get.
        let key = cache_key(&m, Arch(8, 6));
        assert_eq!(store.get(&key).as_deref(), Some(first.as_slice()));
        // A module the store holds is read, not compiled.
        let w = Module::whole(WAVELET);
        store.put(&cache_key(&w, Arch(8, 6)), b"stored").unwrap();
        let served = cubin(&w, Arch(8, 6), Some(&store)).unwrap();
        assert_eq!(served.as_slice(), b"stored");
        let s = kernel_stats();
        assert!(s.cached.contains(&w.describe()));
        assert!(!s.compiled.iter().any(|(n, _)| *n == w.describe()));
    }
}
