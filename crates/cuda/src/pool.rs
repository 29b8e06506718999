//! A GPU's memory pool, kept between allocations.
//!
//! Our buffers come from the device's default stream-ordered pool (cudarc
//! allocates with `cuMemAllocAsync`). By default that pool hands the
//! memory of freed buffers back to the driver at every synchronisation,
//! and the next allocation maps it again: a stage that makes its buffers
//! anew paid for it (F^H D's fine grid after Q's: 16 ms instead of 6 in
//! `recon bench` at 256^3, bench/h100-2026-11-27-pool). The pool now keeps what it has
//! reserved, as PyTorch's and CuPy's allocators do. What it holds unused
//! counts as free where recon checks that a stage fits, and goes back to
//! the driver (trimmed) only where an allocation would not fit without it:
//! cuFFT, which allocates outside the pool, is checked the same way.

use crate::error::Ctx;
use cudarc::driver::{sys, CudaContext};
use recon_core::Result;

/// A device's default memory pool, found once when the device is opened.
#[derive(Clone, Copy)]
pub(crate) struct Pool(sys::CUmemoryPool);

// SAFETY: a pool handle is the driver's, valid on any thread for as long
// as its device's context.
unsafe impl Send for Pool {}
unsafe impl Sync for Pool {}

impl Pool {
    /// `ctx`'s default pool, made to keep the memory of freed buffers
    /// (release threshold unbounded) instead of returning it at each
    /// synchronisation. `None` where the device has no pools (some
    /// virtualised GPUs): cudarc then allocates with plain `cuMemAlloc`,
    /// which keeps nothing.
    pub(crate) fn keep(ctx: &CudaContext) -> Result<Option<Pool>> {
        use sys::CUdevice_attribute as A;
        if ctx
            .attribute(A::CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED)
            .at("query memory pool support")?
            == 0
        {
            return Ok(None);
        }
        let mut pool: sys::CUmemoryPool = std::ptr::null_mut();
        // SAFETY: the device of an open context; pool is written by the call.
        unsafe { sys::cuDeviceGetDefaultMemPool(&mut pool, ctx.cu_device()) }
            .result()
            .at("find the default memory pool")?;
        let mut threshold = u64::MAX;
        // SAFETY: a valid pool; the attribute's value is a u64.
        unsafe {
            sys::cuMemPoolSetAttribute(
                pool,
                sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
                &mut threshold as *mut u64 as *mut std::ffi::c_void,
            )
        }
        .result()
        .at("keep the memory pool's memory")?;
        Ok(Some(Pool(pool)))
    }

    pub(crate) fn handle(self) -> sys::CUmemoryPool {
        self.0
    }

    fn attribute(self, attr: sys::CUmemPool_attribute) -> Result<u64> {
        let mut v = 0u64;
        // SAFETY: a valid pool; these attributes' values are u64.
        unsafe {
            sys::cuMemPoolGetAttribute(self.0, attr, &mut v as *mut u64 as *mut std::ffi::c_void)
        }
        .result()
        .at("query the memory pool")?;
        Ok(v)
    }

    /// Bytes the pool holds and no buffer uses.
    pub(crate) fn unused_bytes(self) -> Result<u64> {
        use sys::CUmemPool_attribute as A;
        let reserved = self.attribute(A::CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT)?;
        let used = self.attribute(A::CU_MEMPOOL_ATTR_USED_MEM_CURRENT)?;
        Ok(reserved.saturating_sub(used))
    }

    /// Gives what the pool holds unused back to the driver, once the frees
    /// queued on `ctx` so far have run (the pool cannot release a buffer
    /// whose free the host has not seen complete).
    pub(crate) fn trim(self, ctx: &CudaContext) -> Result<()> {
        ctx.synchronize()
            .at("synchronize before trimming the memory pool")?;
        // SAFETY: a valid pool.
        unsafe { sys::cuMemPoolTrimTo(self.0, 0) }
            .result()
            .at("trim the memory pool")
    }
}
