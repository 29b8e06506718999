//! The run configuration: TOML, checked in full before anything is written.
//!
//! Unknown keys and wrong types are rejected by serde with the key's dotted
//! path (serde_path_to_error); impossible values by [`Config::validate`],
//! which names the key and what is allowed. Relative paths are resolved
//! against the config file's folder.
//!
//! This file is the schema: every table, its keys and their defaults
//! (`coils.rs` holds `[coils]` and `[sense]`).
//! `validate.rs` parses and checks it, `load.rs` loads it.

use recon_synth::{Phantom, Trajectory};
use serde::de::{self, Deserializer, SeqAccess, Visitor};
use serde::Deserialize;
use std::fmt;
use std::path::PathBuf;

mod coils;
mod engine;
mod load;
mod prior;
mod settings;
mod validate;
pub use coils::{ArrangementCfg, CoilsCfg, MapsSource, SenseCfg};
pub use engine::{BasisCfg, DeviceChoice, EngineCfg, EngineKind, Precision};
pub use load::{
    cache_dir, default_cache_dir, image_affines, in_memory, load, load_with, normalise, resolve,
    with_scan, COMMAND_LINE,
};
pub use prior::{Algorithm, PriorCfg, PriorKind};

pub use settings::Settings;

/// For tests: the shipped config `configs/<name>.toml`, loaded with its
/// outputs in a temporary folder (returned, to keep it alive).
#[cfg(test)]
pub(crate) fn shipped(name: &str) -> (tempfile::TempDir, Loaded) {
    shipped_with(name, &[])
}

/// [`shipped`] with the command line's `section.key=value` pairs `set`
/// laid over it.
#[cfg(test)]
pub(crate) fn shipped_with(name: &str, set: &[&str]) -> (tempfile::TempDir, Loaded) {
    let dir = tempfile::tempdir().unwrap();
    let cfg =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../../configs/{name}.toml"));
    let settings = Settings {
        scan: None,
        set: set.iter().map(|kv| kv.to_string()).collect(),
    };
    let read = &crate::read_in_process;
    let l = load_with(Some(&cfg), &settings, Some(dir.path()), read, &|_| {}).unwrap();
    (dir, l)
}

/// One value for all three axes, or `[x, y, z]`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Triple<T>(pub [T; 3]);

impl<T: serde::Serialize> serde::Serialize for Triple<T> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(s)
    }
}

impl<'de, T: Deserialize<'de> + Copy + fmt::Debug> Deserialize<'de> for Triple<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(std::marker::PhantomData<T>);
        impl<'de, T: Deserialize<'de> + Copy> Visitor<'de> for V<T> {
            type Value = Triple<T>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a number or a list of three numbers [x, y, z]")
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
                let t = T::deserialize(de::value::I64Deserializer::<E>::new(v))?;
                Ok(Triple([t; 3]))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
                let t = T::deserialize(de::value::F64Deserializer::<E>::new(v))?;
                Ok(Triple([t; 3]))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let mut out = Vec::new();
                while let Some(v) = seq.next_element::<T>()? {
                    out.push(v);
                }
                match out[..] {
                    [x, y, z] => Ok(Triple([x, y, z])),
                    _ => Err(de::Error::invalid_length(
                        out.len(),
                        &"three values [x, y, z]",
                    )),
                }
            }
        }
        d.deserialize_any(V(std::marker::PhantomData))
    }
}

#[derive(Debug, Clone, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct GridCfg {
    /// Voxels per axis.
    pub matrix: Triple<usize>,
    /// Field of view in mm.
    pub fov_mm: Triple<f64>,
}

#[derive(Debug, Clone, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct PhantomCfg {
    /// Phantom TOML file (see phantoms/).
    pub file: PathBuf,
    /// Sub-samples per voxel and axis for the true image.
    #[serde(default = "default_supersample")]
    pub supersample: usize,
    /// Optional proton-density twin (same geometry): the reference of the
    /// anatomical prior, written to scan files as `/reference/anatomy`.
    pub anatomy: Option<PathBuf>,
    /// Matrix of the reference image over the same FOV (a proton scan has
    /// finer voxels than a sodium one); the grid's matrix when omitted.
    pub anatomy_matrix: Option<Triple<usize>>,
}

/// A scan file to reconstruct instead of synthetic data.
#[derive(Debug, Clone, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct ScanCfg {
    /// Scan file (HDF5, see the README).
    pub file: PathBuf,
    /// Accept samples beyond Nyquist (|k_d| > N_d / 2).
    #[serde(default)]
    pub allow_beyond_nyquist: bool,
    /// ISMRMRD files only: the trajectory's units.
    #[serde(default = "default_units")]
    pub trajectory_units: TrajectoryUnits,
    /// A file of several images (ISMRMRD `idx`): the slices, contrasts,
    /// phases, repetitions and sets to reconstruct, by their counter's
    /// value; a key left out keeps every value.
    #[serde(default)]
    pub slices: Option<Vec<u16>>,
    #[serde(default)]
    pub contrasts: Option<Vec<u16>>,
    #[serde(default)]
    pub phases: Option<Vec<u16>>,
    #[serde(default)]
    pub repetitions: Option<Vec<u16>>,
    #[serde(default)]
    pub sets: Option<Vec<u16>>,
}

impl ScanCfg {
    /// The selection keys, in [`recon_io::geometry::AXES`]' order, with
    /// their values.
    pub fn selection(&self) -> [(&'static str, Option<&[u16]>); 5] {
        [
            ("scan.slices", self.slices.as_deref()),
            ("scan.contrasts", self.contrasts.as_deref()),
            ("scan.phases", self.phases.as_deref()),
            ("scan.repetitions", self.repetitions.as_deref()),
            ("scan.sets", self.sets.as_deref()),
        ]
    }
}

/// Units of an ISMRMRD trajectory (the format does not fix them).
#[derive(Debug, Clone, Copy, Deserialize, serde::Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum TrajectoryUnits {
    /// Cycles per pixel, in [-0.5, 0.5] (Gadgetron's convention).
    Normalized,
    /// Cycles per field of view, as recon's own scan files.
    CyclesPerFov,
}

fn default_units() -> TrajectoryUnits {
    TrajectoryUnits::Normalized
}

fn default_supersample() -> usize {
    4
}

#[derive(Debug, Clone, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct NoiseCfg {
    /// RMS of the noiseless data over the noise standard deviation.
    pub snr: f64,
    #[serde(default)]
    pub seed: u64,
}

#[derive(Debug, Clone, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct QCfg {
    /// Use the Q cache.
    #[serde(default = "yes")]
    pub cache: bool,
    /// Cache folder; default `$RECON_CACHE_DIR`, else `$XDG_CACHE_HOME/recon/q`,
    /// else `~/.cache/recon/q`.
    pub dir: Option<PathBuf>,
}

fn yes() -> bool {
    true
}

impl Default for QCfg {
    fn default() -> Self {
        QCfg {
            cache: true,
            dir: None,
        }
    }
}

#[derive(Debug, Clone, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct SolverCfg {
    /// Iterations of the algorithm; omitted: [`Config::iterations`]'s
    /// default for it.
    pub iterations: Option<usize>,
    /// Relative residual at which to stop early; 0 runs every iteration.
    #[serde(default)]
    pub tolerance: f64,
    /// Weight of W^H W relative to the peak of Q (or `prior.lambda`), or
    /// `"auto"` (the default): chosen by the discrepancy principle.
    #[serde(default)]
    pub lambda: Lambda,
    /// "cg", "admm" or "pdhg"; omitted: CG for the quadratic prior, ADMM
    /// for the sparse ones.
    pub algorithm: Option<Algorithm>,
    /// ADMM: CG iterations per x-update.
    #[serde(default = "default_inner")]
    pub inner: usize,
    /// ADMM: the penalty rho where it starts, relative to the data term's
    /// largest diagonal entry (residual balancing adapts it).
    #[serde(default = "default_rho")]
    pub rho: f64,
    /// ADMM: precondition the x-updates' CG by the circulant approximation
    /// of their operator.
    #[serde(default = "yes")]
    pub precondition: bool,
    /// ADMM: over-relaxation in [1, 2) (1: plain ADMM).
    #[serde(default = "default_relaxation")]
    pub relaxation: f64,
    /// A stack (one 2-D trajectory on every Cartesian k_z partition): as
    /// one 2-D problem per slice, or as the 3-D problem.
    #[serde(default)]
    pub stack: StackMode,
}

/// `solver.lambda` (or `prior.lambda`): a number, relative to the data
/// term's diagonal (to `max |F^H D|` for the sparse priors), or chosen for
/// each image without a truth (`crate::lambda`): `"auto"` (the default:
/// real scans have no truth to sweep lambda against), the discrepancy
/// principle, or `"gcv"`, generalised cross-validation (the quadratic
/// priors).
#[derive(Debug, Clone, Copy, PartialEq, Default, serde::Serialize)]
#[serde(untagged)]
pub enum Lambda {
    Fixed(f64),
    #[default]
    #[serde(serialize_with = "auto_name")]
    Auto,
    /// Generalised cross-validation (the quadratic priors).
    #[serde(serialize_with = "gcv_name")]
    Gcv,
}

fn auto_name<S: serde::Serializer>(s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str("auto")
}

fn gcv_name<S: serde::Serializer>(s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str("gcv")
}

impl<'de> Deserialize<'de> for Lambda {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Lambda;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str(
                    "a number, \"auto\" (the discrepancy principle) or \"gcv\" (generalised \
                     cross-validation)",
                )
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Lambda, E> {
                Ok(Lambda::Fixed(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Lambda, E> {
                Ok(Lambda::Fixed(v as f64))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Lambda, E> {
                Ok(Lambda::Fixed(v as f64))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Lambda, E> {
                match v {
                    "auto" => Ok(Lambda::Auto),
                    "gcv" => Ok(Lambda::Gcv),
                    _ => Err(E::invalid_value(de::Unexpected::Str(v), &self)),
                }
            }
        }
        d.deserialize_any(V)
    }
}

impl fmt::Display for Lambda {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self {
            Lambda::Fixed(v) => write!(f, "{v}"),
            Lambda::Auto => f.write_str("auto"),
            Lambda::Gcv => f.write_str("gcv"),
        }
    }
}

/// How slices are solved (`solver.stack`): a stack's (one 2-D trajectory
/// on every Cartesian k_z partition of a 3-D grid), or the images of a 2-D
/// scan that share one trajectory (its slices, contrasts, ...).
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StackMode {
    /// As one batch where the batch takes the run (one coil, the uniform
    /// quadratic prior), else one after the other; a 3-D trajectory that
    /// is not a stack as the 3-D problem.
    #[default]
    Auto,
    /// One after the other; on a 3-D grid, an error unless the trajectory
    /// is a stack.
    Slices,
    /// Together by one CG; an error unless the run has one coil and the
    /// uniform quadratic prior (and, on a 3-D grid, the trajectory is a
    /// stack).
    Batch,
    /// The 3-D problem, stack or not (for comparison).
    Volume,
}

impl StackMode {
    pub fn name(self) -> &'static str {
        match self {
            StackMode::Auto => "auto",
            StackMode::Slices => "slices",
            StackMode::Batch => "batch",
            StackMode::Volume => "volume",
        }
    }
}

fn default_relaxation() -> f64 {
    recon_cg::SparseParams::default().relaxation
}

fn default_inner() -> usize {
    recon_cg::SparseParams::default().inner
}

fn default_rho() -> f64 {
    recon_cg::SparseParams::default().rho
}

impl Default for SolverCfg {
    fn default() -> Self {
        SolverCfg {
            iterations: None,
            tolerance: 0.0,
            lambda: Lambda::Auto,
            algorithm: None,
            inner: default_inner(),
            rho: default_rho(),
            relaxation: default_relaxation(),
            precondition: true,
            stack: StackMode::Auto,
        }
    }
}

/// Which W the solver uses.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RegulariserKind {
    /// Plain first differences, every edge weighted 1.
    #[default]
    Uniform,
    /// Edge weights from the proton-density reference (recon-prior).
    Anatomical,
}

impl RegulariserKind {
    pub fn name(self) -> &'static str {
        match self {
            RegulariserKind::Uniform => "uniform",
            RegulariserKind::Anatomical => "anatomical",
        }
    }
}

/// The regulariser W (see recon-prior for the anatomical one).
#[derive(Debug, Clone, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct RegulariserCfg {
    #[serde(default)]
    pub kind: RegulariserKind,
    /// Gradient magnitude of the reference, as a fraction of its largest,
    /// above which an edge counts as a boundary.
    #[serde(default = "default_edge_threshold")]
    pub edge_threshold: f64,
    /// Weight of differences across reference boundaries (others weigh 1).
    #[serde(default = "default_edge_weight")]
    pub edge_weight: f64,
    /// Reference value, as a fraction of its peak, below which a voxel is
    /// outside the support; omitted: no support term.
    pub support_threshold: Option<f64>,
    /// Weight of the support term's diagonal rows.
    #[serde(default = "default_support_weight")]
    pub support_weight: f64,
    /// Relax, before a second solve, the edges the first solve's image
    /// shows beyond its noise: keeps structures the reference lacks.
    #[serde(default = "yes")]
    pub data_edges: bool,
    /// Size of such an edge, in noise deviations of the image's differences.
    #[serde(default = "default_data_threshold")]
    pub data_threshold: f64,
}

fn default_data_threshold() -> f64 {
    recon_prior::Params::default().data_threshold.unwrap_or(4.0)
}

fn default_edge_threshold() -> f64 {
    recon_prior::Params::default().edge_threshold
}

fn default_edge_weight() -> f64 {
    recon_prior::Params::default().edge_weight
}

fn default_support_weight() -> f64 {
    recon_prior::Params::default().support_weight
}

impl Default for RegulariserCfg {
    fn default() -> Self {
        let p = recon_prior::Params::default();
        RegulariserCfg {
            kind: RegulariserKind::Uniform,
            edge_threshold: p.edge_threshold,
            edge_weight: p.edge_weight,
            support_threshold: p.support_threshold,
            support_weight: p.support_weight,
            data_edges: p.data_threshold.is_some(),
            data_threshold: default_data_threshold(),
        }
    }
}

impl RegulariserCfg {
    /// The prior's parameters.
    pub fn params(&self) -> recon_prior::Params {
        recon_prior::Params {
            edge_threshold: self.edge_threshold,
            edge_weight: self.edge_weight,
            support_threshold: self.support_threshold,
            support_weight: self.support_weight,
            data_threshold: self.data_edges.then_some(self.data_threshold),
        }
    }
}

#[derive(Debug, Clone, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct GriddingCfg {
    /// The fine grid's upsampling: 2, the NUFFT's (kept so that configs
    /// that set it still load; any other value is an error).
    #[serde(default = "default_oversampling")]
    pub oversampling: f64,
    #[serde(default = "default_dcf")]
    pub dcf_iterations: usize,
}

fn default_oversampling() -> f64 {
    2.0
}

fn default_dcf() -> usize {
    10
}

impl Default for GriddingCfg {
    fn default() -> Self {
        GriddingCfg {
            oversampling: default_oversampling(),
            dcf_iterations: default_dcf(),
        }
    }
}

#[derive(Debug, Clone, Default, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct OutputCfg {
    /// Output folder (`--out` on the command line gives it too).
    pub dir: Option<PathBuf>,
    /// Also store Q in recon.h5.
    #[serde(default)]
    pub q: bool,
    /// Also write the coil maps SENSE used as a 4-D NIfTI (`maps.nii`,
    /// their magnitudes, one volume per coil).
    #[serde(default)]
    pub maps_nifti: bool,
    /// Also write the complex iterative image for BART (`recon.cfl` and
    /// `recon.hdr`, dimensions `[Nx, Ny, Nz]`, a scan's images along
    /// BART's slice dimension 13).
    #[serde(default)]
    pub cfl: bool,
    /// Write recon.nii and gridding.nii as complex values (NIfTI's
    /// complex64) rather than magnitudes.
    #[serde(default)]
    pub complex: bool,
    /// Write the NIfTI files gzip-compressed, as `.nii.gz`.
    #[serde(default)]
    pub compress: bool,
}

/// A whole run configuration.
#[derive(Debug, Clone, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Synthetic data: [grid], [phantom] and [trajectory] (and [noise]) ...
    pub grid: Option<GridCfg>,
    pub phantom: Option<PhantomCfg>,
    pub trajectory: Option<Trajectory>,
    /// ... or a scan file.
    pub scan: Option<ScanCfg>,
    /// No `[noise]` table: noiseless data.
    pub noise: Option<NoiseCfg>,
    /// Synthetic receive coils; none: one coil of sensitivity 1.
    pub coils: Option<CoilsCfg>,
    #[serde(default)]
    pub sense: SenseCfg,
    #[serde(default)]
    pub engine: EngineCfg,
    #[serde(default)]
    pub q: QCfg,
    #[serde(default)]
    pub solver: SolverCfg,
    #[serde(default)]
    pub prior: PriorCfg,
    #[serde(default)]
    pub regulariser: RegulariserCfg,
    #[serde(default)]
    pub gridding: GriddingCfg,
    #[serde(default)]
    pub output: OutputCfg,
}

/// Where the k-space data come from.
#[derive(Clone)]
pub enum Source {
    Synthetic {
        phantom: Phantom,
        /// The proton-density twin, if configured.
        anatomy: Option<Phantom>,
        trajectory: Trajectory,
    },
    Scan(recon_io::scan::Scan),
}

/// A checked configuration with everything it refers to loaded.
#[derive(Clone)]
pub struct Loaded {
    pub path: PathBuf,
    pub cfg: Config,
    pub grid: recon_core::Grid,
    pub source: Source,
    /// `prior.reference`: the reference image with its own geometry, to be
    /// resampled onto each image's grid ([`crate::inputs`]).
    pub reference: Option<std::sync::Arc<recon_core::Oriented>>,
    /// What loading found that works, but poorly (one line each, without
    /// "warning: "): the caller shows them.
    pub warnings: Vec<String>,
}

impl Loaded {
    /// The output folder: `--out`, else `output.dir`; an error naming both
    /// when neither was given.
    pub fn output_dir(&self) -> crate::Result<&std::path::Path> {
        match &self.cfg.output.dir {
            Some(d) => Ok(d),
            None => crate::bail!(
                "no output folder: give --out DIR on the command line, or `output.dir` in the config"
            ),
        }
    }

    /// A short name of the data: the phantom, or the scan file.
    pub fn data_name(&self) -> String {
        match &self.source {
            Source::Synthetic { phantom, .. } => phantom.name.clone(),
            Source::Scan(_) => self
                .cfg
                .scan
                .as_ref()
                .map(|s| s.file.display().to_string())
                .unwrap_or_default(),
        }
    }
}
