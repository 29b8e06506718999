//! The sparse priors' kernels (kernels/sparse.cu) and their typed
//! launchers: finite differences, their adjoint, group shrinkage and the
//! directional projection. Loaded with the device, held by name here
//! rather than in the device's string-keyed map.

use crate::device::Device;
use crate::error::Ctx;
use cudarc::driver::{CudaFunction, CudaSlice, PushKernelArg};
use recon_core::{GroupProx, Result};

/// Every kernel of sparse.cu.
pub(crate) const NAMES: [&str; 4] = ["grad3", "grad3_adjoint", "group_prox", "project_off"];

pub(crate) struct Kernels {
    grad3: CudaFunction,
    grad3_adjoint: CudaFunction,
    group_prox: CudaFunction,
    project_off: CudaFunction,
}

impl Kernels {
    pub(crate) fn load(modules: &crate::modules::Modules) -> Result<Self> {
        let funcs = modules.functions(
            &crate::kernels::Module::whole(crate::kernels::SPARSE),
            &NAMES,
        )?;
        let [grad3, grad3_adjoint, group_prox, project_off]: [CudaFunction; NAMES.len()] =
            funcs.try_into().expect("one function per name");
        Ok(Kernels {
            grad3,
            grad3_adjoint,
            group_prox,
            project_off,
        })
    }
}

impl Device {
    /// Forward differences of the image `x` of shape `n` into `out`.
    pub fn grad(&self, out: &mut CudaSlice<f32>, x: &CudaSlice<f32>, n: [usize; 3]) -> Result<()> {
        self.finite(&self.sparse()?.grad3, "grad3", out, x, n)
    }

    /// The adjoint of [`Device::grad`].
    pub fn grad_adjoint(
        &self,
        out: &mut CudaSlice<f32>,
        y: &CudaSlice<f32>,
        n: [usize; 3],
    ) -> Result<()> {
        self.finite(&self.sparse()?.grad3_adjoint, "grad3_adjoint", out, y, n)
    }

    fn finite(
        &self,
        f: &CudaFunction,
        name: &str,
        out: &mut CudaSlice<f32>,
        x: &CudaSlice<f32>,
        n: [usize; 3],
    ) -> Result<()> {
        let [nx, ny, nz] = n.map(|v| v as i32);
        let mut b = self.stream.launch_builder(f);
        b.arg(out).arg(x).arg(&nx).arg(&ny).arg(&nz);
        unsafe { b.launch(self.cfg(n.iter().product())) }
            .at(&format!("launch {name}"))
            .map(|_| ())
    }

    /// Shrinks or projects each group of `components` values of `x`.
    pub fn group_prox(
        &self,
        x: &mut CudaSlice<f32>,
        t: f64,
        components: usize,
        kind: GroupProx,
    ) -> Result<()> {
        let groups = (x.len() / 2 / components) as i64;
        let (c, project) = (components as i32, (kind == GroupProx::Project) as i32);
        let mut b = self.stream.launch_builder(&self.sparse()?.group_prox);
        b.arg(x).arg(&t).arg(&c).arg(&project).arg(&groups);
        unsafe { b.launch(self.cfg(groups as usize)) }
            .at("launch group_prox")
            .map(|_| ())
    }

    /// `v = v - xi (xi . v)` per voxel of 3-component fields.
    pub fn project_off(&self, v: &mut CudaSlice<f32>, xi: &CudaSlice<f32>) -> Result<()> {
        let len = (v.len() / 6) as i64;
        let mut b = self.stream.launch_builder(&self.sparse()?.project_off);
        b.arg(v).arg(xi).arg(&len);
        unsafe { b.launch(self.cfg(len as usize)) }
            .at("launch project_off")
            .map(|_| ())
    }

    /// `out[2 at..2 (at + len)] = x[2 from..2 (from + len)]` (complex values).
    pub fn copy_part(
        &self,
        out: &mut CudaSlice<f32>,
        at: usize,
        x: &CudaSlice<f32>,
        from: usize,
        len: usize,
    ) -> Result<()> {
        let src = x.slice(2 * from..2 * (from + len));
        let mut dst = out.slice_mut(2 * at..2 * (at + len));
        self.stream
            .memcpy_dtod(&src, &mut dst)
            .at("copy part device to device")
    }
}
