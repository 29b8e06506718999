//! Reading a scan: recon's own scan files and ISMRMRD files, told apart by
//! their content. [`read_scan`] reads in this process; the binary reads in
//! a child process instead (a damaged HDF5 file may crash or hang the HDF5
//! library), and hands its reader to [`crate::config::load`].

use crate::Result;
use recon_io::scan::{ReadOptions, Scan};
use std::path::Path;

/// The trajectory units of an ISMRMRD file (scan files are cycles/FOV).
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Units {
    Normalized,
    /// Also spelled as the config spells it.
    #[value(alias = "cycles_per_fov")]
    CyclesPerFov,
}

/// What kind of file was read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Scan,
    Ismrmrd,
}

/// How [`crate::config::load`] reads a config's scan file: `(file,
/// trajectory units, allow beyond Nyquist)` to the scan and its kind.
pub type ReadScan<'a> = &'a dyn Fn(&Path, Units, bool) -> Result<(Kind, Scan)>;

/// Reads and checks the file in this process.
pub fn read_scan(path: &Path, units: Units, opts: &ReadOptions) -> Result<(Kind, Scan)> {
    if recon_io::ismrmrd::is_ismrmrd(path) {
        let units = match units {
            Units::Normalized => recon_io::ismrmrd::Units::Normalized,
            Units::CyclesPerFov => recon_io::ismrmrd::Units::CyclesPerFov,
        };
        let s = recon_io::ismrmrd::read_ismrmrd_with(path, units, opts)?;
        Ok((Kind::Ismrmrd, s))
    } else {
        Ok((Kind::Scan, recon_io::scan::read_scan_with(path, opts)?))
    }
}

/// [`read_scan`] as a [`ReadScan`], with the default options.
pub fn read_in_process(
    path: &Path,
    units: Units,
    allow_beyond_nyquist: bool,
) -> Result<(Kind, Scan)> {
    let opts = ReadOptions {
        allow_beyond_nyquist,
        ..Default::default()
    };
    read_scan(path, units, &opts)
}

/// A warning when an ISMRMRD trajectory read as cycles/FOV looks normalised.
pub fn units_warning(kind: Kind, units: Units, s: &Scan) -> Option<String> {
    let kmax = s
        .traj
        .iter()
        .flat_map(|k| k.iter().map(|v| v.abs()))
        .fold(0.0, f64::max);
    (kind == Kind::Ismrmrd && units == Units::CyclesPerFov && kmax <= 0.5).then(|| {
        format!(
            "every |k| is at most {kmax:.3} cycles/FOV: the trajectory looks normalised \
             (cycles per pixel); with trajectory_units = \"cycles_per_fov\" the image will be \
             a blur of the k-space centre. Use \"normalized\" if so"
        )
    })
}
