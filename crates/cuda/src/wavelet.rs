//! The wavelet prior's kernels (kernels/wavelet.cu) and their typed
//! launchers: one level of the Daubechies-2 transform along an axis, the
//! circular shift, and soft thresholding outside the coarse corner.

use crate::device::Device;
use crate::error::Ctx;
use cudarc::driver::{CudaFunction, CudaSlice, PushKernelArg};
use recon_core::Result;

/// Every kernel of wavelet.cu.
pub(crate) const NAMES: [&str; 3] = ["dwt", "roll", "shrink_outside"];

pub(crate) struct Kernels {
    dwt: CudaFunction,
    roll: CudaFunction,
    shrink_outside: CudaFunction,
}

impl Kernels {
    pub(crate) fn load(modules: &crate::modules::Modules) -> Result<Self> {
        let funcs = modules.functions(
            &crate::kernels::Module::whole(crate::kernels::WAVELET),
            &NAMES,
        )?;
        let [dwt, roll, shrink_outside]: [CudaFunction; NAMES.len()] =
            funcs.try_into().expect("one function per name");
        Ok(Kernels {
            dwt,
            roll,
            shrink_outside,
        })
    }
}

fn int3(v: [usize; 3]) -> [i32; 3] {
    v.map(|v| v as i32)
}

impl Device {
    /// One level along `axis` of the corner `extent` (checked by the
    /// caller), forward or inverse.
    pub fn dwt(
        &self,
        out: &mut CudaSlice<f32>,
        x: &CudaSlice<f32>,
        n: [usize; 3],
        extent: [usize; 3],
        axis: usize,
        inverse: bool,
    ) -> Result<()> {
        let ([nx, ny, nz], [ex, ey, ez]) = (int3(n), int3(extent));
        let (axis, inverse) = (axis as i32, inverse as i32);
        let mut b = self.stream.launch_builder(&self.wavelet()?.dwt);
        b.arg(out).arg(x).arg(&nx).arg(&ny).arg(&nz);
        b.arg(&ex).arg(&ey).arg(&ez).arg(&axis).arg(&inverse);
        unsafe { b.launch(self.cfg(n.iter().product())) }
            .at("launch dwt")
            .map(|_| ())
    }

    /// `out[(c + shift) mod n] = x[c]`.
    pub fn roll(
        &self,
        out: &mut CudaSlice<f32>,
        x: &CudaSlice<f32>,
        n: [usize; 3],
        shift: [usize; 3],
    ) -> Result<()> {
        let [nx, ny, nz] = int3(n);
        let [sx, sy, sz] = int3(std::array::from_fn(|a| shift[a] % n[a]));
        let mut b = self.stream.launch_builder(&self.wavelet()?.roll);
        b.arg(out).arg(x).arg(&nx).arg(&ny).arg(&nz);
        b.arg(&sx).arg(&sy).arg(&sz);
        unsafe { b.launch(self.cfg(n.iter().product())) }
            .at("launch roll")
            .map(|_| ())
    }

    /// Soft thresholding by `t` outside the corner `corner` of each image.
    pub fn shrink_outside(
        &self,
        x: &mut CudaSlice<f32>,
        n: [usize; 3],
        corner: [usize; 3],
        t: f64,
    ) -> Result<()> {
        let ([nx, ny, nz], [kx, ky, kz]) = (int3(n), int3(corner));
        let total = (x.len() / 2) as i64;
        let mut b = self.stream.launch_builder(&self.wavelet()?.shrink_outside);
        b.arg(x).arg(&total).arg(&nx).arg(&ny).arg(&nz);
        b.arg(&kx).arg(&ky).arg(&kz).arg(&t);
        unsafe { b.launch(self.cfg(total as usize)) }
            .at("launch shrink_outside")
            .map(|_| ())
    }
}
