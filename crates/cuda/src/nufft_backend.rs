//! [`recon_nufft::NufftBackend`] for the CUDA backend: each call checked
//! and passed to the first GPU's NUFFT (nufft.rs).

use crate::{CudaBackend, CudaNufft};
use recon_core::{Complex, Result};

impl recon_nufft::NufftBackend for CudaBackend {
    type Nufft = CudaNufft;

    fn nufft_plan(
        &self,
        modes: [usize; 3],
        tol: f64,
        sign: i32,
        points: &[[f64; 3]],
    ) -> Result<CudaNufft> {
        let layout = crate::nufft::layout(modes, tol, sign, self.options.nufft.upsampling)?;
        self.dev0().nufft_plan(layout, points, &self.options.nufft)
    }

    fn nufft_type1(
        &self,
        plan: &CudaNufft,
        out: &mut Self::Vector,
        c: &Self::Vector,
    ) -> Result<()> {
        self.dev0().nufft_type1(plan, out, c)
    }

    fn nufft_type1_coils(
        &self,
        plan: &CudaNufft,
        out: &mut Self::Vector,
        w: &[f64],
        d: &[Complex<f64>],
        maps: &[&Self::Vector],
        progress: recon_core::Progress<'_>,
    ) -> Result<()> {
        recon_nufft::check_type1_coils(self, out, w, d, maps)?;
        self.dev0()
            .nufft_type1_coils(plan, out, w, d, maps, progress)
    }

    fn nufft_type1_adjoint(
        &self,
        plan: &CudaNufft,
        out: &mut Self::Vector,
        f: &Self::Vector,
    ) -> Result<()> {
        self.dev0().nufft_type1_adjoint(plan, out, f)
    }

    fn nufft_convolve(
        &self,
        plan: &CudaNufft,
        out: &mut Self::Vector,
        c: &Self::Vector,
    ) -> Result<()> {
        self.dev0().nufft_convolve(plan, out, c)
    }
}
