use thiserror::Error;

/// Errors of the core primitives and the backends.
#[derive(Debug, Error)]
pub enum Error {
    /// An argument's size disagrees with what the operation needs.
    #[error("{what}: expected length {expected}, got {got}")]
    Length {
        what: &'static str,
        expected: usize,
        got: usize,
    },
    /// A value outside the range the operation supports.
    #[error("{what}: {reason}")]
    Invalid { what: &'static str, reason: String },
    /// A failure inside a device backend (CUDA driver, NVRTC, cuFFT, ...),
    /// naming the operation that failed.
    #[error("{backend} backend: {op} failed: {reason}")]
    Device {
        backend: &'static str,
        op: String,
        reason: String,
    },
}

impl Error {
    /// Checks a length at a public boundary.
    pub fn check_len(what: &'static str, expected: usize, got: usize) -> crate::Result<()> {
        if expected == got {
            Ok(())
        } else {
            Err(Error::Length {
                what,
                expected,
                got,
            })
        }
    }
}
