//! nufft.cu's kernels: the fixed ones (sorting the points, the
//! corrections), one module, and the spreading and interpolation steps, a
//! module per step and kernel width (one of [`WIDTHS`]), each loaded when
//! first needed.

use super::WIDTHS;
use crate::device::Device;
use crate::kernels::{Module, NUFFT};
use crate::modules::Modules;
use cudarc::driver::CudaFunction;
use recon_core::Result;

/// The kernels of nufft.cu's fixed module, in the order of `Kernels::load`.
pub(crate) const FIXED: [&str; 6] = [
    "nufft_count",
    "nufft_scan",
    "nufft_place",
    "nufft_subproblems",
    "nufft_deconvolve",
    "nufft_amplify",
];

/// The spreading and interpolation kernels, a module per step and width.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Step {
    /// Type 1's spreading, a bin's subproblems in shared memory.
    SpreadShared,
    /// The same in fixed point, by integer atomics.
    SpreadFixedPoint,
    /// Type 1's spreading straight into the fine grid.
    SpreadGlobal,
    /// Type 2's interpolation, from the fine grid.
    Interpolate,
    /// The same from shared-memory copies of the bins.
    InterpolateShared,
}

impl Step {
    #[cfg(test)]
    pub(crate) const ALL: [Step; 5] = [
        Step::SpreadShared,
        Step::SpreadFixedPoint,
        Step::SpreadGlobal,
        Step::Interpolate,
        Step::InterpolateShared,
    ];

    /// The kernel of width `w`.
    pub(crate) fn name(self, w: usize) -> String {
        let step = match self {
            Step::SpreadShared => "spread_shared",
            Step::SpreadFixedPoint => "spread_fixed_point",
            Step::SpreadGlobal => "spread_global",
            Step::Interpolate => "interpolate",
            Step::InterpolateShared => "interpolate_shared",
        };
        format!("nufft_{step}_{w}")
    }

    /// Its module for width `w`: nufft.cu compiled with the step's macro
    /// defined to `w`.
    pub(crate) fn module(self, w: usize) -> Module {
        let m = match self {
            Step::SpreadShared => "SPREAD_SHARED",
            Step::SpreadFixedPoint => "SPREAD_FIXED_POINT",
            Step::SpreadGlobal => "SPREAD_GLOBAL",
            Step::Interpolate => "INTERPOLATE",
            Step::InterpolateShared => "INTERPOLATE_SHARED",
        };
        Module::instance(NUFFT, m, w)
    }
}

/// The corrections of the kernel's Fourier transform.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Correction {
    /// Modes from the fine grid (type 1).
    Deconvolve,
    /// The fine grid from modes (type 2).
    Amplify,
}

pub(crate) struct Kernels {
    pub count: CudaFunction,
    pub scan: CudaFunction,
    pub place: CudaFunction,
    pub subproblems: CudaFunction,
    deconvolve: CudaFunction,
    amplify: CudaFunction,
}

impl Kernels {
    pub(crate) fn load(modules: &Modules) -> Result<Self> {
        let funcs = modules.functions(&Module::whole(NUFFT), &FIXED)?;
        let [count, scan, place, subproblems, deconvolve, amplify]: [CudaFunction; 6] =
            funcs.try_into().expect("one function per name");
        Ok(Kernels {
            count,
            scan,
            place,
            subproblems,
            deconvolve,
            amplify,
        })
    }

    /// The correction kernel and its name (for errors).
    pub(crate) fn correction(&self, c: Correction) -> (&CudaFunction, &'static str) {
        match c {
            Correction::Deconvolve => (&self.deconvolve, FIXED[4]),
            Correction::Amplify => (&self.amplify, FIXED[5]),
        }
    }
}

impl Device {
    /// The kernel of `step` for width `w` (in [`WIDTHS`], as plans check),
    /// its module loaded the first time.
    pub(crate) fn nufft_kernel(&self, step: Step, w: usize) -> Result<CudaFunction> {
        debug_assert!(WIDTHS.contains(&w));
        self.modules.function(&step.module(w), &step.name(w))
    }
}
