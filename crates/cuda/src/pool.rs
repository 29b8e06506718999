//! A GPU's memory pool, kept between allocations.
//!
//! Our buffers come from the device's default stream-ordered pool (cudarc
//! allocates with `cuMemAllocAsync`). By default that pool hands the
//! memory of freed buffers back to the driver at every synchronisation,
//! and the next allocation maps it again: every stage that makes its
//! buffers anew (F^H D's fine grid after Q's, the gridding's plans, each
//! build of `recon bench`) paid for it. The pool now keeps what it has
//! reserved, as PyTorch's and CuPy's allocators do. What it holds unused
//! counts as free where recon checks that a stage fits, and goes back to
//! the driver (trimmed) only where an allocation would not fit without it:
//! cuFFT, which allocates outside the pool, is checked the same way.

use crate::error::Ctx;
use cudarc::driver::{sys, CudaContext};
use recon_core::Result;

/// Whether `ctx`'s device has memory pools. Where it has none (some
/// virtualised GPUs), cudarc allocates with plain `cuMemAlloc`, which keeps
/// nothing: there is no pool to keep, count or trim.
pub(crate) fn supported(ctx: &CudaContext) -> Result<bool> {
    use sys::CUdevice_attribute as A;
    Ok(ctx
        .attribute(A::CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED)
        .at("query memory pool support")?
        != 0)
}

/// The default memory pool of `ctx`'s device (which must have pools).
pub(crate) fn default_pool(ctx: &CudaContext) -> Result<sys::CUmemoryPool> {
    let mut pool: sys::CUmemoryPool = std::ptr::null_mut();
    // SAFETY: the device of an open context; pool is written by the call.
    unsafe { sys::cuDeviceGetDefaultMemPool(&mut pool, ctx.cu_device()) }
        .result()
        .at("find the default memory pool")?;
    Ok(pool)
}

/// Makes `ctx`'s pool keep the memory of freed buffers (release threshold
/// unbounded) instead of returning it at each synchronisation.
pub(crate) fn keep(ctx: &CudaContext) -> Result<()> {
    if !supported(ctx)? {
        return Ok(());
    }
    let pool = default_pool(ctx)?;
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
    .at("keep the memory pool's memory")
}

fn attribute(pool: sys::CUmemoryPool, attr: sys::CUmemPool_attribute) -> Result<u64> {
    let mut v = 0u64;
    // SAFETY: a valid pool; these attributes' values are u64.
    unsafe { sys::cuMemPoolGetAttribute(pool, attr, &mut v as *mut u64 as *mut std::ffi::c_void) }
        .result()
        .at("query the memory pool")?;
    Ok(v)
}

/// Bytes the pool of `ctx`'s device holds and no buffer uses.
pub(crate) fn unused_bytes(ctx: &CudaContext) -> Result<u64> {
    use sys::CUmemPool_attribute as A;
    if !supported(ctx)? {
        return Ok(0);
    }
    let pool = default_pool(ctx)?;
    let reserved = attribute(pool, A::CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT)?;
    let used = attribute(pool, A::CU_MEMPOOL_ATTR_USED_MEM_CURRENT)?;
    Ok(reserved.saturating_sub(used))
}

/// Gives what the pool holds unused back to the driver, once the frees
/// queued so far have run (the pool cannot release a buffer whose free the
/// host has not seen complete).
pub(crate) fn trim(ctx: &CudaContext) -> Result<()> {
    if !supported(ctx)? {
        return Ok(());
    }
    ctx.synchronize()
        .at("synchronize before trimming the memory pool")?;
    let pool = default_pool(ctx)?;
    // SAFETY: a valid pool.
    unsafe { sys::cuMemPoolTrimTo(pool, 0) }
        .result()
        .at("trim the memory pool")
}
