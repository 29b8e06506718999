//! Kernel launches chained by programmatic dependent launch (PDL, sm_90
//! on): the driver sets a chained kernel up while the kernel before it in
//! the stream still runs, so that its blocks start as that kernel's last
//! block exits instead of after the driver has seen it finish. The kernel
//! waits first for the one before and its writes (`prior_grids()`,
//! chain.cuh), so it computes what a plain launch would; only kernels that
//! do may be launched so. A CG iteration is eight short launches, and a
//! gap of a microsecond or two before each of the nine it had then was 4%
//! of one at 128^3 (bench/h100-2026-11-27-pdl).
//!
//! cudarc's launch builder takes no launch attributes: [`Chained`] is one
//! that does, for the chained kernels' launchers. Arguments are values
//! ([`Chained::arg`]) or device buffers ([`Chained::buf`],
//! [`Chained::buf_mut`]), in the kernel's order, borrowed until the launch.

use crate::device::Device;
use cudarc::driver::sys;
use cudarc::driver::{
    CudaFunction, DevicePtr, DevicePtrMut, DeviceRepr, DriverError, LaunchConfig,
};
use std::ffi::c_void;
use std::marker::PhantomData;
use std::sync::atomic::Ordering;

/// The most buffer arguments a chained kernel takes.
const MAX_BUFFERS: usize = 8;

/// A launch of `func` on the device's stream, chained to the kernel before
/// it where the device has PDL ([`Device::chained`]), plain elsewhere.
pub(crate) struct Chained<'a> {
    dev: &'a Device,
    func: &'a CudaFunction,
    /// The buffers' device addresses, where the kernel's parameters point
    /// (boxed: they must not move once `args` points at them).
    ptrs: Box<[sys::CUdeviceptr; MAX_BUFFERS]>,
    buffers: usize,
    args: Vec<*mut c_void>,
    /// The values and buffers borrowed until the launch.
    _borrows: PhantomData<&'a ()>,
}

impl Device {
    /// A launch of `func`, which must begin with `prior_grids()`.
    pub(crate) fn chained<'a>(&'a self, func: &'a CudaFunction) -> Chained<'a> {
        Chained {
            dev: self,
            func,
            ptrs: Box::new([0; MAX_BUFFERS]),
            buffers: 0,
            args: Vec::with_capacity(16),
            _borrows: PhantomData,
        }
    }
}

impl<'a> Chained<'a> {
    /// A value argument (a scalar, a `Map`, a null pointer as `0u64`).
    pub(crate) fn arg<T: DeviceRepr>(&mut self, v: &'a T) -> &mut Self {
        self.args.push(v as *const T as *mut c_void);
        self
    }

    /// A buffer the kernel reads.
    pub(crate) fn buf<T, P: DevicePtr<T>>(&mut self, b: &'a P) -> &mut Self {
        // Events are off on our contexts (device.rs): the guard does nothing.
        let (ptr, _record) = b.device_ptr(&self.dev.stream);
        self.push_ptr(ptr)
    }

    /// A buffer the kernel writes.
    pub(crate) fn buf_mut<T, P: DevicePtrMut<T>>(&mut self, b: &'a mut P) -> &mut Self {
        let (ptr, _record) = b.device_ptr_mut(&self.dev.stream);
        self.push_ptr(ptr)
    }

    fn push_ptr(&mut self, ptr: sys::CUdeviceptr) -> &mut Self {
        assert!(
            self.buffers < MAX_BUFFERS,
            "a chained launch takes at most {MAX_BUFFERS} buffers"
        );
        self.ptrs[self.buffers] = ptr;
        self.args
            .push(&self.ptrs[self.buffers] as *const sys::CUdeviceptr as *mut c_void);
        self.buffers += 1;
        self
    }

    /// Submits the launch to the device's stream.
    ///
    /// # Safety
    /// As cudarc's `LaunchArgs::launch`: the arguments must be the
    /// kernel's, in its order and types; and the kernel must begin with
    /// `prior_grids()`, or it could read what the kernel before has not
    /// yet written.
    pub(crate) unsafe fn launch(&mut self, cfg: LaunchConfig) -> Result<(), DriverError> {
        self.dev.ctx.bind_to_thread()?;
        // SAFETY: an all-zero attribute is a valid (ignored) one; its id
        // and value are set below.
        let mut attr: sys::CUlaunchAttribute = unsafe { std::mem::zeroed() };
        attr.id = sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
        attr.value.programmaticStreamSerializationAllowed = 1;
        let config = sys::CUlaunchConfig {
            gridDimX: cfg.grid_dim.0,
            gridDimY: cfg.grid_dim.1,
            gridDimZ: cfg.grid_dim.2,
            blockDimX: cfg.block_dim.0,
            blockDimY: cfg.block_dim.1,
            blockDimZ: cfg.block_dim.2,
            sharedMemBytes: cfg.shared_mem_bytes,
            hStream: self.dev.stream.cu_stream(),
            attrs: &mut attr,
            numAttrs: self.dev.pdl as u32,
        };
        // SAFETY: the parameters point at values and device addresses that
        // live until this call returns (the driver copies them); the rest
        // is the caller's promise.
        unsafe {
            sys::cuLaunchKernelEx(
                &config,
                self.func.cu_function(),
                self.args.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        }
        .result()?;
        self.dev.chained_count.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    /// The first statement of the body that follows `signature` in `text`,
    /// past declarations of shared memory and compile-time constants.
    fn first_statement<'a>(text: &'a str, signature: &str) -> &'a str {
        let at = text
            .find(signature)
            .unwrap_or_else(|| panic!("{signature} not found"));
        let body = &text[at + text[at..].find("\n{\n").expect("a body") + 3..];
        body.lines()
            .map(str::trim)
            .find(|l| {
                !l.is_empty()
                    && !l.starts_with("//")
                    && !l.starts_with("extern __shared__")
                    && !l.starts_with("constexpr")
            })
            .expect("a statement")
    }

    #[test]
    fn every_chained_kernel_waits_for_the_kernel_before_first() {
        // vector.cu: every kernel (vector.rs launches each chained).
        let vector = include_str!("../kernels/vector.cu");
        let names: Vec<&str> = vector
            .split("extern \"C\" __global__ void ")
            .skip(1)
            .map(|k| &k[..k.find('(').unwrap()])
            .collect();
        assert_eq!(names.len(), crate::vector::NAMES.len());
        for name in names {
            let signature = format!("__global__ void {name}(");
            assert_eq!(
                first_statement(vector, &signature),
                "prior_grids();",
                "{name}"
            );
        }
        // lines.cu: each kernel is one of four templates, each of which
        // starts with block(), which waits first.
        let stockham = include_str!("../kernels/stockham.cuh");
        assert_eq!(
            first_statement(stockham, "Block block(const float2* __restrict__ twiddles)"),
            "prior_grids();"
        );
        let lines = include_str!("../kernels/lines.cu");
        for template in [
            "void columns(",
            "void lines(",
            "void crop_dot(",
            "void pad_update(",
        ] {
            let first = first_statement(lines, template);
            assert!(
                first.starts_with("const Block b = block<"),
                "{template}: {first}"
            );
        }
        let kernels = lines.matches("__global__").count();
        let calls = ["lines<L, ", "columns<L>(", "crop_dot<L, ", "pad_update<L, "]
            .iter()
            .map(|c| lines.matches(c).count())
            .sum::<usize>();
        assert_eq!(
            kernels, calls,
            "a kernel of lines.cu that is none of the four"
        );
    }
}
