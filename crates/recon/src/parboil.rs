//! `recon parboil-q`: Q for a Parboil mri-q input file, written in Parboil's
//! output format, optionally checked against a reference output.

use crate::config::{DeviceChoice, EngineCfg, Precision};
use anyhow::{Context, Result};
use recon_core::{Backend, Real};
use std::path::PathBuf;
use std::time::Instant;

#[derive(clap::Args, Debug, Clone)]
pub struct ParboilArgs {
    /// Parboil mri-q input file.
    pub input: PathBuf,
    /// Output file (Parboil's format), written only when complete.
    pub output: PathBuf,
    /// Use at most K samples (Parboil's -S; at least 1).
    #[arg(long)]
    pub samples: Option<usize>,
    /// Where to compute: a GPU when one is usable (auto), or cpu, or cuda.
    #[arg(long, value_enum, default_value = "auto")]
    pub device: DeviceChoice,
    /// CPU precision (the GPU computes in f32).
    #[arg(long, value_enum, default_value = "f32")]
    pub precision: PrecisionArg,
    /// Compare the result with this reference output by Parboil's rule.
    #[arg(long)]
    pub compare: Option<PathBuf>,
}

#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum PrecisionArg {
    F32,
    F64,
}

pub fn run(args: &ParboilArgs, bars: &crate::Bars) -> Result<()> {
    if args.samples == Some(0) {
        anyhow::bail!("--samples must be at least 1, got 0");
    }
    // Everything is read and checked before anything is computed or written.
    recon_io::check_writable_file(&args.output).context("the output file")?;
    let input = recon_parboil::read_input(&args.input, args.samples)?;
    let reference = match &args.compare {
        Some(r) => {
            let bytes =
                std::fs::read(r).with_context(|| format!("reading reference {}", r.display()))?;
            Some(recon_parboil::parse_output(
                &bytes,
                &r.display().to_string(),
            )?)
        }
        None => None,
    };
    let engine = EngineCfg {
        device: args.device,
        precision: match args.precision {
            PrecisionArg::F32 => Precision::F32,
            PrecisionArg::F64 => Precision::F64,
        },
        ..EngineCfg::default()
    };
    let chosen = crate::choose_backend(&engine)?;
    let (bytes, seconds, device_name) = crate::on_backend!(chosen, b => compute(b, &input, bars)?);
    recon_io::write_atomic::<recon_io::IoError>(&args.output, |tmp| {
        std::fs::write(tmp, &bytes).map_err(|source| recon_io::IoError::Io {
            path: tmp.display().to_string(),
            op: "write",
            source,
        })
    })
    .context("writing the output")?;
    println!(
        "parboil-q: {} samples, {} points: Q in {seconds:.3} s on {device_name}; wrote {}",
        input.k.len(),
        input.x.len(),
        args.output.display()
    );
    if let (Some(reference), Some(path)) = (reference, &args.compare) {
        let (re, im) = recon_parboil::parse_output(&bytes, "output")?;
        let c = recon_parboil::compare((&re, &im), (&reference.0, &reference.1))
            .map_err(anyhow::Error::msg)?;
        println!(
            "compare with {}: {} ({} of {} values outside Parboil's tolerance; max |out - ref| / max |ref| = {:.2e})",
            path.display(),
            if c.passed() { "PASS" } else { "FAIL" },
            c.failures,
            c.values,
            c.max_rel_error
        );
        if !c.passed() {
            anyhow::bail!("the output does not match the reference");
        }
    }
    Ok(())
}

fn compute<B: Backend>(
    b: &B,
    input: &recon_parboil::Input,
    bars: &crate::Bars,
) -> Result<(Vec<u8>, f64, String)> {
    use crate::pipeline::Ui;
    let t = Instant::now();
    let q = bars.stage("Q", |p| recon_parboil::compute_q(b, input, p))?;
    if let Some(i) = q
        .iter()
        .position(|c| !(c.re.f64().is_finite() && c.im.f64().is_finite()))
    {
        anyhow::bail!("Q at point {i} is not finite: nothing written");
    }
    let seconds = t.elapsed().as_secs_f64();
    Ok((recon_parboil::output_bytes(&q), seconds, b.describe()))
}
