//! `recon._native`: recon's pipeline, scan files and operators for Python,
//! built on the Rust crates (PyO3), not on the binary. The Python package
//! `recon` (python/recon) wraps it: the axis orders, dtypes and argument
//! checks live there, so this module takes one layout only (the scan
//! file's: samples `[C, M]`, trajectory `[M, 3]` as (kx, ky, kz) in
//! cycles/FOV, images x fastest) and returns plain arrays and dicts.
//!
//! Key design decision: a long call ([`run::reconstruct`]) runs on a thread
//! of its own with the GIL released, while the calling thread checks for
//! Python's signals; Ctrl-C sets a flag that the pipeline's progress
//! callbacks ([`PyUi`]) turn into an unwind, so the computation stops at
//! its next stage or CG iteration, frees what it made, and the call raises
//! `KeyboardInterrupt`. Errors carry the binary's messages
//! ([`recon::error_chain`]).

use pyo3::create_exception;
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use recon_pipeline::Ui;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Duration;

mod convert;
mod operator;
mod run;
mod scan;

create_exception!(
    recon,
    ReconError,
    PyRuntimeError,
    "An error of recon's: bad input, a file it cannot read or write, a device it cannot use; the message is the binary's."
);

/// A library error as a Python exception, its causes joined as the binary
/// prints them.
pub(crate) fn py_err(e: impl std::error::Error + Send + Sync + 'static) -> PyErr {
    ReconError::new_err(recon::error_chain(&anyhow::Error::new(e)))
}

/// The unwind payload of a computation stopped by Ctrl-C.
struct Cancelled;

/// The pipeline's [`Ui`] for a Python call: messages kept for the caller,
/// progress callbacks that stop the computation once `cancel` is set.
pub(crate) struct PyUi<'a> {
    cancel: &'a AtomicBool,
    messages: Mutex<Vec<String>>,
}

impl<'a> PyUi<'a> {
    pub(crate) fn new(cancel: &'a AtomicBool) -> Self {
        PyUi {
            cancel,
            messages: Mutex::new(Vec::new()),
        }
    }

    /// Unwinds (without the panic hook's message) once cancelled.
    fn check(&self) {
        if self.cancel.load(Ordering::Relaxed) {
            std::panic::resume_unwind(Box::new(Cancelled));
        }
    }

    pub(crate) fn messages(self) -> Vec<String> {
        self.messages
            .into_inner()
            .unwrap_or_else(|e| e.into_inner())
    }
}

impl Ui for PyUi<'_> {
    fn log(&self, msg: &str) {
        self.check();
        let mut m = self.messages.lock().unwrap_or_else(|e| e.into_inner());
        m.push(msg.to_string());
    }
    fn stage<T>(&self, _: &str, f: impl FnOnce(&mut dyn FnMut(u64, u64)) -> T) -> T {
        self.check();
        f(&mut |_, _| self.check())
    }
    fn solver<T>(&self, _: usize, f: impl FnOnce(&mut dyn FnMut(usize, f64)) -> T) -> T {
        self.check();
        f(&mut |_, _| self.check())
    }
}

/// Runs `work` on a thread of its own with the GIL released, checking
/// Python's signals every 50 ms. A signal (Ctrl-C) sets the flag `work`'s
/// [`PyUi`] watches; once `work` has stopped, the signal's exception is
/// raised. A panic of `work` (a bug) becomes a [`ReconError`].
pub(crate) fn interruptible<T: Send>(
    py: Python<'_>,
    work: impl FnOnce(&AtomicBool) -> PyResult<T> + Send,
) -> PyResult<T> {
    use std::sync::mpsc::{channel, RecvTimeoutError};
    let cancel = AtomicBool::new(false);
    let (tx, rx) = channel();
    // Waited on with the GIL released (a Receiver is not Sync).
    let rx = Mutex::new(rx);
    std::thread::scope(|s| {
        let cancel = &cancel;
        s.spawn(move || {
            let done = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| work(cancel)));
            let _ = tx.send(done);
        });
        let mut interrupted: Option<PyErr> = None;
        loop {
            let wait = || {
                let rx = rx.lock().unwrap_or_else(|e| e.into_inner());
                rx.recv_timeout(Duration::from_millis(50))
            };
            match py.detach(wait) {
                Ok(done) => {
                    return match (interrupted, done) {
                        (Some(signal), _) => Err(signal),
                        (None, Ok(result)) => result,
                        (None, Err(panic)) => Err(ReconError::new_err(format!(
                            "internal error: {}",
                            panic_text(&panic)
                        ))),
                    };
                }
                Err(RecvTimeoutError::Timeout) => {
                    if interrupted.is_none() {
                        if let Err(signal) = py.check_signals() {
                            cancel.store(true, Ordering::Relaxed);
                            interrupted = Some(signal);
                        }
                    }
                }
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(ReconError::new_err(
                        "internal error: the worker thread ended",
                    ));
                }
            }
        }
    })
}

fn panic_text(p: &Box<dyn std::any::Any + Send>) -> String {
    if p.is::<Cancelled>() {
        "cancelled".into()
    } else if let Some(s) = p.downcast_ref::<&str>() {
        s.to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic".into()
    }
}

/// Runs the `recon` command line `args` (without the program's name) in
/// this process, as the binary would (outputs, report.json, the summary
/// on stdout), the scan file read here: the batch's task per scan. Raises
/// [`ReconError`] with the binary's message.
#[pyfunction]
#[pyo3(name = "run")]
fn run_command(py: Python<'_>, args: Vec<String>) -> PyResult<()> {
    py.detach(|| recon::run_hosted(&args))
        .map_err(ReconError::new_err)
}

/// The GPUs recon can use here (0 without a usable driver, NVRTC or
/// cuFFT).
#[pyfunction]
fn gpus() -> usize {
    recon_cuda::probe().unwrap_or(0)
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("ReconError", m.py().get_type::<ReconError>())?;
    m.add_function(wrap_pyfunction!(run::reconstruct, m)?)?;
    m.add_function(wrap_pyfunction!(run_command, m)?)?;
    m.add_function(wrap_pyfunction!(gpus, m)?)?;
    m.add_function(wrap_pyfunction!(scan::read_scan, m)?)?;
    m.add_function(wrap_pyfunction!(scan::write_scan, m)?)?;
    m.add_class::<operator::Operator>()?;
    Ok(())
}
