//! Parsing, checking and loading a config: every value is checked, and
//! every file it names read, before anything is computed or written.

use super::*;
use anyhow::{bail, Context, Result};
use std::path::Path;

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
        if let (Some(key), None) = (self.needs_reference(), &phantom.anatomy) {
            return fail(
                key,
                format!(
                    "{} needs a reference image: set phantom.anatomy (a proton-density twin of the phantom)",
                    self.reference_user()
                ),
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
        if let Some(c) = &self.coils {
            c.coils()
                .check()
                .map_err(|e| anyhow::anyhow!("config key `coils`: {e}"))?;
            let r = c.noise_correlation;
            if !(r.is_finite() && (0.0..1.0).contains(&r)) {
                return fail(
                    "coils.noise_correlation",
                    format!("must lie in [0, 1), got {r}"),
                );
            }
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
        if self.scan.is_some() && self.coils.is_some() {
            return fail(
                "coils",
                "[coils] simulates receive coils for synthetic data; a scan file's coils are its channels: remove [coils] with [scan]",
            );
        }
        let s = &self.sense;
        if s.maps == MapsSource::Given && self.scan.is_none() && self.coils.is_none() {
            return fail(
                "sense.maps",
                "\"given\" uses the synthetic coils' sensitivities: it needs [coils] (or use \"estimate\")",
            );
        }
        if !(s.calibration.is_finite() && s.calibration > 0.0) {
            return fail(
                "sense.calibration",
                format!("must be positive (cycles/FOV), got {}", s.calibration),
            );
        }
        if s.smoothing % 2 == 0 || s.smoothing > 63 {
            return fail(
                "sense.smoothing",
                format!("must be odd, from 1 to 63 voxels, got {}", s.smoothing),
            );
        }
        if !(s.floor.is_finite() && (0.0..1.0).contains(&s.floor)) {
            return fail(
                "sense.floor",
                format!("must lie in [0, 1), got {}", s.floor),
            );
        }
        match (s.compress_coils, s.compress_energy) {
            (Some(_), Some(_)) => {
                return fail(
                    "sense.compress_energy",
                    "give sense.compress_coils or sense.compress_energy, not both",
                )
            }
            (Some(0), None) => return fail("sense.compress_coils", "must be at least 1"),
            (None, Some(f)) if !(f.is_finite() && f > 0.0 && f <= 1.0) => {
                return fail(
                    "sense.compress_energy",
                    format!("must lie in (0, 1], got {f}"),
                )
            }
            _ => {}
        }
        if self.solver.iterations == Some(0) {
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
        if let Err((key, msg)) = self.check_prior() {
            return fail(key, msg);
        }
        if self.solver.inner == 0 {
            return fail(
                "solver.inner",
                "ADMM needs at least one CG iteration per step",
            );
        }
        let a = self.solver.relaxation;
        if !(a.is_finite() && (1.0..2.0).contains(&a)) {
            return fail("solver.relaxation", format!("must lie in [1, 2), got {a}"));
        }
        if !(self.solver.rho.is_finite() && self.solver.rho > 0.0) {
            return fail(
                "solver.rho",
                format!("must be finite and positive, got {}", self.solver.rho),
            );
        }
        if let Err(recon_core::Error::Invalid { what, reason }) = self.regulariser.params().check()
        {
            return fail(&format!("regulariser.{what}"), reason);
        }
        if self.gridding.oversampling != 2.0 {
            return fail(
                "gridding.oversampling",
                format!(
                    "the gridding baseline runs through the NUFFT, which upsamples by 2: \
                     remove the key or set 2, got {}",
                    self.gridding.oversampling
                ),
            );
        }
        if self.gridding.dcf_iterations > 1000 {
            return fail(
                "gridding.dcf_iterations",
                format!("must be at most 1000, got {}", self.gridding.dcf_iterations),
            );
        }
        let e = &self.engine;
        match e.kind {
            EngineKind::Exact => {
                if let Some(t) = e.tolerance {
                    return fail(
                        "engine.tolerance",
                        format!(
                            "{t:e} belongs to the nufft engine, but kind = \"exact\" sums exactly: \
                             remove it, or set kind = \"nufft\""
                        ),
                    );
                }
            }
            EngineKind::Nufft => {
                for (key, set) in [
                    ("engine.variant", e.variant.is_some()),
                    ("engine.per_thread", e.per_thread.is_some()),
                    ("engine.block", e.block.is_some()),
                ] {
                    if set {
                        return fail(
                            key,
                            "belongs to the exact engine's GPU kernels, but kind = \"nufft\" \
                             (the default) has none: remove it, or set kind = \"exact\"",
                        );
                    }
                }
                let t = e
                    .tolerance
                    .unwrap_or(recon_encoding::Engine::DEFAULT_TOLERANCE);
                if !(t.is_finite() && (1e-14..=MAX_ENGINE_TOLERANCE).contains(&t)) {
                    return fail(
                        "engine.tolerance",
                        format!(
                            "must lie in [1e-14, 1e-3], got {t:e} (coarser NUFFTs cost the \
                             iterative image: 2.4 dB on configs/sodium.toml at 1e-2, 16 dB at 1e-1)"
                        ),
                    );
                }
                if e.precision == Precision::F32 && t < 1e-6 {
                    return fail(
                        "engine.tolerance",
                        format!(
                            "{t:e} is below what float32 reaches (1e-6): use a tolerance of at \
                             least 1e-6, or precision = \"f64\" (CPU)"
                        ),
                    );
                }
            }
        }
        if !(1..=6).contains(&e.variant()) {
            return fail(
                "engine.variant",
                format!("must be 1 to 6, got {}", e.variant()),
            );
        }
        if ![1, 2, 4, 8].contains(&e.per_thread()) {
            return fail(
                "engine.per_thread",
                format!("must be 1, 2, 4 or 8, got {}", e.per_thread()),
            );
        }
        if !(32..=1024).contains(&e.block()) || e.block() % 32 != 0 {
            return fail(
                "engine.block",
                format!(
                    "must be a multiple of 32 from 32 to 1024, got {}",
                    e.block()
                ),
            );
        }
        if self.engine.device == DeviceChoice::Cuda && self.engine.precision == Precision::F64 {
            return fail(
                "engine.precision",
                "the GPU computes in f32: use precision = \"f32\" with device = \"cuda\"",
            );
        }
        crate::backend::check_threads("config key `engine.threads`", self.engine.threads)?;
        Ok(())
    }
}

/// The coarsest NUFFT tolerance a reconstruction accepts: at 1e-3 the
/// images match the default's (configs/sodium.toml 32.68 dB either way), at
/// 1e-2 they lose 2.4 dB (and 4 dB on configs/test-small.toml, below the
/// gridding baseline), at 1e-1 up to 16 dB. (`bench-nufft` times coarser ones.)
pub const MAX_ENGINE_TOLERANCE: f64 = 1e-3;

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
    check_cache_place(&cfg).with_context(|| format!("in {}", path.display()))?;
    let at = |key: &str| format!("config key `{key}` in {}", path.display());
    let reference = cfg.needs_reference().map(|key| (key, cfg.reference_user()));
    let (grid, source) = if let Some(scan) = &mut cfg.scan {
        scan.file = resolve(path, &scan.file);
        // Read in a child process: a damaged HDF5 file may crash or hang
        // the HDF5 library (see inspect.rs).
        let units = match scan.trajectory_units {
            TrajectoryUnits::Normalized => crate::reader::UnitsArg::Normalized,
            TrajectoryUnits::CyclesPerFov => crate::reader::UnitsArg::CyclesPerFov,
        };
        let (kind, s) = crate::reader::read_isolated(&scan.file, units, scan.allow_beyond_nyquist)
            .with_context(|| at("scan.file"))?;
        if let Some(w) = crate::inspect::units_warning(kind, units, &s) {
            eprintln!("warning: {}: {w}", scan.file.display());
        }
        // Noise that cannot whiten stops the run here, naming where in
        // the file it is; noise that whitens poorly is warned about.
        if let (true, Some(noise)) = (cfg.sense.prewhiten && s.coils > 1, &s.noise) {
            check_noise(noise, s.coils, kind, &scan.file, path)?;
        }
        if cfg.sense.maps == MapsSource::Given && s.maps.is_none() {
            anyhow::bail!(
                "config key `sense.maps` in {}: \"given\" uses the scan file's coil maps, but {} has no /coils/maps (use \"estimate\")",
                path.display(),
                scan.file.display()
            );
        }
        if let (Some((key, user)), None) = (reference, &s.anatomy) {
            anyhow::bail!(
                "config key `{key}` in {}: {user} needs a reference image, but {} has no /reference/anatomy",
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
    let coils = match &source {
        Source::Scan(s) => s.coils,
        Source::Synthetic { .. } => cfg.coils.as_ref().map_or(1, |c| c.count),
    };
    if let Some(k) = cfg.sense.compress_coils.filter(|k| *k > coils) {
        eprintln!(
            "warning: config key `sense.compress_coils` in {}: {k} virtual coils asked of data \
             with {coils} coil(s): all {coils} are kept, uncompressed",
            path.display()
        );
    }
    // The voxel basis is the model's, not the data's.
    let grid = grid.with_basis(cfg.engine.basis());
    Ok(Loaded {
        path: path.to_path_buf(),
        cfg,
        grid,
        source,
    })
}

/// Checks a scan's coil noise before anything is computed: enough samples
/// per coil (an error below 4 per coil, a warning below 20), a covariance
/// that whitens (Hermitian, real positive variances, not singular), and a
/// warning when its condition number is beyond what whitening survives.
/// Messages name the dataset, or an ISMRMRD file's noise acquisitions.
fn check_noise(
    noise: &recon_io::scan::CoilNoise,
    coils: usize,
    kind: crate::reader::Kind,
    file: &Path,
    config: &Path,
) -> Result<()> {
    use recon_io::scan::CoilNoise;
    let ismrmrd = kind == crate::reader::Kind::Ismrmrd;
    let name = match (noise, ismrmrd) {
        (_, true) => {
            "its noise measurement acquisitions (dataset/data, flag ACQ_IS_NOISE_MEASUREMENT)"
        }
        (CoilNoise::Samples(_), false) => "dataset kspace/noise",
        (CoilNoise::Covariance(_), false) => "dataset kspace/noise_covariance",
    };
    let fail = |e: &dyn fmt::Display| {
        anyhow::anyhow!(
            "{}: {name}: {e} (or set sense.prewhiten = false in {})",
            file.display(),
            config.display()
        )
    };
    let psi = match noise {
        CoilNoise::Samples(n) => {
            let k = n.len() / coils.max(1);
            if let Some(w) = recon_coils::check_noise_samples(k, coils).map_err(|e| fail(&e))? {
                eprintln!("warning: {}: {name}: {w}", file.display());
            }
            recon_coils::covariance(n, coils).map_err(|e| fail(&e))?
        }
        CoilNoise::Covariance(c) => c.clone(),
    };
    recon_coils::whitening(&psi, coils).map_err(|e| fail(&e))?;
    let k = recon_coils::condition(&psi, coils).map_err(|e| fail(&e))?;
    if k > recon_coils::MAX_CONDITION {
        eprintln!(
            "warning: {}: {name}: the noise covariance has condition number {k:.1e} (above \
             {:.0e}): whitening amplifies its weakest direction {:.0} times, beyond any real coil \
             array and beyond what float32 data carry; check the noise data, or set \
             sense.prewhiten = false",
            file.display(),
            recon_coils::MAX_CONDITION,
            k.sqrt()
        );
    }
    Ok(())
}

/// Refuses a Q cache inside the output folder (or the folder itself): a
/// run replaces its output folder whole, so the commit would throw the
/// cache away, and the cache's files would then make the folder one that
/// recon refuses to replace.
fn check_cache_place(cfg: &Config) -> Result<()> {
    if !cfg.q.cache {
        return Ok(());
    }
    let cache = cache_dir(cfg);
    let (c, o) = (absolute(&cache), absolute(&cfg.output.dir));
    if c.starts_with(&o) {
        let from = if cfg.q.dir.is_some() {
            "`q.dir`"
        } else if std::env::var_os("RECON_CACHE_DIR").is_some() {
            "RECON_CACHE_DIR"
        } else {
            "the default cache folder"
        };
        anyhow::bail!(
            "config keys `q.dir` and `output.dir`: the Q cache {} ({from}) is {} the output folder \
             {}, which each run replaces whole: put the cache elsewhere, or set q.cache = false",
            cache.display(),
            if c == o { "the same folder as" } else { "inside" },
            cfg.output.dir.display()
        );
    }
    Ok(())
}

/// `p` as an absolute path with its links resolved as far as it exists
/// (`.` and `..` resolved too), for comparing folders.
fn absolute(p: &Path) -> PathBuf {
    let p = std::env::current_dir().map_or_else(|_| p.to_path_buf(), |d| d.join(p));
    let mut existing = p.as_path();
    let mut rest = Vec::new();
    loop {
        if let Ok(real) = std::fs::canonicalize(existing) {
            let mut out = real;
            for part in rest.iter().rev() {
                match part {
                    std::path::Component::ParentDir => {
                        out.pop();
                    }
                    std::path::Component::CurDir => {}
                    c => out.push(c),
                }
            }
            return out;
        }
        match (existing.parent(), existing.components().next_back()) {
            (Some(parent), Some(last)) => {
                rest.push(last);
                existing = parent;
            }
            _ => return p.clone(),
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reader::Kind;
    use recon_core::Complex;
    use recon_io::scan::CoilNoise;

    #[test]
    fn noise_problems_name_where_the_noise_came_from() {
        // 3 samples per coil of 3 coils: too few, from either kind of file.
        let noise = CoilNoise::Samples(
            (0..9)
                .map(|i| Complex::new((i as f64).sin(), (i as f64).cos()))
                .collect(),
        );
        let (file, cfg) = (Path::new("scan.h5"), Path::new("run.toml"));
        let e = check_noise(&noise, 3, Kind::Ismrmrd, file, cfg)
            .unwrap_err()
            .to_string();
        assert!(e.contains("noise measurement acquisitions"), "{e}");
        assert!(!e.contains("kspace/noise"), "{e}");
        let e = check_noise(&noise, 3, Kind::Scan, file, cfg)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("dataset kspace/noise:") && e.contains("at least 12"),
            "{e}"
        );
    }

    #[test]
    fn folders_compare_as_absolute_paths() {
        let here = std::env::current_dir().unwrap();
        assert_eq!(
            absolute(Path::new("a/./b/../c")),
            std::fs::canonicalize(&here).unwrap().join("a/c")
        );
        assert!(absolute(Path::new("x/q")).starts_with(absolute(Path::new("x"))));
    }
}
