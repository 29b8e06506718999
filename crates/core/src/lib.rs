//! Shared types of `recon` and the one trait that separates CPU from GPU.
//!
//! Everything the pipeline computes reduces to a few device primitives: the
//! summation engine `out[n] = sum_m c_m exp(±i 2pi k_m . x_n)` (used by both Q
//! and F^H D), complex vector arithmetic, 3-D FFTs, and the W^H W stencil.
//! Those primitives form the [`Backend`] trait; Q, F^H D, the Toeplitz normal
//! operator and conjugate gradient are written once on top of it. The CPU
//! implementation ([`CpuBackend`], f32 or f64, rayon + rustfft) is the
//! reference that every other backend is checked against.
//!
//! Conventions (see the README): arrays are stored x-fastest, i.e. as
//! `[Nz, Ny, Nx]` in C order; k-space positions are in cycles/FOV; voxel
//! centres are `x_i = (i - N/2) FOV / N`.

mod backend;
pub mod cpu;
mod error;
mod grid;
pub mod memory;
pub mod metrics;
mod real;
mod stencil;

pub use backend::{
    fft_q_by_pieces, toeplitz_by_pieces, toeplitz_coil_by_pieces, toeplitz_dot_by_pieces, Backend,
    CgStep, CoilOp, Direction, GroupProx, NufftUse, Ratio, Sign, Targets, Workload,
};
pub use cpu::{CpuBackend, Plan3};
pub use error::Error;
pub use grid::{
    doubled, index3, invert_affine, matrix_problem, sinc, undoubled, Basis, Grid, Lattice,
    Oriented, Volume,
};
pub use num_complex::Complex;
pub use real::Real;
pub use stencil::Stencil;

/// Version of the summation engine's arithmetic. It is part of the Q cache
/// key: bump it whenever a change could alter Q's values.
pub const ENGINE_VERSION: u32 = 1;

/// The largest matrix size along an axis, for every grid recon makes or
/// reads (configs, scan files, ISMRMRD headers, the benchmark): so that
/// every size product fits in 64 bits with room to spare (the doubled grid
/// of 2048^3 voxels has 2^33).
pub const MAX_N: usize = 1024;

/// The most k-space samples recon accepts from any source.
pub const MAX_SAMPLES: usize = 1 << 31;

/// Result type of the library crates.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A progress callback: `(done, total)` in units of the stage's choosing.
/// Library crates report through it and never print.
pub type Progress<'a> = &'a mut dyn FnMut(u64, u64);
