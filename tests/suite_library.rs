//! The library crates' tests across crates: operators, solvers, priors, the
//! NUFFT against the exact engine, SENSE, the Q cache, the readers' fuzzers.
//!
//! One test binary for many files (each file a module): every binary links
//! the whole workspace, so that the suite compiles and links a few binaries
//! instead of one per file. Run one file's tests by its module name, e.g.
//! `cargo test --release --test suite_library encoding_op::`.

mod common;
mod encoding_op;
mod fuzz_hdf5;
mod fuzz_ismrmrd;
mod fuzz_text;
mod operators;
mod ops;
mod parboil;
mod planar;
mod q_cache;
mod sense;
mod sense_shards;
mod sharded;
mod solver;
mod tv_reference;
mod wavelet;
