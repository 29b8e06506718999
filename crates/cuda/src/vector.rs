//! vector.cu's kernels and their typed launchers: CG's vector updates
//! (with coefficients from scalars on the device), the coil maps, padding
//! and cropping, the fixed two-pass dot product and the W^H W stencil.

use crate::device::{Device, REDUCE_BLOCKS, REDUCE_THREADS};
use crate::error::Ctx;
use cudarc::driver::{CudaFunction, CudaSlice, LaunchConfig};
use recon_core::{Error, Ratio, Result};

/// Every kernel of vector.cu, in the order of `Kernels::load`.
pub(crate) const NAMES: [&str; 15] = [
    "axpy",
    "xpby",
    "mul_scaled",
    "coil",
    "pad",
    "crop",
    "dot_partial",
    "sum_partials",
    "scale",
    "add_whw",
    "inverse_sum",
    "real_part",
    "axpy_norm_partial",
    "cg_update",
    "add_whw_dot_partial",
];

pub(crate) struct Kernels {
    axpy: CudaFunction,
    xpby: CudaFunction,
    mul_scaled: CudaFunction,
    coil: CudaFunction,
    pad: CudaFunction,
    crop: CudaFunction,
    dot_partial: CudaFunction,
    sum_partials: CudaFunction,
    scale: CudaFunction,
    add_whw: CudaFunction,
    inverse_sum: CudaFunction,
    real_part: CudaFunction,
    axpy_norm_partial: CudaFunction,
    cg_update: CudaFunction,
    add_whw_dot_partial: CudaFunction,
}

impl Kernels {
    pub(crate) fn load(modules: &crate::modules::Modules) -> Result<Self> {
        let funcs = modules.functions(
            &crate::kernels::Module::whole(crate::kernels::VECTOR),
            &NAMES,
        )?;
        let [axpy, xpby, mul_scaled, coil, pad, crop, dot_partial, sum_partials, scale, add_whw, inverse_sum, real_part, axpy_norm_partial, cg_update, add_whw_dot_partial]: [CudaFunction; NAMES.len()] =
            funcs.try_into().expect("one function per name");
        Ok(Kernels {
            axpy,
            xpby,
            mul_scaled,
            coil,
            pad,
            crop,
            dot_partial,
            sum_partials,
            scale,
            add_whw,
            inverse_sum,
            real_part,
            axpy_norm_partial,
            cg_update,
            add_whw_dot_partial,
        })
    }
}

/// A coefficient's slots `[num, den, floor]` as the kernels take them.
pub(crate) fn slots_of(r: Ratio) -> [i32; 3] {
    [r.num, r.den, r.floor].map(|v| v as i32)
}

/// Threads of `sum_partials`'s one block (vector.cu's SUM_THREADS).
const SUM_THREADS: u32 = 1024;

/// The first pass of a reduction: a partial sum per block.
fn reduce_cfg() -> LaunchConfig {
    LaunchConfig {
        grid_dim: (REDUCE_BLOCKS as u32, 1, 1),
        block_dim: (REDUCE_THREADS, 1, 1),
        shared_mem_bytes: 0,
    }
}

impl Device {
    /// `y = y + a c x`, with c = `ratio.of(s)`, or 1 without scalars.
    pub fn axpy(
        &self,
        y: &mut CudaSlice<f32>,
        a: f64,
        ratio: Option<(Ratio, &CudaSlice<f64>)>,
        x: &CudaSlice<f32>,
    ) -> Result<()> {
        let n = (y.len() / 2) as i64;
        let null = 0u64;
        let mut b = self.chained(&self.vector()?.axpy);
        b.buf_mut(y).arg(&a);
        let slots = ratio.map(|(r, _)| r).unwrap_or(Ratio {
            num: 0,
            den: 0,
            floor: 0,
        });
        let [num, den, floor] = slots_of(slots);
        match ratio {
            Some((_, s)) => b.buf(s),
            None => b.arg(&null),
        };
        b.arg(&num).arg(&den).arg(&floor).buf(x).arg(&n);
        unsafe { b.launch(self.cfg(n as usize)) }
            .at("launch axpy")
            .map(|_| ())
    }

    /// `y = x + c y`, with c = `ratio.of(s)`.
    pub fn xpby(
        &self,
        y: &mut CudaSlice<f32>,
        x: &CudaSlice<f32>,
        ratio: Ratio,
        s: &CudaSlice<f64>,
    ) -> Result<()> {
        let n = (y.len() / 2) as i64;
        let [num, den, floor] = slots_of(ratio);
        let mut b = self.chained(&self.vector()?.xpby);
        b.buf_mut(y)
            .buf(x)
            .buf(s)
            .arg(&num)
            .arg(&den)
            .arg(&floor)
            .arg(&n);
        unsafe { b.launch(self.cfg(n as usize)) }
            .at("launch xpby")
            .map(|_| ())
    }

    /// `out = re x`: `out` holds one real per complex value of `x`.
    pub fn real_part(&self, out: &mut CudaSlice<f32>, x: &CudaSlice<f32>) -> Result<()> {
        let n = out.len() as i64;
        Error::check_len("real part", 2 * out.len(), x.len())?;
        let mut b = self.chained(&self.vector()?.real_part);
        b.buf_mut(out).buf(x).arg(&n);
        unsafe { b.launch(self.cfg(n as usize)) }
            .at("launch real_part")
            .map(|_| ())
    }

    pub fn mul_scaled(&self, x: &mut CudaSlice<f32>, y: &CudaSlice<f32>, scale: f32) -> Result<()> {
        let n = (x.len() / 2) as i64;
        let mut b = self.chained(&self.vector()?.mul_scaled);
        b.buf_mut(x).buf(y).arg(&scale).arg(&n);
        unsafe { b.launch(self.cfg(n as usize)) }
            .at("launch mul")
            .map(|_| ())
    }

    /// `out = 1 / (re a + rho re b)`, real.
    pub fn inverse_sum(
        &self,
        out: &mut CudaSlice<f32>,
        a: &CudaSlice<f32>,
        rho: f64,
        b: &CudaSlice<f32>,
    ) -> Result<()> {
        let n = (out.len() / 2) as i64;
        let mut l = self.chained(&self.vector()?.inverse_sum);
        l.buf_mut(out).buf(a).buf(b).arg(&rho).arg(&n);
        unsafe { l.launch(self.cfg(n as usize)) }
            .at("launch inverse_sum")
            .map(|_| ())
    }

    /// A coil's map applied to x (`CoilOp` as 0, 1, 2).
    pub fn coil(
        &self,
        out: &mut CudaSlice<f32>,
        op: i32,
        s: &CudaSlice<f32>,
        x: &CudaSlice<f32>,
    ) -> Result<()> {
        let n = (out.len() / 2) as i64;
        let mut b = self.chained(&self.vector()?.coil);
        b.buf_mut(out).arg(&op).buf(s).buf(x).arg(&n);
        unsafe { b.launch(self.cfg(n as usize)) }
            .at("launch coil")
            .map(|_| ())
    }

    /// The 2n grid `out` = x zero-padded (one plane along a flat z).
    pub fn pad(&self, out: &mut CudaSlice<f32>, x: &CudaSlice<f32>, n: [usize; 3]) -> Result<()> {
        let [nx, ny, nz] = n.map(|v| v as i32);
        let mut b = self.chained(&self.vector()?.pad);
        b.buf_mut(out).buf(x).arg(&nx).arg(&ny).arg(&nz);
        // Rows of out: 2ny per plane, 2nz planes (one along a flat z).
        let planes = recon_core::doubled(n)[2];
        unsafe { b.launch(self.rows_cfg(2 * n[1] * planes, 2 * n[0])) }
            .at("launch pad")
            .map(|_| ())
    }

    pub fn crop(&self, out: &mut CudaSlice<f32>, x: &CudaSlice<f32>, n: [usize; 3]) -> Result<()> {
        let [nx, ny, nz] = n.map(|v| v as i32);
        let mut b = self.chained(&self.vector()?.crop);
        b.buf_mut(out).buf(x).arg(&nx).arg(&ny).arg(&nz);
        unsafe { b.launch(self.rows_cfg(n[1] * n[2], n[0])) }
            .at("launch crop")
            .map(|_| ())
    }

    /// `Re <x, y>`, read back to the host.
    pub fn dot_re(&self, x: &CudaSlice<f32>, y: &CudaSlice<f32>) -> Result<f64> {
        let mut out = self.zeros::<f64>(1)?;
        self.dot_re_to(&mut out, 0, x, y)?;
        let mut host = [0.0f64];
        self.stream
            .memcpy_dtoh(&out, &mut host)
            .at("copy dot product to host")?;
        self.stream.synchronize().at("synchronize after dot")?;
        Ok(host[0])
    }

    /// `s[slot] = Re <x, y>`, by two fixed passes (a partial sum per block,
    /// then their sum by one block), left on the device.
    pub fn dot_re_to(
        &self,
        s: &mut CudaSlice<f64>,
        slot: usize,
        x: &CudaSlice<f32>,
        y: &CudaSlice<f32>,
    ) -> Result<()> {
        let n = (x.len() / 2) as i64;
        let mut partial = self.partial.lock().expect("reduction buffer poisoned");
        let mut b = self.chained(&self.vector()?.dot_partial);
        b.buf_mut(&mut *partial).buf(x).buf(y).arg(&n);
        unsafe { b.launch(reduce_cfg()) }.at("launch dot_partial")?;
        self.sum_partials_to(s, slot, &partial)
    }

    /// `s[slot]` = the sum of the first pass's partial sums (every value of
    /// `partial`), by one block in a fixed order.
    pub(crate) fn sum_partials_to(
        &self,
        s: &mut CudaSlice<f64>,
        slot: usize,
        partial: &CudaSlice<f64>,
    ) -> Result<()> {
        let mut out = s.slice_mut(slot..slot + 1);
        let count = partial.len() as i32;
        let mut b = self.chained(&self.vector()?.sum_partials);
        b.buf_mut(&mut out).buf(partial).arg(&count);
        let one = LaunchConfig {
            grid_dim: (1, 1, 1),
            block_dim: (SUM_THREADS, 1, 1),
            shared_mem_bytes: 0,
        };
        unsafe { b.launch(one) }
            .at("launch sum_partials")
            .map(|_| ())
    }

    /// `y = y + a c x` (c = `ratio.of(s)`), then `s[slot] = <y, y>`, in
    /// one pass over the vectors (and the sum of its partial sums, as
    /// [`Device::dot_re_to`]).
    #[allow(clippy::too_many_arguments)]
    pub fn axpy_norm_to(
        &self,
        y: &mut CudaSlice<f32>,
        a: f64,
        ratio: Ratio,
        s: &mut CudaSlice<f64>,
        x: &CudaSlice<f32>,
        slot: usize,
    ) -> Result<()> {
        let n = (y.len() / 2) as i64;
        let [num, den, floor] = slots_of(ratio);
        let mut partial = self.partial.lock().expect("reduction buffer poisoned");
        let mut b = self.chained(&self.vector()?.axpy_norm_partial);
        b.buf_mut(&mut *partial)
            .buf_mut(y)
            .arg(&a)
            .buf(&*s)
            .arg(&num)
            .arg(&den)
            .arg(&floor)
            .buf(x)
            .arg(&n);
        unsafe { b.launch(reduce_cfg()) }.at("launch axpy_norm_partial")?;
        self.sum_partials_to(s, slot, &partial)
    }

    /// `x = x + a c p`, then `p = r + d p` (c = `step.of(s)`, d =
    /// `beta.of(s)`), in one pass.
    #[allow(clippy::too_many_arguments)]
    pub fn cg_update(
        &self,
        x: &mut CudaSlice<f32>,
        a: f64,
        step: Ratio,
        p: &mut CudaSlice<f32>,
        r: &CudaSlice<f32>,
        beta: Ratio,
        s: &CudaSlice<f64>,
    ) -> Result<()> {
        let n = (x.len() / 2) as i64;
        let [step_num, step_den, floor] = slots_of(step);
        let [beta_num, beta_den, _] = slots_of(beta);
        let mut b = self.chained(&self.vector()?.cg_update);
        b.buf_mut(x)
            .buf_mut(p)
            .buf(r)
            .arg(&a)
            .buf(s)
            .arg(&step_num)
            .arg(&step_den)
            .arg(&beta_num)
            .arg(&beta_den)
            .arg(&floor)
            .arg(&n);
        unsafe { b.launch(self.cfg(n as usize)) }
            .at("launch cg_update")
            .map(|_| ())
    }

    /// x = s x
    pub(crate) fn scale(&self, x: &mut CudaSlice<f32>, s: f32) -> Result<()> {
        let n = (x.len() / 2) as i64;
        let mut b = self.chained(&self.vector()?.scale);
        b.buf_mut(x).arg(&s).arg(&n);
        unsafe { b.launch(self.cfg(n as usize)) }
            .at("launch scale")
            .map(|_| ())
    }

    /// `out = out + a W^H W x`.
    pub fn add_whw(
        &self,
        out: &mut CudaSlice<f32>,
        a: f32,
        x: &CudaSlice<f32>,
        w: &crate::CudaWeights,
    ) -> Result<()> {
        let n = w.n.map(|v| v as i32);
        let mut b = self.chained(&self.vector()?.add_whw);
        whw_args(&mut b, out, &a, x, w, &n);
        // A block a row of x.
        unsafe { b.launch(self.rows_cfg(w.n[1] * w.n[2], w.n[0])) }
            .at("launch add_whw")
            .map(|_| ())
    }

    /// [`Device::add_whw`] and `s[slot] = <x, out>` in the same pass
    /// (partial sums per block, then their sum in a fixed order, as
    /// [`Device::dot_re_to`]).
    pub fn add_whw_dot_to(
        &self,
        out: &mut CudaSlice<f32>,
        a: f32,
        x: &CudaSlice<f32>,
        w: &crate::CudaWeights,
        s: &mut CudaSlice<f64>,
        slot: usize,
    ) -> Result<()> {
        let n = w.n.map(|v| v as i32);
        let mut partial = self.partial.lock().expect("reduction buffer poisoned");
        let mut b = self.chained(&self.vector()?.add_whw_dot_partial);
        b.buf_mut(&mut *partial);
        whw_args(&mut b, out, &a, x, w, &n);
        unsafe { b.launch(reduce_cfg()) }.at("launch add_whw_dot_partial")?;
        self.sum_partials_to(s, slot, &partial)
    }
}

/// The arguments add_whw and add_whw_dot_partial share, after the latter's
/// partial sums: out, a, x, the squared edge weights and diagonal (null
/// pointers where absent), the grid `n`.
fn whw_args<'a>(
    b: &mut crate::launch::Chained<'a>,
    out: &'a mut CudaSlice<f32>,
    a: &'a f32,
    x: &'a CudaSlice<f32>,
    w: &'a crate::CudaWeights,
    n: &'a [i32; 3],
) {
    const NULL: u64 = 0;
    b.buf_mut(out).arg(a).buf(x);
    match &w.w2 {
        Some([wx, wy, wz]) => b.buf(wx).buf(wy).buf(wz),
        None => b.arg(&NULL).arg(&NULL).arg(&NULL),
    };
    match &w.d2 {
        Some(d) => b.buf(d),
        None => b.arg(&NULL),
    };
    b.arg(&n[0]).arg(&n[1]).arg(&n[2]);
}

#[cfg(test)]
mod tests {
    #[test]
    fn sum_partials_launches_the_threads_its_kernel_strides_by() {
        // A launch of fewer threads than vector.cu's loop strides by
        // would leave parts out of the sum.
        let define = format!("#define SUM_THREADS {}", super::SUM_THREADS);
        assert!(
            include_str!("../kernels/vector.cu").contains(&define),
            "{define}"
        );
    }
}
