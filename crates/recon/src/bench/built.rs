//! What `bench` and `bench-sense` share: their problem made a run's config
//! with its scan in memory, built as a run builds it (the better of a few
//! builds for each stage), and the stages' seconds read by name.

use crate::config::Loaded;
use crate::pipeline::{self, BuildParams, Built, Inputs, Ui};
use anyhow::Result;
use recon_encoding::NufftBackend;
use recon_io::scan::Scan;
use recon_q::Stored;

/// The config of `scan` (in memory, named `name` in messages) with the
/// TOML `keys` (engine, solver, sense), no Q cache and no outputs.
pub(crate) fn in_memory(name: &str, keys: &str, scan: Scan) -> Result<Loaded> {
    let text = format!(
        "[scan]\nfile = \"{name}\"\n\n{keys}\n\n[q]\ncache = false\n\n[output]\ndir = \"unused\"\n"
    );
    Ok(crate::config::in_memory(&text, scan)?)
}

/// `builds` builds of `l`'s problem, each dropped before the next is made:
/// the last, and each stage's smallest seconds over them.
pub(crate) fn fastest_build<'b, B>(
    b: &'b B,
    l: &Loaded,
    inputs: &Inputs,
    params: &BuildParams,
    builds: usize,
    ui: &impl Ui,
) -> Result<(Built<'b, B>, Vec<(&'static str, f64)>)>
where
    B: NufftBackend,
    B::Real: Stored,
{
    let mut built: Option<Built<'b, B>> = None;
    let mut times: Vec<(&'static str, f64)> = Vec::new();
    for _ in 0..builds.max(1) {
        drop(built.take());
        let again = pipeline::build_with(b, l, inputs, params, ui)?;
        b.synchronize()?;
        if times.is_empty() {
            times = again.seconds.clone();
        } else {
            for (name, s) in times.iter_mut() {
                *s = s.min(seconds(&again.seconds, name));
            }
        }
        built = Some(again);
    }
    Ok((built.expect("built once at least"), times))
}

/// The seconds of stage `name` (NaN where the build has no such stage).
pub(crate) fn seconds(stages: &[(&'static str, f64)], name: &str) -> f64 {
    stages
        .iter()
        .find(|(n, _)| *n == name)
        .map_or(f64::NAN, |(_, s)| *s)
}
