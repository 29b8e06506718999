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
    /// A device (or the host) lacks the memory an operation needs. `need`
    /// and `free` are in bytes, where known.
    #[error("not enough memory on {device} for {what}{}", match (need, free) {
        (Some(n), Some(f)) => format!(": needs {:.2} GiB, {:.2} GiB free", *n as f64 / (1u64 << 30) as f64, *f as f64 / (1u64 << 30) as f64),
        _ => String::new(),
    })]
    OutOfMemory {
        device: String,
        what: String,
        need: Option<u64>,
        free: Option<u64>,
    },
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

    /// Checks that `index` lies among `len` items.
    pub fn check_index(what: &'static str, index: usize, len: usize) -> crate::Result<()> {
        if index < len {
            Ok(())
        } else {
            Err(Error::Invalid {
                what,
                reason: format!("index {index} of {len}"),
            })
        }
    }
}
