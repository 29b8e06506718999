//! `recon inspect FILE`: reads a scan or ISMRMRD file as a run would (in
//! the reader process, see `reader.rs`) and prints what it holds.

use crate::reader::{read_isolated, Kind, UnitsArg};
use anyhow::Result;
use std::path::PathBuf;

#[derive(clap::Args, Debug, Clone)]
pub struct InspectArgs {
    /// A scan file or an ISMRMRD file.
    pub file: PathBuf,
    /// ISMRMRD only: the trajectory's units.
    #[arg(long, value_enum, default_value = "normalized")]
    pub trajectory_units: UnitsArg,
    /// Accept samples beyond Nyquist.
    #[arg(long)]
    pub allow_beyond_nyquist: bool,
}

/// `recon inspect`: reads a file as a run would and prints what it holds.
pub fn run(args: &InspectArgs) -> Result<()> {
    let (kind, s) = read_isolated(&args.file, args.trajectory_units, args.allow_beyond_nyquist)?;
    let kmax = s
        .traj
        .iter()
        .flat_map(|k| k.iter().map(|v| v.abs()))
        .fold(0.0, f64::max);
    println!(
        "{}: {} file, {} samples, matrix {:?}, FOV {:?} mm, largest |k| {kmax:.3} cycles/FOV",
        args.file.display(),
        match kind {
            Kind::Scan => "scan",
            Kind::Ismrmrd => "ISMRMRD",
        },
        s.traj.len(),
        s.grid.n,
        s.grid.fov_mm
    );
    println!(
        "  truth: {}; anatomy: {}",
        if s.truth.is_some() { "yes" } else { "no" },
        s.anatomy.as_ref().map_or("no".to_string(), |a| format!(
            "{:?} over {:?} mm",
            a.grid.n, a.grid.fov_mm
        ))
    );
    println!(
        "  coils: {}; noise: {}; maps: {}",
        s.coils,
        match &s.noise {
            None => "none".to_string(),
            Some(recon_io::scan::CoilNoise::Samples(v)) => {
                format!("{} samples per coil", v.len() / s.coils.max(1))
            }
            Some(recon_io::scan::CoilNoise::Covariance(_)) => "covariance".to_string(),
        },
        if s.maps.is_some() { "yes" } else { "no" }
    );
    let geometry = |g: &Option<recon_io::geometry::Geometry>| match g {
        None => "isocentre, scanner axes".to_string(),
        Some(g) => format!(
            "position {:?} mm, read_dir {:?}, phase_dir {:?}, slice_dir {:?} (LPS)",
            g.position_mm.map(round3),
            g.read_dir.map(round3),
            g.phase_dir.map(round3),
            g.slice_dir.map(round3)
        ),
    };
    if s.parts.is_empty() {
        println!("  one image; geometry: {}", geometry(&s.geometry));
    } else {
        println!(
            "  {} images of {} samples each:",
            s.parts.len(),
            s.parts[0].samples.len()
        );
        for p in &s.parts {
            println!("    {}: {}", p.index.describe(), geometry(&p.geometry));
        }
    }
    if let Some(w) = recon_pipeline::units_warning(kind, args.trajectory_units, &s) {
        eprintln!("warning: {w}");
    }
    Ok(())
}

fn round3(v: f64) -> f64 {
    (v * 1000.0).round() / 1000.0
}
