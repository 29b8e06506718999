//! Synthetic data: phantoms, trajectories, k-space simulation and noise.
//!
//! Phantoms are lists of ellipsoids read from TOML. Their k-space data come
//! from the ellipsoids' analytic Fourier transform, never from an FFT of a
//! rasterised image, so a reconstruction is never tested against the model
//! that made its data (no "inverse crime"). The true image for PSNR is the
//! phantom box-averaged onto the grid by supersampling, as in the book.
//! Receive coils ([`Coils`]) weight the phantom by sensitivities that are
//! short sums of complex exponentials, so their data stay analytic too.

mod coils;
mod noise;
mod phantom;
mod trajectory;

pub use coils::{add_coil_noise, Arrangement, CoilNoise, Coils, Sensitivity};
pub use noise::{add_noise, Noise};
pub use phantom::{Ellipsoid, Phantom};
pub use trajectory::Trajectory;

use thiserror::Error;

/// Errors of the synthesis stage.
#[derive(Debug, Error)]
pub enum SynthError {
    #[error("cannot read phantom file {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("phantom {path}: {message}")]
    Parse { path: String, message: String },
    #[error("{what}: {reason}")]
    Invalid { what: String, reason: String },
}
