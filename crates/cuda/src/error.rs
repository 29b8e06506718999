//! CUDA failures as recon-core errors that name the operation; running out
//! of device memory is an error of its own, so callers can say what would
//! fit.

use recon_core::Error;
use std::fmt::Debug;

/// A CUDA failure, naming the operation. The driver's and cuFFT's
/// out-of-memory codes become [`Error::OutOfMemory`].
pub(crate) fn err(op: impl std::fmt::Display, e: impl Debug) -> Error {
    let reason = format!("{e:?}");
    if reason.contains("OUT_OF_MEMORY") || reason.contains("ALLOC_FAILED") {
        return Error::OutOfMemory {
            device: "the GPU".into(),
            what: op.to_string(),
            need: None,
            free: None,
        };
    }
    Error::Device {
        backend: "CUDA",
        op: op.to_string(),
        reason,
    }
}

/// `.at("operation")` on any driver, NVRTC or cuFFT result.
pub(crate) trait Ctx<T> {
    fn at(self, op: &str) -> recon_core::Result<T>;
}

impl<T, E: Debug> Ctx<T> for std::result::Result<T, E> {
    fn at(self, op: &str) -> recon_core::Result<T> {
        self.map_err(|e| err(op, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn out_of_memory_codes_become_their_own_error() {
        let e = err(
            "allocate a vector",
            "DriverError(CUDA_ERROR_OUT_OF_MEMORY, \"out of memory\")",
        );
        assert!(matches!(e, Error::OutOfMemory { .. }), "{e}");
        assert!(e.to_string().contains("allocate a vector"), "{e}");
        let e = err("launch", "DriverError(CUDA_ERROR_INVALID_VALUE)");
        assert!(matches!(e, Error::Device { .. }), "{e}");
    }
}
