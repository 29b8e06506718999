//! `recon import`: BART's cfl/hdr pairs and NumPy's npy/npz arrays to a
//! scan file (`recon_import`), with the matrix and FOV stated, never
//! guessed.

use anyhow::{Context, Result};
use recon_import::{KOrder, Params, Sources, Units};
use std::path::PathBuf;

#[derive(clap::Args, Debug, Clone)]
pub struct ImportArgs {
    /// The trajectory: BART's NAME.cfl (with NAME.hdr), `[3, readout,
    /// spokes]`; or NumPy's .npy or FILE.npz:NAME, `[..., 3]` (`[..., 2]`
    /// on a 2-D matrix).
    #[arg(long)]
    pub trajectory: PathBuf,
    /// The k-space samples: BART's `[1, readout, spokes, coils]`; or
    /// NumPy's complex `[...]` (one coil) or `[coils, ...]`, `...` the
    /// trajectory's sample axes.
    #[arg(long)]
    pub data: PathBuf,
    /// Noise samples (a noise scan), `[coils, samples]` (BART: the coils
    /// on dimension 3); optional.
    #[arg(long)]
    pub noise: Option<PathBuf>,
    /// The image matrix: N, or Nx,Ny,Nz (Nz = 1: a 2-D scan).
    #[arg(long, value_parser = parse_matrix)]
    pub matrix: [usize; 3],
    /// The field of view in mm: F, or Fx,Fy,Fz.
    #[arg(long, value_parser = parse_fov)]
    pub fov_mm: [f64; 3],
    /// The order of a NumPy trajectory's last axis: xyz (recon's and
    /// BART's), or zyx (SigPy's coord, which follows the image's axes).
    #[arg(long, value_enum, default_value = "xyz")]
    pub k_order: KOrderArg,
    /// The trajectory's units: cycles per FOV (Nyquist at N/2; BART's and
    /// SigPy's), or normalised to [-0.5, 0.5].
    #[arg(long, value_enum, default_value = "cycles-per-fov")]
    pub units: UnitsArg,
    /// The scan file to write (HDF5), written only when complete.
    #[arg(long)]
    pub out: PathBuf,
}

#[derive(clap::ValueEnum, Debug, Clone, Copy)]
pub enum KOrderArg {
    Xyz,
    Zyx,
}

#[derive(clap::ValueEnum, Debug, Clone, Copy)]
pub enum UnitsArg {
    #[value(alias = "cycles_per_fov")]
    CyclesPerFov,
    Normalized,
}

/// N or a,b,c: three values.
fn three<T: std::str::FromStr + Copy>(s: &str, what: &str) -> Result<[T; 3], String> {
    let v: Vec<T> = s
        .split(',')
        .map(|p| p.trim().parse::<T>())
        .collect::<Result<_, _>>()
        .map_err(|_| format!("expected {what}: one number, or three separated by commas"))?;
    match v[..] {
        [a] => Ok([a, a, a]),
        [a, b, c] => Ok([a, b, c]),
        _ => Err(format!("expected {what}: one number, or three (x,y,z)")),
    }
}

fn parse_matrix(s: &str) -> Result<[usize; 3], String> {
    three(s, "the matrix")
}

fn parse_fov(s: &str) -> Result<[f64; 3], String> {
    three(s, "the FOV in mm")
}

/// `recon import`.
pub fn run(args: &ImportArgs) -> Result<()> {
    recon_io::check_writable_file(&args.out).context("the scan file to write (--out)")?;
    let params = Params {
        matrix: args.matrix,
        fov_mm: args.fov_mm,
        k_order: match args.k_order {
            KOrderArg::Xyz => KOrder::Xyz,
            KOrderArg::Zyx => KOrder::Zyx,
        },
        units: match args.units {
            UnitsArg::CyclesPerFov => Units::CyclesPerFov,
            UnitsArg::Normalized => Units::Normalized,
        },
    };
    let sources = Sources {
        trajectory: &args.trajectory,
        data: &args.data,
        noise: args.noise.as_deref(),
    };
    let info = recon_import::import(&args.out, &sources, &params).context("recon import")?;
    println!(
        "wrote {} (scan file version {}): {} samples from {} coil{}{}, matrix {:?}, FOV {:?} mm",
        args.out.display(),
        info.version,
        info.samples,
        info.coils,
        if info.coils > 1 { "s" } else { "" },
        info.noise_samples
            .map_or(String::new(), |k| format!(", {k} noise samples per coil")),
        args.matrix,
        args.fov_mm
    );
    Ok(())
}
