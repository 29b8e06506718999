//! The GPU's tests against the CPU in float64; each prints that it was
//! skipped where no GPU is found.
//!
//! One test binary for many files (each file a module): every binary links
//! the whole workspace, so that the suite compiles and links a few binaries
//! instead of one per file. Run one file's tests by its module name, e.g.
//! `cargo test --release --test suite_gpu gpu::`.

mod common;
mod gpu;
mod gpu_fold;
mod gpu_nufft;
mod gpu_ops;
mod gpu_solver;
mod gpu_stack;
