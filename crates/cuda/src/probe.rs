//! Whether the CUDA backend can run here: the driver, a device, NVRTC and
//! cuFFT, checked without letting cudarc panic on a missing library.

/// Why the CUDA backend cannot run here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unavailable(pub String);

impl std::fmt::Display for Unavailable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Checks that libcuda, NVRTC and cuFFT load and a device exists, without
/// panicking; returns the device count.
pub fn probe() -> std::result::Result<usize, Unavailable> {
    // SAFETY: these only try to dlopen the libraries.
    if !unsafe { cudarc::driver::sys::is_culib_present() } {
        return Err(Unavailable("no NVIDIA driver (libcuda) found".into()));
    }
    let count = cudarc::driver::CudaContext::device_count()
        .map_err(|e| Unavailable(format!("the CUDA driver found no usable device ({e:?})")))?;
    if count < 1 {
        return Err(Unavailable("the CUDA driver reports no device".into()));
    }
    if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        return Err(Unavailable(
            "libnvrtc (CUDA 13) not found: install the CUDA toolkit or add its lib64 to LD_LIBRARY_PATH".into(),
        ));
    }
    if !unsafe { cudarc::cufft::sys::is_culib_present() } {
        return Err(Unavailable(
            "libcufft (CUDA 13) not found: install the CUDA toolkit or add its lib64 to LD_LIBRARY_PATH".into(),
        ));
    }
    Ok(count as usize)
}
