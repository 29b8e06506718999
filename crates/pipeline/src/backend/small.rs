//! Problems too small for a GPU: `engine.device = "auto"` runs them on
//! the CPU. Opening a GPU costs its process about a third of a second
//! whatever the problem (the driver's context, 0.23 to 0.27 s on an H200
//! with persistence mode on, and about 0.1 s more at exit:
//! `bench/h200-2026-11-28-context/`), while test-small's 16^3 takes its
//! CPU 0.04 s. The CPU's time is estimated from the problem's sizes alone,
//! before anything is computed, by a model with two measured rates; it is
//! rough (within a few times), which is all the choice needs: the
//! threshold is a third of what a GPU costs before it computes anything.

use crate::config::{self, Algorithm, EngineKind, Lambda, Loaded, RegulariserKind, Source};

/// The CPU core-seconds below which `auto` takes the CPU: a third of a
/// GPU's fixed cost, so that a single core (no parallelism at all) still
/// finishes before a GPU would have opened.
pub const CPU_CORE_SECONDS: f64 = 0.1;

/// Core-seconds per Toeplitz product (an FFT and an inverse on the doubled
/// grid) per voxel of that grid and per factor of two in its size,
/// `V2 log2 V2`: the sodium problem's CG (48^3, two passes of 60
/// iterations) took 1.1 core-seconds in f32 on 2 cores, 5.2e-10 a unit.
const TOEPLITZ_RATE: f64 = 5.2e-10;

/// Core-seconds per sample for everything but the solve (Q, F^H D, the
/// gridding baseline with its density compensation, the prior's set-up):
/// the sodium problem's 119,800 samples took 0.42 core-seconds in f32 on
/// 2 cores, 3.5e-6 a sample.
const SAMPLE_RATE: f64 = 3.5e-6;

/// Core-seconds per sample and voxel of the exact engine (Q on the doubled
/// grid and F^H D on the image's): test-small's Q, 6,000 samples on 32^3,
/// took 0.53 core-seconds in f32 on 2 cores, 2.7e-9 a term.
const EXACT_RATE: f64 = 2.7e-9;

/// The solves a lambda rule may make: the discrepancy principle's most
/// (GCV solves fewer), so that the estimate errs towards the GPU.
const RULE_SOLVES: usize = crate::lambda::MAX_SOLVES;

/// The CPU's core-seconds for the whole of `l` (every image, coil and
/// lambda candidate; Q computed, not found in the cache), from its sizes.
pub fn cpu_core_seconds(l: &Loaded) -> f64 {
    let samples = crate::memory::samples(l).unwrap_or(usize::MAX) as f64;
    let coils = crate::memory::coils(l) as f64;
    let images = match &l.source {
        Source::Scan(s) => s.images(),
        _ => 1,
    } as f64;
    let voxels = l.grid.len() as f64;
    let doubled: f64 = l.grid.doubled().iter().map(|&n| n as f64).product();
    let anatomical_passes = match &l.cfg.regulariser {
        r if r.kind == RegulariserKind::Anatomical && r.data_edges => 2,
        _ => 1,
    };
    let products = l.cfg.iterations()
        * match l.cfg.algorithm() {
            Algorithm::Cg => anatomical_passes,
            Algorithm::Admm => l.cfg.solver.inner,
            Algorithm::Pdhg => 1,
        }
        * match l.cfg.lambda() {
            Lambda::Fixed(_) => 1,
            Lambda::Auto | Lambda::Gcv => RULE_SOLVES,
        };
    let solve = products as f64 * TOEPLITZ_RATE * doubled * doubled.log2().max(1.0);
    let once = samples
        * match l.cfg.engine.kind {
            EngineKind::Nufft => SAMPLE_RATE,
            EngineKind::Exact => SAMPLE_RATE + EXACT_RATE * (doubled + voxels),
        };
    // `samples` counts every image's; each image solves on its own.
    coils * (images * solve + once)
}

/// Why `auto` should run `l` on the CPU: its estimated CPU time is below
/// [`CPU_CORE_SECONDS`] (None: a GPU, where one is usable, is worth
/// opening). Only for `auto` in f32 (f64 runs on the CPU anyway).
pub fn small_for_gpu(l: &Loaded) -> Option<String> {
    let e = &l.cfg.engine;
    if e.device != config::DeviceChoice::Auto || e.precision != config::Precision::F32 {
        return None;
    }
    let seconds = cpu_core_seconds(l);
    (seconds < CPU_CORE_SECONDS).then(|| {
        format!(
            "device auto: a small problem (about {seconds:.3} CPU core-seconds, less than \
             opening a GPU takes); running on the CPU"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config;

    /// The shipped config `name` with `set` over it (its folder dropped:
    /// nothing is written).
    fn shipped(name: &str, set: &[&str]) -> Loaded {
        config::shipped_with(name, set).1
    }

    #[test]
    fn test_small_is_small_and_sodium_is_not() {
        let f32 = "engine.precision=f32";
        let small = shipped("test-small", &[f32]);
        let s = cpu_core_seconds(&small);
        // Measured: 0.06 to 0.08 core-seconds on 2 cores, the model's 0.03
        // (it leaves out fixed costs): under the threshold with room.
        assert!(s < CPU_CORE_SECONDS / 2.0, "{s}");
        assert!(small_for_gpu(&small).is_some_and(|w| w.contains("small problem")));
        // The sodium problem (48^3, 119,800 samples, an anatomical W of
        // two passes): measured 1.5 core-seconds, the rates' own
        // calibration; the range is the "within a few times" the model
        // claims. The GPU's.
        let sodium = shipped("sodium", &[]);
        let s = cpu_core_seconds(&sodium);
        assert!((0.5..5.0).contains(&s), "{s}");
        assert!(small_for_gpu(&sodium).is_none());
    }

    #[test]
    fn only_auto_in_f32_is_moved() {
        for (device, precision) in [("cuda", "f32"), ("cpu", "f32"), ("auto", "f64")] {
            let l = shipped(
                "test-small",
                &[
                    &format!("engine.device={device}"),
                    &format!("engine.precision={precision}"),
                ],
            );
            assert!(small_for_gpu(&l).is_none(), "{device} {precision}");
        }
    }

    #[test]
    fn what_multiplies_the_work_counts() {
        let base = cpu_core_seconds(&shipped("test-small", &["engine.precision=f32"]));
        // Twice the iterations add one solve's work; lambda by the
        // discrepancy principle, up to 14 solves, thirteen more.
        let solve = cpu_core_seconds(&shipped(
            "test-small",
            &["engine.precision=f32", "solver.iterations=60"],
        )) - base;
        let auto = shipped(
            "test-small",
            &["engine.precision=f32", "solver.lambda=\"auto\""],
        );
        let more = (cpu_core_seconds(&auto) - base) / solve;
        // The model is arithmetic on the sizes: equal to rounding.
        assert!((more - 13.0).abs() < 1e-9, "{more}");
        // The exact engine: every sample against every voxel, Q's on the
        // doubled grid: test-small's took 0.6 core-seconds, the GPU's.
        let exact = shipped(
            "test-small",
            &["engine.precision=f32", "engine.kind=\"exact\""],
        );
        assert!(cpu_core_seconds(&exact) > CPU_CORE_SECONDS);
        assert!(small_for_gpu(&exact).is_none());
        // Coils multiply it.
        let coils = shipped("test-small", &["engine.precision=f32", "coils.count=8"]);
        let ratio = cpu_core_seconds(&coils) / base;
        assert!((ratio - 8.0).abs() < 1e-9, "{ratio}");
    }
}
