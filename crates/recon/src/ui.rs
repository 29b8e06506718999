//! The binary's [`Ui`]: progress bars on stderr where it is a terminal,
//! one log line per stage where it is not; `-q` shows neither (warnings and
//! errors still), `-v` log lines everywhere, each after the seconds since
//! the start, and every CG iteration.

use crate::pipeline::Ui;
use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Instant;

/// How much the binary says on stderr.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verbosity {
    Quiet = 0,
    Normal = 1,
    Verbose = 2,
}

static VERBOSITY: AtomicU8 = AtomicU8::new(Verbosity::Normal as u8);

/// Sets the process's verbosity (`-q`, `-v`), once, before any output.
pub(crate) fn set_verbosity(v: Verbosity) {
    VERBOSITY.store(v as u8, Ordering::Relaxed);
}

pub(crate) fn verbosity() -> Verbosity {
    match VERBOSITY.load(Ordering::Relaxed) {
        0 => Verbosity::Quiet,
        1 => Verbosity::Normal,
        _ => Verbosity::Verbose,
    }
}

/// Whether progress is shown as log lines (stderr not a terminal, or `-v`)
/// rather than as bars.
fn as_lines() -> bool {
    verbosity() == Verbosity::Verbose || !std::io::stderr().is_terminal()
}

/// Progress bars on stderr; hidden automatically when stderr is not a terminal.
pub(crate) struct Bars;

impl Ui for Bars {
    fn log(&self, msg: &str) {
        if verbosity() != Verbosity::Quiet {
            line(format_args!("{msg}"));
        }
    }

    fn stage<T>(&self, name: &str, f: impl FnOnce(&mut dyn FnMut(u64, u64)) -> T) -> T {
        if verbosity() == Verbosity::Quiet {
            return f(&mut |_, _| {});
        }
        if as_lines() {
            return logged_stage(name, f);
        }
        let bar = ProgressBar::new(1).with_style(
            ProgressStyle::with_template(
                "{prefix:>8} [{bar:40}] {percent:>3}% {elapsed_precise} eta {eta}",
            )
            .expect("valid template")
            .progress_chars("=> "),
        );
        bar.set_prefix(name.to_string());
        let out = f(&mut |done, total| {
            bar.set_length(total);
            bar.set_position(done);
        });
        bar.finish_and_clear();
        out
    }

    fn solver<T>(&self, iterations: usize, f: impl FnOnce(&mut dyn FnMut(usize, f64)) -> T) -> T {
        if verbosity() == Verbosity::Quiet {
            return f(&mut |_, _| {});
        }
        if as_lines() {
            // A line per tenth of the iterations; every one with -v.
            let every = match verbosity() {
                Verbosity::Verbose => 1,
                _ => iterations.div_ceil(10).max(1),
            };
            let t = Instant::now();
            line(format_args!("CG: {iterations} iterations"));
            return f(&mut |it, res| {
                if it % every == 0 || it == iterations {
                    line(format_args!(
                        "CG: iteration {it}/{iterations}, residual {res:.3e}, {:.1} s",
                        t.elapsed().as_secs_f64()
                    ));
                }
            });
        }
        let bar = ProgressBar::new(iterations as u64).with_style(
            ProgressStyle::with_template(
                "{prefix:>8} [{bar:40}] {pos}/{len} residual {msg} {elapsed_precise}",
            )
            .expect("valid template")
            .progress_chars("=> "),
        );
        bar.set_prefix("CG");
        let out = f(&mut |it, res| {
            bar.set_position(it as u64);
            bar.set_message(format!("{res:.3e}"));
        });
        bar.finish_and_clear();
        out
    }
}

/// A stage in a log (stderr not a terminal): a line when it starts, at each
/// further tenth of its progress, and when it ends.
fn logged_stage<T>(name: &str, f: impl FnOnce(&mut dyn FnMut(u64, u64)) -> T) -> T {
    let t = Instant::now();
    line(format_args!("{name}: started"));
    let mut shown = 0;
    let out = f(&mut |done, total| {
        let tenth = (10 * done).checked_div(total).unwrap_or(0);
        if tenth > shown && done < total {
            shown = tenth;
            line(format_args!(
                "{name}: {}% after {:.1} s",
                10 * tenth,
                t.elapsed().as_secs_f64()
            ));
        }
    });
    line(format_args!(
        "{name}: done in {:.2} s",
        t.elapsed().as_secs_f64()
    ));
    out
}

/// A log line on stderr; with `-v`, after the seconds since the process
/// started (`[  1.234 s] `), so that a log shows where a run's time went.
pub(crate) fn line(msg: std::fmt::Arguments) {
    match verbosity() {
        Verbosity::Verbose => eprintln!("[{:8.3} s] {msg}", crate::since_start()),
        _ => eprintln!("{msg}"),
    }
}
