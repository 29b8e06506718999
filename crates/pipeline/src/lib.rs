//! `recon-pipeline`: a reconstruction from a config to its images, as a
//! library, so that the command line, the benchmarks, the validation and a
//! Python package all run the same code.
//!
//! A config is read and checked once ([`config::load`]); its inputs are
//! synthesised or read ([`inputs`]); the builder ([`build`]) turns the
//! config and inputs into the run's problem once: the encoding plan, Q
//! through its cache, F^H D and FFT(Q) on the device, the coil maps and the
//! prior, each stage timed. [`reconstruct`] is the builder, the solve and
//! the gridding baseline. Key design decision: the library never prints and
//! owns no terminal. Progress and messages go through [`Ui`] (the binary
//! implements it with progress bars), warnings come back as values, and
//! errors are typed ([`Error`]), each naming the config key, file or stage
//! it is about.

pub mod backend;
mod batch;
mod build;
mod coils;
pub mod config;
mod error;
mod inputs;
mod kernel_files;
pub mod lambda;
mod memory;
mod run;
pub mod scan;
mod series;
mod solve;
mod stack;

pub use backend::{
    backend_for, choose_backend, may_open_gpu, settle, small_for_gpu, warm_gpu, workload, Chosen,
};
pub use build::{build, build_with, solver_params, BuildParams, Built};
pub use coils::{
    espirit_from_data, gridder, maps_from_data, prepare, stage_maps, stage_problem, Prepared,
};
pub use error::{Context, Error, Result};
pub use inputs::{inputs, normalise, prepared, raw_inputs, trajectory, truth_seen, Inputs, Raw};
pub use kernel_files::KernelFiles;
pub use memory::{
    check_device_memory, check_host_memory, check_memory, check_memory_holding,
    inputs_before_device, samples, Work,
};
pub use run::{
    gridding, plan, q_only, quality, reconstruct, stage_fhd, stage_q, AtEnd, Outputs, Part,
    Quality, Ready,
};
pub use scan::{read_in_process, read_scan, units_warning, Kind, ReadScan, Units};
pub use series::{geometry, read_first, reconstruct_series, reconstruct_series_from, split, Image};
pub use solve::{regulariser, solve, sparse, Regulariser, Solved, SparsePrior};

pub use run::from_f64;

/// How the pipeline reports progress; the binary implements it with indicatif.
pub trait Ui {
    /// A one-line message (stderr).
    fn log(&self, msg: &str);
    /// Runs `f` with a progress callback `(done, total)` for a named stage.
    fn stage<T>(&self, name: &str, f: impl FnOnce(&mut dyn FnMut(u64, u64)) -> T) -> T;
    /// Runs CG with a callback `(iteration, relative residual)`.
    fn solver<T>(&self, iterations: usize, f: impl FnOnce(&mut dyn FnMut(usize, f64)) -> T) -> T;
}

/// Shows nothing: for a benchmark's repeats, and tests.
pub struct Silent;

impl Ui for Silent {
    fn log(&self, _: &str) {}
    fn stage<T>(&self, _: &str, f: impl FnOnce(&mut dyn FnMut(u64, u64)) -> T) -> T {
        f(&mut |_, _| {})
    }
    fn solver<T>(&self, _: usize, f: impl FnOnce(&mut dyn FnMut(usize, f64)) -> T) -> T {
        f(&mut |_, _| {})
    }
}
