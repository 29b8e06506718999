//! Tests that run the `recon` binary: the driver, its configs and flags, its
//! files and reports, and what it does with bad input, faults and limits.
//!
//! One test binary for many files (each file a module): every binary links
//! the whole workspace, so that the suite compiles and links a few binaries
//! instead of one per file. Run one file's tests by its module name, e.g.
//! `cargo test --release --test suite_commands bad_data::`.

mod bad_data;
mod cli;
mod common;
mod config_errors;
mod driver;
mod faults;
mod formats;
mod hardening;
mod lambda;
mod limits;
mod prior;
mod readme;
mod reference;
mod scan;
mod sense_runs;
mod series;
mod stack;
