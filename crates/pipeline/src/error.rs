//! The pipeline's error: what was being done, and why it failed. Every
//! message names the config key, file or stage it is about; the binary
//! prints the chain of causes.

use std::fmt::Display;

/// An error of the pipeline.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A config value, file or input that cannot be used; the message names it.
    #[error("{0}")]
    Invalid(String),
    /// A step that failed, with what it was doing.
    #[error("{what}")]
    Context {
        what: String,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync + 'static>,
    },
    #[error(transparent)]
    Core(#[from] recon_core::Error),
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error(transparent)]
    Scan(#[from] recon_io::IoError),
    #[error(transparent)]
    Synth(#[from] recon_synth::SynthError),
    /// An error of a caller's own (its scan reader's), passed through.
    #[error(transparent)]
    Other(Box<dyn std::error::Error + Send + Sync + 'static>),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What a failed step was doing, as its message's first line.
pub trait Context<T> {
    fn context(self, what: impl Display) -> Result<T>;
    fn with_context<D: Display>(self, what: impl FnOnce() -> D) -> Result<T>;
}

impl<T> Context<T> for Option<T> {
    fn context(self, what: impl Display) -> Result<T> {
        self.ok_or_else(|| Error::Invalid(what.to_string()))
    }

    fn with_context<D: Display>(self, what: impl FnOnce() -> D) -> Result<T> {
        self.ok_or_else(|| Error::Invalid(what().to_string()))
    }
}

impl<T, E: std::error::Error + Send + Sync + 'static> Context<T> for std::result::Result<T, E> {
    fn context(self, what: impl Display) -> Result<T> {
        self.map_err(|e| Error::Context {
            what: what.to_string(),
            source: Box::new(e),
        })
    }

    fn with_context<D: Display>(self, what: impl FnOnce() -> D) -> Result<T> {
        self.map_err(|e| Error::Context {
            what: what().to_string(),
            source: Box::new(e),
        })
    }
}

/// Returns an [`Error::Invalid`] with the formatted message.
#[macro_export]
macro_rules! bail {
    ($($t:tt)*) => {
        return Err($crate::Error::Invalid(format!($($t)*)))
    };
}
