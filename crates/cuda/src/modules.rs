//! A device's modules: loaded when first asked for (compiled, or read
//! from the kernel cache, by kernels.rs), with the functions looked up in
//! them; and which modules a run's [`recon_core::Workload`] needs, so that
//! [`recon_core::Backend::prepare`] compiles them side by side.

use crate::error::Ctx;
use crate::kernels::{
    cubin, stats, Arch, KernelCache, Module, NUFFT, SPARSE, SUM, VECTOR, WAVELET,
};
use cudarc::driver::{CudaContext, CudaFunction, CudaModule};
use cudarc::nvrtc::Ptx;
use recon_core::Result;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

/// One device's loaded modules, each loaded when first asked for, and the
/// functions looked up in them.
pub(crate) struct Modules {
    ctx: Arc<CudaContext>,
    arch: Arch,
    cache: Option<Arc<dyn KernelCache>>,
    loaded: Mutex<HashMap<Module, Arc<CudaModule>>>,
    functions: Mutex<HashMap<(Module, String), CudaFunction>>,
}

impl Modules {
    pub(crate) fn new(
        ctx: Arc<CudaContext>,
        arch: Arch,
        cache: Option<Arc<dyn KernelCache>>,
    ) -> Self {
        Modules {
            ctx,
            arch,
            cache,
            loaded: Mutex::new(HashMap::new()),
            functions: Mutex::new(HashMap::new()),
        }
    }

    /// `module`, loaded into the device (compiled or read first if needed).
    pub(crate) fn module(&self, module: &Module) -> Result<Arc<CudaModule>> {
        if let Some(m) = self.lock().get(module) {
            return Ok(m.clone());
        }
        let bytes = cubin(module, self.arch, self.cache.as_deref())?;
        let t = Instant::now();
        let m = self
            .ctx
            .load_module(Ptx::from_binary(bytes.to_vec()))
            .at(&format!("load {}", module.describe()))?;
        stats().load_seconds += t.elapsed().as_secs_f64();
        Ok(self.lock().entry(*module).or_insert(m).clone())
    }

    /// Every module of `modules` loaded: those not yet compiled compiled
    /// side by side (the slowest sets the time), then loaded in turn.
    pub(crate) fn load_all(&self, modules: &[Module]) -> Result<()> {
        use rayon::prelude::*;
        modules
            .par_iter()
            .try_for_each(|m| cubin(m, self.arch, self.cache.as_deref()).map(drop))?;
        for m in modules {
            self.module(m)?;
        }
        Ok(())
    }

    /// The functions `names` of `module`, in order, failing on the first
    /// missing one.
    pub(crate) fn functions<S: AsRef<str>>(
        &self,
        module: &Module,
        names: &[S],
    ) -> Result<Vec<CudaFunction>> {
        let m = self.module(module)?;
        names
            .iter()
            .map(|f| {
                m.load_function(f.as_ref()).at(&format!(
                    "load kernel {} of {}",
                    f.as_ref(),
                    module.describe()
                ))
            })
            .collect()
    }

    /// The function `name` of `module`, looked up once (an instance
    /// module's kernel: a line length's, a NUFFT step's).
    pub(crate) fn function(&self, module: &Module, name: &str) -> Result<CudaFunction> {
        let lock = || self.functions.lock().unwrap_or_else(|e| e.into_inner());
        let key = (*module, name.to_string());
        if let Some(f) = lock().get(&key) {
            return Ok(f.clone());
        }
        let [f]: [CudaFunction; 1] = self
            .functions(module, &[name])?
            .try_into()
            .expect("one function");
        Ok(lock().entry(key).or_insert(f).clone())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Module, Arc<CudaModule>>> {
        self.loaded.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The modules `work` launches: vector.cu always; per NUFFT its width's
/// spreading through shared memory (and interpolation from shared memory
/// where it does type 2), and the line lengths of its fine grid (where the
/// line kernels cover it, as its plan decides); per Toeplitz product the
/// lengths of its doubled grid, both the product's kernels and the plain
/// FFTs (FFT(Q)), and the x length's lines with CG's dot;
/// sum.cu, sparse.cu and wavelet.cu as asked. The fallbacks where a bin
/// does not fit in shared memory, spreading straight into the fine grid
/// and interpolating from it, are left to be compiled if a plan takes
/// them: at width 8 the spreading costs eight times the shared one's
/// compile.
pub(crate) fn needed(
    work: &recon_core::Workload,
    nufft: &crate::NufftOptions,
) -> Result<Vec<Module>> {
    use crate::lines;
    use crate::nufft::{auto_step, Step, WIDTHS};
    let mut modules = vec![Module::whole(VECTOR)];
    let mut lengths = Vec::new();
    for &n in &work.toeplitz {
        let d = n.map(|v| 2 * v);
        if lines::covered(d) {
            lengths.extend(d);
            modules.extend(d.map(lines::toeplitz_module));
            modules.push(lines::toeplitz_dot_module(d[0]));
        }
    }
    for n in &work.nufft {
        let layout = crate::nufft::layout(n.modes, n.tolerance, 1, nufft.upsampling)?;
        let w = layout.kernel.width;
        if WIDTHS.contains(&w) {
            modules.push(Module::whole(NUFFT));
            modules.push(auto_step(n.tolerance).module(w));
            if n.type2 {
                // Interpolation::Auto's, where the default bins' copy fits.
                modules.push(Step::InterpolateShared.module(w));
            }
        }
        if lines::covered(layout.fine) {
            lengths.extend(layout.fine);
        }
    }
    modules.extend(lengths.into_iter().map(lines::module));
    for (wanted, source) in [
        (work.exact, SUM),
        (work.sparse, SPARSE),
        (work.wavelets, WAVELET),
    ] {
        if wanted {
            modules.push(Module::whole(source));
        }
    }
    let mut unique = Vec::new();
    for m in modules {
        if !unique.contains(&m) {
            unique.push(m);
        }
    }
    Ok(unique)
}

/// `cell`'s value, made by `make` the first time (a failure is returned
/// and the next call tries again).
pub(crate) fn once<T>(cell: &OnceLock<T>, make: impl FnOnce() -> Result<T>) -> Result<&T> {
    if let Some(v) = cell.get() {
        return Ok(v);
    }
    let v = make()?;
    Ok(cell.get_or_init(|| v))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_workload_needs_its_widths_and_lengths_only() {
        use crate::nufft::Step;
        let nufft = |modes, tolerance, type2| recon_core::NufftUse {
            modes,
            tolerance,
            type2,
        };
        let work = recon_core::Workload {
            nufft: vec![
                nufft([48, 48, 48], 1e-6, false),
                nufft([96, 96, 96], 1e-6, false),
                nufft([48, 48, 48], 1e-2, true),
            ],
            toeplitz: vec![[48, 48, 48]],
            ..Default::default()
        };
        let m = needed(&work, &crate::NufftOptions::default()).unwrap();
        let has = |m2: Module| m.contains(&m2);
        assert!(has(Module::whole(VECTOR)) && has(Module::whole(NUFFT)));
        // tolerance 1e-6: width 8, spreading (in float) only; 1e-2: width
        // 4, both ways (spreading in fixed point)
        assert!(has(Step::SpreadShared.module(8)) && !has(Step::InterpolateShared.module(8)));
        assert!(!has(Step::SpreadFixedPoint.module(8)));
        assert!(has(Step::SpreadFixedPoint.module(4)) && has(Step::InterpolateShared.module(4)));
        assert!(
            !has(Step::Interpolate.module(4)),
            "the fallback, from the fine grid"
        );
        assert!(!has(Step::SpreadShared.module(4)));
        for w in 2..=8 {
            assert!(
                !has(Step::SpreadGlobal.module(w)),
                "the fallback, width {w}"
            );
        }
        assert!(!has(Step::SpreadShared.module(6)));
        // the Toeplitz product's 96 (its kernels, and plain FFTs for
        // FFT(Q)), the fine grids' 96 and 192
        for l in [96, 192] {
            assert!(has(crate::lines::module(l)), "{l}");
        }
        assert!(has(crate::lines::toeplitz_module(96)));
        assert!(has(crate::lines::toeplitz_dot_module(96)));
        assert!(!has(crate::lines::toeplitz_module(192)));
        assert!(!has(crate::lines::module(128)));
        assert!(!has(Module::whole(SUM)) && !has(Module::whole(SPARSE)));
        // each once
        let mut names: Vec<String> = m.iter().map(|m| m.describe()).collect();
        names.dedup();
        assert_eq!(names.len(), m.len());
        // the sparse priors and the exact engine add their files
        let more = needed(
            &recon_core::Workload {
                exact: true,
                sparse: true,
                wavelets: true,
                ..Default::default()
            },
            &crate::NufftOptions::default(),
        )
        .unwrap();
        for s in [SUM, SPARSE, WAVELET, VECTOR] {
            assert!(more.contains(&Module::whole(s)), "{}", s.name);
        }
    }
}
