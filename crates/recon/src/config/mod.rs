//! The run configuration: TOML, checked in full before anything is written.
//!
//! Unknown keys and wrong types are rejected by serde with the key's dotted
//! path (serde_path_to_error); impossible values by [`Config::validate`],
//! which names the key and what is allowed. Relative paths are resolved
//! against the config file's folder.

use anyhow::{bail, Context, Result};
use recon_synth::{Phantom, Trajectory};
use serde::de::{self, Deserializer, SeqAccess, Visitor};
use serde::Deserialize;
use std::fmt;
use std::path::{Path, PathBuf};

/// One value for all three axes, or `[x, y, z]`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Triple<T>(pub [T; 3]);

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

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GridCfg {
    /// Voxels per axis.
    pub matrix: Triple<usize>,
    /// Field of view in mm.
    pub fov_mm: Triple<f64>,
}

#[derive(Debug, Clone, Deserialize)]
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
#[derive(Debug, Clone, Deserialize)]
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
}

/// Units of an ISMRMRD trajectory (the format does not fix them).
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
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

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NoiseCfg {
    /// RMS of the noiseless data over the noise standard deviation.
    pub snr: f64,
    #[serde(default)]
    pub seed: u64,
}

#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Precision {
    F32,
    F64,
}

/// Where to compute.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum DeviceChoice {
    /// The GPU when one is usable, else the CPU (saying why).
    Auto,
    Cpu,
    Cuda,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EngineCfg {
    #[serde(default = "default_device")]
    pub device: DeviceChoice,
    /// f32 or f64; the GPU computes in f32 only.
    #[serde(default = "default_precision")]
    pub precision: Precision,
    /// CPU threads; 0 uses every core.
    #[serde(default)]
    pub threads: usize,
    /// GPU summation kernel, 1 to 6 (the book's optimisation ladder).
    #[serde(default = "default_variant")]
    pub variant: u32,
    /// GPU outputs per thread of variants 5 and 6: 1, 2, 4 or 8.
    #[serde(default = "default_per_thread")]
    pub per_thread: u32,
    /// GPU threads per block of variants 5 and 6: a multiple of 32, to 1024.
    #[serde(default = "default_block")]
    pub block: u32,
}

fn default_device() -> DeviceChoice {
    DeviceChoice::Auto
}

fn default_variant() -> u32 {
    5
}

fn default_per_thread() -> u32 {
    4
}

fn default_block() -> u32 {
    256
}

fn default_precision() -> Precision {
    Precision::F32
}

impl Default for EngineCfg {
    fn default() -> Self {
        EngineCfg {
            device: default_device(),
            precision: default_precision(),
            threads: 0,
            variant: default_variant(),
            per_thread: default_per_thread(),
            block: default_block(),
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
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

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SolverCfg {
    #[serde(default = "default_iterations")]
    pub iterations: usize,
    /// Relative residual at which to stop early; 0 runs every iteration.
    #[serde(default)]
    pub tolerance: f64,
    /// Weight of W^H W relative to the peak of Q.
    #[serde(default)]
    pub lambda: f64,
}

fn default_iterations() -> usize {
    60
}

impl Default for SolverCfg {
    fn default() -> Self {
        SolverCfg {
            iterations: default_iterations(),
            tolerance: 0.0,
            lambda: 0.0,
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

/// The regulariser W (see recon-prior for the anatomical one).
#[derive(Debug, Clone, Deserialize)]
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

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GriddingCfg {
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

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutputCfg {
    /// Output folder.
    pub dir: PathBuf,
    /// Also store Q in recon.h5.
    #[serde(default)]
    pub q: bool,
}

/// A whole run configuration.
#[derive(Debug, Clone, Deserialize)]
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
    #[serde(default)]
    pub engine: EngineCfg,
    #[serde(default)]
    pub q: QCfg,
    #[serde(default)]
    pub solver: SolverCfg,
    #[serde(default)]
    pub regulariser: RegulariserCfg,
    #[serde(default)]
    pub gridding: GriddingCfg,
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
}

impl Loaded {
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

fn fail<T>(key: &str, msg: impl fmt::Display) -> Result<T> {
    bail!("config key `{key}`: {msg}")
}

impl Config {
    /// Parses TOML; errors name the offending key.
    pub fn parse(text: &str) -> Result<Self> {
        let de = toml::Deserializer::new(text);
        serde_path_to_error::deserialize(de).map_err(|e| {
            let key = e.path().to_string();
            let inner = e.into_inner();
            let msg = inner.message().trim_end().to_string();
            let line = inner
                .span()
                .map(|s| format!(" (line {})", text[..s.start].lines().count().max(1)))
                .unwrap_or_default();
            if key == "." {
                anyhow::anyhow!("config{line}: {msg}")
            } else {
                anyhow::anyhow!("config key `{key}`{line}: {msg}")
            }
        })
    }

    /// Checks every value; see the README for the allowed ranges.
    pub fn validate(&self) -> Result<()> {
        match (&self.scan, &self.phantom, &self.trajectory) {
            (Some(_), None, None) => {
                if self.noise.is_some() {
                    return fail(
                        "noise",
                        "noise is added to synthetic data only: remove [noise] with [scan]",
                    );
                }
                // [grid], if given, is checked against the file.
            }
            (None, Some(_), Some(_)) if self.grid.is_some() => {}
            (Some(_), _, _) => return fail(
                "scan",
                "give either [scan] or synthetic data ([grid], [phantom], [trajectory]), not both",
            ),
            _ => {
                let missing: Vec<&str> = [
                    ("grid", self.grid.is_none()),
                    ("phantom", self.phantom.is_none()),
                    ("trajectory", self.trajectory.is_none()),
                ]
                .iter()
                .filter(|(_, m)| *m)
                .map(|(k, _)| *k)
                .collect();
                return fail(
                    missing[0],
                    format!("missing: synthetic data need [grid], [phantom] and [trajectory] (missing: {}), or give [scan] file = ...", missing.join(", ")),
                );
            }
        }
        let (Some(grid), Some(phantom)) = (&self.grid, &self.phantom) else {
            return self.validate_common();
        };
        for n in grid.matrix.0 {
            if n < 4 || n % 2 != 0 || n > 1024 {
                return fail(
                    "grid.matrix",
                    format!("each size must be even, from 4 to 1024; got {n}"),
                );
            }
        }
        for f in grid.fov_mm.0 {
            if !(f.is_finite() && f > 0.0) {
                return fail("grid.fov_mm", format!("must be positive, got {f}"));
            }
        }
        if let Some(m) = &phantom.anatomy_matrix {
            if phantom.anatomy.is_none() {
                return fail(
                    "phantom.anatomy_matrix",
                    "is the matrix of phantom.anatomy: give phantom.anatomy too",
                );
            }
            for n in m.0 {
                if n < 2 || n % 2 != 0 || n > 1024 {
                    return fail(
                        "phantom.anatomy_matrix",
                        format!("each size must be even, from 2 to 1024; got {n}"),
                    );
                }
            }
        }
        if self.regulariser.kind == RegulariserKind::Anatomical && phantom.anatomy.is_none() {
            return fail(
                "regulariser.kind",
                "\"anatomical\" needs a reference image: set phantom.anatomy (a proton-density twin of the phantom)",
            );
        }
        if !(1..=16).contains(&phantom.supersample) {
            return fail(
                "phantom.supersample",
                format!("must be 1 to 16, got {}", phantom.supersample),
            );
        }
        if let Some(t) = &self.trajectory {
            t.check().map_err(|e| anyhow::anyhow!("config key {e}"))?;
        }
        self.validate_common()
    }

    /// Checks shared by both data sources.
    fn validate_common(&self) -> Result<()> {
        if let Some(n) = &self.noise {
            if !(n.snr.is_finite() && n.snr > 0.0) {
                return fail(
                    "noise.snr",
                    format!(
                        "must be positive (omit [noise] for noiseless data), got {}",
                        n.snr
                    ),
                );
            }
        }
        if self.solver.iterations == 0 {
            return fail("solver.iterations", "must be at least 1");
        }
        if !(self.solver.tolerance.is_finite() && (0.0..1.0).contains(&self.solver.tolerance)) {
            return fail(
                "solver.tolerance",
                format!("must lie in [0, 1), got {}", self.solver.tolerance),
            );
        }
        if !(self.solver.lambda.is_finite() && self.solver.lambda >= 0.0) {
            return fail(
                "solver.lambda",
                format!("must be zero or positive, got {}", self.solver.lambda),
            );
        }
        if let Err(recon_core::Error::Invalid { what, reason }) = self.regulariser.params().check()
        {
            return fail(&format!("regulariser.{what}"), reason);
        }
        if !(self.gridding.oversampling.is_finite()
            && (1.0..=4.0).contains(&self.gridding.oversampling))
        {
            return fail(
                "gridding.oversampling",
                format!("must lie in [1, 4], got {}", self.gridding.oversampling),
            );
        }
        if self.gridding.dcf_iterations > 1000 {
            return fail(
                "gridding.dcf_iterations",
                format!("must be at most 1000, got {}", self.gridding.dcf_iterations),
            );
        }
        if !(1..=6).contains(&self.engine.variant) {
            return fail(
                "engine.variant",
                format!("must be 1 to 6, got {}", self.engine.variant),
            );
        }
        if ![1, 2, 4, 8].contains(&self.engine.per_thread) {
            return fail(
                "engine.per_thread",
                format!("must be 1, 2, 4 or 8, got {}", self.engine.per_thread),
            );
        }
        if !(32..=1024).contains(&self.engine.block) || self.engine.block % 32 != 0 {
            return fail(
                "engine.block",
                format!(
                    "must be a multiple of 32 from 32 to 1024, got {}",
                    self.engine.block
                ),
            );
        }
        if self.engine.device == DeviceChoice::Cuda && self.engine.precision == Precision::F64 {
            return fail(
                "engine.precision",
                "the GPU computes in f32: use precision = \"f32\" with device = \"cuda\"",
            );
        }
        if self.engine.threads > 4096 {
            return fail(
                "engine.threads",
                format!("must be 0 (all cores) to 4096, got {}", self.engine.threads),
            );
        }
        Ok(())
    }
}

/// Resolves a path from the config against the config's folder.
pub fn resolve(config_path: &Path, p: &Path) -> PathBuf {
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        config_path.parent().unwrap_or(Path::new(".")).join(p)
    }
}

/// Reads, parses and validates a config, and loads its phantom.
pub fn load(path: &Path, out_override: Option<&Path>) -> Result<Loaded> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read config {}", path.display()))?;
    let mut cfg = Config::parse(&text).with_context(|| format!("in {}", path.display()))?;
    cfg.validate()
        .with_context(|| format!("in {}", path.display()))?;
    cfg.output.dir = match out_override {
        Some(o) => o.to_path_buf(),
        None => resolve(path, &cfg.output.dir),
    };
    if let Some(d) = &cfg.q.dir {
        cfg.q.dir = Some(resolve(path, d));
    }
    let at = |key: &str| format!("config key `{key}` in {}", path.display());
    let (grid, source) = if let Some(scan) = &mut cfg.scan {
        scan.file = resolve(path, &scan.file);
        // Read in a child process: a damaged HDF5 file may crash or hang
        // the HDF5 library (see inspect.rs).
        let units = match scan.trajectory_units {
            TrajectoryUnits::Normalized => crate::inspect::UnitsArg::Normalized,
            TrajectoryUnits::CyclesPerFov => crate::inspect::UnitsArg::CyclesPerFov,
        };
        let (kind, s) = crate::inspect::read_isolated(&scan.file, units, scan.allow_beyond_nyquist)
            .with_context(|| at("scan.file"))?;
        if let Some(w) = crate::inspect::units_warning(kind, units, &s) {
            eprintln!("warning: {}: {w}", scan.file.display());
        }
        if cfg.regulariser.kind == RegulariserKind::Anatomical && s.anatomy.is_none() {
            anyhow::bail!(
                "config key `regulariser.kind` in {}: \"anatomical\" needs a reference image, but {} has no /reference/anatomy",
                path.display(),
                scan.file.display()
            );
        }
        if let Some(g) = &cfg.grid {
            if g.matrix.0 != s.grid.n || g.fov_mm.0 != s.grid.fov_mm {
                anyhow::bail!(
                    "config key `grid` in {}: matrix {:?} and FOV {:?} mm disagree with the scan file's {:?} and {:?} mm (omit [grid] to use the file's)",
                    path.display(), g.matrix.0, g.fov_mm.0, s.grid.n, s.grid.fov_mm
                );
            }
        }
        (s.grid, Source::Scan(s))
    } else {
        let pc = cfg.phantom.as_mut().expect("validated");
        pc.file = resolve(path, &pc.file);
        let phantom = Phantom::load(&pc.file).with_context(|| at("phantom.file"))?;
        let anatomy = match &mut pc.anatomy {
            Some(a) => {
                *a = resolve(path, a);
                Some(Phantom::load(a).with_context(|| at("phantom.anatomy"))?)
            }
            None => None,
        };
        let g = cfg.grid.as_ref().expect("validated");
        let grid = recon_core::Grid::new(g.matrix.0, g.fov_mm.0)?;
        let trajectory = cfg.trajectory.clone().expect("validated");
        (
            grid,
            Source::Synthetic {
                phantom,
                anatomy,
                trajectory,
            },
        )
    };
    Ok(Loaded {
        path: path.to_path_buf(),
        cfg,
        grid,
        source,
    })
}

/// The Q cache folder of a config.
pub fn cache_dir(cfg: &Config) -> PathBuf {
    if let Some(d) = &cfg.q.dir {
        return d.clone();
    }
    if let Some(d) = std::env::var_os("RECON_CACHE_DIR") {
        return PathBuf::from(d);
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(|| PathBuf::from(".cache"));
    base.join("recon").join("q")
}
