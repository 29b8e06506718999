//! nufft.cu's kernels, loaded with the device and held by name: the fixed
//! ones as fields, the spreading and interpolation families per kernel
//! width (one of [`WIDTHS`]).

use super::WIDTHS;
use crate::kernels::{load_all, NUFFT_CU};
use cudarc::driver::{CudaContext, CudaFunction};
use recon_core::Result;
use std::sync::Arc;

const FIXED: [&str; 6] = [
    "nufft_count",
    "nufft_scan",
    "nufft_place",
    "nufft_subproblems",
    "nufft_deconvolve",
    "nufft_amplify",
];
const FAMILIES: [&str; 3] = ["spread_shared", "spread_global", "interpolate"];

/// Every kernel of nufft.cu the backend may launch: the fixed ones, then
/// per width each family.
pub(crate) fn kernel_names() -> Vec<String> {
    let mut v: Vec<String> = FIXED.map(String::from).to_vec();
    for w in WIDTHS {
        v.extend(FAMILIES.map(|step| format!("nufft_{step}_{w}")));
    }
    v
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
    /// Per width from `WIDTHS.start()`: spread_shared, spread_global,
    /// interpolate.
    by_width: Vec<[CudaFunction; 3]>,
}

impl Kernels {
    pub(crate) fn load(ctx: &Arc<CudaContext>, arch: &str) -> Result<Self> {
        let (_, funcs) = load_all(ctx, arch, "nufft.cu", NUFFT_CU, &kernel_names())?;
        let mut funcs = funcs.into_iter();
        let mut next = || funcs.next().expect("one function per name");
        let [count, scan, place, subproblems, deconvolve, amplify] = [(); 6].map(|_| next());
        let by_width = WIDTHS.map(|_| [(); 3].map(|_| next())).collect();
        Ok(Kernels {
            count,
            scan,
            place,
            subproblems,
            deconvolve,
            amplify,
            by_width,
        })
    }

    /// Width `w` (in `WIDTHS`, as plans check).
    fn family(&self, w: usize, k: usize) -> &CudaFunction {
        &self.by_width[w - WIDTHS.start()][k]
    }

    pub(crate) fn spread_shared(&self, w: usize) -> &CudaFunction {
        self.family(w, 0)
    }

    pub(crate) fn spread_global(&self, w: usize) -> &CudaFunction {
        self.family(w, 1)
    }

    pub(crate) fn interpolate(&self, w: usize) -> &CudaFunction {
        self.family(w, 2)
    }

    /// The correction kernel and its name (for errors).
    pub(crate) fn correction(&self, c: Correction) -> (&CudaFunction, &'static str) {
        match c {
            Correction::Deconvolve => (&self.deconvolve, FIXED[4]),
            Correction::Amplify => (&self.amplify, FIXED[5]),
        }
    }
}
