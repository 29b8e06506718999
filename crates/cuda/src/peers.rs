//! Copies between the GPUs of a host: peer access (contexts and memory
//! pools), and the copy that orders itself after both devices' queues.

use crate::device::Device;
use crate::error::Ctx;
use cudarc::driver::CudaSlice;
use recon_core::Result;

/// Lets `a` and `b` read each other's memory directly (over NVLink or
/// PCIe), so that copies between them need not pass through the host;
/// where the hardware cannot, the copies still work, staged by the driver
/// (an H200 pair: 35 GB/s staged, 330 GB/s direct). Our buffers come from
/// each device's default memory pool (cudarc allocates stream-ordered),
/// whose peers need their own grant beside the contexts'.
pub(crate) fn enable_peer_access(a: &mut Device, b: &mut Device) -> Result<()> {
    a.peers |= grant(a, b)?;
    b.peers |= grant(b, a)?;
    Ok(())
}

/// Lets `x` read `y`'s memory, where the hardware can; returns whether it
/// can.
fn grant(x: &Device, y: &Device) -> Result<bool> {
    use cudarc::driver::sys;
    let mut can = 0;
    // SAFETY: both are valid devices of open contexts.
    unsafe { sys::cuDeviceCanAccessPeer(&mut can, x.ctx.cu_device(), y.ctx.cu_device()) }
        .result()
        .at("query peer access")?;
    if can == 0 {
        return Ok(false);
    }
    x.ctx.bind_to_thread().at("bind context")?;
    // SAFETY: y's context is alive (held by y).
    match unsafe { sys::cuCtxEnablePeerAccess(y.ctx.cu_ctx(), 0) } {
        sys::CUresult::CUDA_SUCCESS | sys::CUresult::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED => {}
        e => {
            return Err(crate::error::err(
                format!("enable peer access GPU {} to GPU {}", x.ordinal, y.ordinal),
                e,
            ))
        }
    }
    // y's pool grants x's device access to what it allocates (a device
    // without pools allocates plainly, which the contexts' access covers).
    let Some(pool) = y.pool else {
        return Ok(true);
    };
    let grant = sys::CUmemAccessDesc {
        location: sys::CUmemLocation {
            type_: sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE,
            id: x.ctx.cu_device(),
        },
        flags: sys::CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
    };
    // SAFETY: one valid descriptor.
    unsafe { sys::cuMemPoolSetAccess(pool.handle(), &grant, 1) }
        .result()
        .at(&format!(
            "grant GPU {} access to GPU {}'s memory pool",
            x.ordinal, y.ordinal
        ))?;
    Ok(true)
}

impl Device {
    /// `out = x`, `out` on this device and `x` on `from`, without the host
    /// waiting: the copy runs on this device's stream after the work issued
    /// on `from`'s so far (cudarc makes the stream wait), and `from`'s
    /// stream waits for the copy before it may write `x` again.
    pub fn transfer(
        &self,
        out: &mut CudaSlice<f32>,
        from: &Device,
        x: &CudaSlice<f32>,
    ) -> Result<()> {
        if self.ordinal == from.ordinal {
            return self.copy(out, x);
        }
        let what = format!("copy GPU {} to GPU {}", from.ordinal, self.ordinal);
        self.stream.memcpy_dtod(x, out).at(&what)?;
        from.stream.join(&self.stream).at(&what)
    }
}
