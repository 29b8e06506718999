//! Loading a checked config (validate.rs checks it): every file it names
//! read before anything is computed or written.

use super::*;
use crate::scan::{Kind, ReadScan, Units};
use crate::{Context, Result};
use recon_io::scan::Scan;
use std::path::{Path, PathBuf};

/// Resolves a path from the config against the config's folder.
pub fn resolve(config_path: &Path, p: &Path) -> PathBuf {
    if p.is_absolute() {
        normalise(p)
    } else {
        normalise(&config_path.parent().unwrap_or(Path::new(".")).join(p))
    }
}

/// `p` without `.` components and with each `..` taking back the name
/// before it (lexically: as printed, `configs/../x.h5` is `x.h5`).
pub fn normalise(p: &Path) -> PathBuf {
    use std::path::Component;
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                let last = out.components().next_back();
                match last {
                    Some(Component::Normal(_)) => {
                        out.pop();
                    }
                    // `/..` is `/`; a leading `..` stays.
                    Some(Component::RootDir) => {}
                    _ => out.push(".."),
                }
            }
            c => out.push(c.as_os_str()),
        }
    }
    if out.as_os_str().is_empty() {
        out.push(".");
    }
    out
}

/// What messages call the settings of a run that has no config file (and
/// the folder relative paths start from: the current one).
pub const COMMAND_LINE: &str = "the command line";

/// Reads, parses and validates a config, and loads its phantom or its scan
/// file (by `read`: [`crate::read_in_process`], or the binary's reader in a
/// child process). Warnings (input that works, but poorly) are in
/// [`Loaded::warnings`].
pub fn load(path: &Path, out_override: Option<&Path>, read: ReadScan) -> Result<Loaded> {
    load_with(
        Some(path),
        &Settings::default(),
        out_override,
        read,
        &|_| {},
    )
}

/// [`load`] of the config `config` (none: an empty one) with the command
/// line's `settings` laid over it ([`Settings::compose`]); relative paths
/// in settings start from the current folder.
pub fn load_with(
    config: Option<&Path>,
    settings: &Settings,
    out_override: Option<&Path>,
    read: ReadScan,
    checked: &dyn Fn(&Config),
) -> Result<Loaded> {
    let (path, text) = match config {
        Some(p) => (
            p.to_path_buf(),
            std::fs::read_to_string(p)
                .with_context(|| format!("cannot read config {}", p.display()))?,
        ),
        None => (PathBuf::from(COMMAND_LINE), String::new()),
    };
    let origin = match (config, settings.is_empty()) {
        (Some(p), false) => format!("in {} with the command line's settings", p.display()),
        _ => format!("in {}", path.display()),
    };
    let cfg = if settings.is_empty() {
        Config::parse(&text).context(origin.clone())?
    } else {
        // The config alone first: its own mistakes keep their line numbers.
        if config.is_some() {
            Config::parse(&text).with_context(|| format!("in {}", path.display()))?;
        }
        let text = settings.compose(&text).context(origin.clone())?;
        Config::parse_without_lines(&text).context(origin.clone())?
    };
    cfg.validate().context(origin)?;
    checked(&cfg);
    load_config(&path, cfg, out_override, read)
}

/// [`load`] from the parsed and validated `cfg` of `path`.
fn load_config(
    path: &Path,
    mut cfg: Config,
    out_override: Option<&Path>,
    read: ReadScan,
) -> Result<Loaded> {
    let mut warnings = Vec::new();
    cfg.output.dir = match out_override {
        Some(o) => Some(normalise(o)),
        None => cfg.output.dir.as_deref().map(|d| resolve(path, d)),
    };
    if let Some(d) = &cfg.q.dir {
        cfg.q.dir = Some(resolve(path, d));
    }
    check_cache_place(&cfg).with_context(|| format!("in {}", path.display()))?;
    let at = |key: &str| format!("config key `{key}` in {}", path.display());
    let scan = match &mut cfg.scan {
        Some(scan) => {
            scan.file = resolve(path, &scan.file);
            let units = match scan.trajectory_units {
                TrajectoryUnits::Normalized => Units::Normalized,
                TrajectoryUnits::CyclesPerFov => Units::CyclesPerFov,
            };
            let (kind, s) = read(&scan.file, units, scan.allow_beyond_nyquist)
                .with_context(|| at("scan.file"))?;
            if let Some(w) = crate::scan::units_warning(kind, units, &s) {
                warnings.push(format!("{}: {w}", scan.file.display()));
            }
            Some((kind, s))
        }
        None => None,
    };
    let mut l = with_scan(path, cfg, scan)?;
    warnings.append(&mut l.warnings);
    l.warnings = warnings;
    Ok(l)
}

/// The config of the TOML `text`, whose `[scan]` names a scan made in
/// memory (its `file` only names it in messages): a benchmark's problem, or
/// a caller's arrays. Checked as [`load`] checks a config and its scan.
pub fn in_memory(text: &str, scan: Scan) -> Result<Loaded> {
    let path = Path::new("(in memory)");
    let cfg = Config::parse(text).context("in a config made in memory")?;
    cfg.validate().context("in a config made in memory")?;
    with_scan(path, cfg, Some((Kind::Scan, scan)))
}

/// The loaded config of `cfg`, parsed and validated from the file `path`
/// (named in messages, and resolving the phantom's files), with its scan
/// already read: from a file, or made in memory (the benchmarks' problems,
/// a Python caller's arrays), `Kind::Scan` then. Checks the scan against
/// the config (maps, reference, grid) as [`load`] does.
pub fn with_scan(path: &Path, mut cfg: Config, scan: Option<(Kind, Scan)>) -> Result<Loaded> {
    let mut warnings = Vec::new();
    let at = |key: &str| format!("config key `{key}` in {}", path.display());
    let reference = cfg.needs_reference().map(|key| (key, cfg.reference_user()));
    if cfg.scan.is_some() != scan.is_some() {
        crate::bail!(
            "in {}: [scan] and the scan given disagree (one without the other)",
            path.display()
        );
    }
    let (grid, source) = if let (Some(scan), Some((kind, s))) = (&cfg.scan, scan) {
        let s = select_images(s, scan, path)?;
        // Noise that cannot whiten stops the run here, naming where in
        // the file it is; noise that whitens poorly is warned about.
        if let (true, Some(noise)) = (cfg.sense.prewhiten && s.coils > 1, &s.noise) {
            warnings.extend(check_noise(noise, s.coils, kind, &scan.file, path)?);
        }
        if cfg.sense.maps == MapsSource::Given && s.maps.is_none() {
            crate::bail!(
                "config key `sense.maps` in {}: \"given\" uses the scan file's coil maps, but {} has no /coils/maps (use \"estimate\")",
                path.display(),
                scan.file.display()
            );
        }
        if let (Some((key, user)), None, None) = (reference, &s.anatomy, &cfg.prior.reference) {
            crate::bail!(
                "config key `{key}` in {}: {user} needs a reference image, but {} has no /reference/anatomy",
                path.display(),
                scan.file.display()
            );
        }
        if let Some(g) = &cfg.grid {
            if g.matrix.0 != s.grid.n || g.fov_mm.0 != s.grid.fov_mm {
                crate::bail!(
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
        warnings.push(format!(
            "config key `sense.compress_coils` in {}: {k} virtual coils asked of data \
             with {coils} coil(s): all {coils} are kept, uncompressed",
            path.display()
        ));
    }
    if cfg.prior.kind == super::PriorKind::Wavelet {
        if let Err(why) = recon_ops::check_wavelet_grid(grid.n) {
            crate::bail!(
                "config key `prior.kind` in {}: \"wavelet\": {why}",
                path.display()
            );
        }
    }
    // The voxel basis is the model's, not the data's.
    let grid = grid.with_basis(cfg.engine.basis());
    let reference = match &mut cfg.prior.reference {
        Some(file) => {
            *file = resolve(path, file);
            if let Source::Scan(s) = &source {
                if s.anatomy.is_some() {
                    warnings.push(format!(
                        "config key `prior.reference` in {}: {} replaces the scan file's /reference/anatomy",
                        path.display(),
                        file.display()
                    ));
                }
            }
            let r = recon_io::nifti::read_nifti(file).with_context(|| at("prior.reference"))?;
            check_coverage(&grid, &source, &r).with_context(|| {
                format!(
                    "{} (`prior.reference` in {})",
                    file.display(),
                    path.display()
                )
            })?;
            Some(std::sync::Arc::new(r))
        }
        None => None,
    };
    Ok(Loaded {
        path: path.to_path_buf(),
        cfg,
        grid,
        source,
        reference,
        warnings,
    })
}

/// The voxel-to-RAS transforms of the images of `source` on `grid`: each
/// image's geometry's, or the isocentre's (synthetic data, and scans
/// without geometry).
pub fn image_affines(grid: &recon_core::Grid, source: &Source) -> Vec<[[f64; 4]; 3]> {
    use recon_io::geometry::Geometry;
    let of = |g: Option<Geometry>| g.unwrap_or_else(Geometry::identity).affine(grid);
    match source {
        Source::Scan(s) if !s.parts.is_empty() => s.parts.iter().map(|p| of(p.geometry)).collect(),
        Source::Scan(s) => vec![of(s.geometry)],
        Source::Synthetic { .. } => vec![of(None)],
    }
}

/// Refuses a reference that does not cover every image's field of view.
fn check_coverage(
    grid: &recon_core::Grid,
    source: &Source,
    reference: &recon_core::Oriented,
) -> Result<()> {
    for affine in image_affines(grid, source) {
        recon_prior::check_covers(grid, &affine, reference)?;
    }
    Ok(())
}

/// The images `[scan]`'s selection keys keep of a scan of several; a
/// value the file does not have, or an empty list, is an error naming
/// the key and what the file holds.
fn select_images(s: Scan, scan: &super::ScanCfg, path: &Path) -> Result<Scan> {
    let indices = s.indices();
    for (d, (key, wanted)) in scan.selection().into_iter().enumerate() {
        let Some(wanted) = wanted else { continue };
        let mut have: Vec<u16> = indices.iter().map(|i| i.0[d]).collect();
        have.sort_unstable();
        have.dedup();
        let list = |v: &[u16]| {
            v.iter()
                .map(|x| x.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        };
        let (name, plural) = recon_io::geometry::AXES[d];
        if wanted.is_empty() {
            crate::bail!(
                "config key `{key}` in {}: an empty list selects no image; leave the key out to keep every one ({} has {plural} {})",
                path.display(),
                scan.file.display(),
                list(&have)
            );
        }
        if let Some(v) = wanted.iter().find(|v| !have.contains(v)) {
            crate::bail!(
                "config key `{key}` in {}: {} has no {name} {v} (its {plural}: {})",
                path.display(),
                scan.file.display(),
                list(&have)
            );
        }
    }
    let sel = scan.selection();
    Ok(s.select(|i| {
        sel.iter()
            .zip(i.0)
            .all(|((_, w), v)| w.is_none_or(|w| w.contains(&v)))
    }))
}

/// Checks a scan's coil noise before anything is computed: enough samples
/// per coil (an error below 4 per coil, a warning below 20), a covariance
/// that whitens (Hermitian, real positive variances, not singular), and a
/// warning when its condition number is beyond what whitening survives.
/// Messages name the dataset, or an ISMRMRD file's noise acquisitions; the
/// warnings are returned.
fn check_noise(
    noise: &recon_io::scan::CoilNoise,
    coils: usize,
    kind: Kind,
    file: &Path,
    config: &Path,
) -> Result<Vec<String>> {
    use recon_io::scan::CoilNoise;
    let ismrmrd = kind == Kind::Ismrmrd;
    let mut warnings = Vec::new();
    let name = match (noise, ismrmrd) {
        (_, true) => {
            "its noise measurement acquisitions (dataset/data, flag ACQ_IS_NOISE_MEASUREMENT)"
        }
        (CoilNoise::Samples(_), false) => "dataset kspace/noise",
        (CoilNoise::Covariance(_), false) => "dataset kspace/noise_covariance",
    };
    let fail = |e: &dyn fmt::Display| {
        crate::Error::Invalid(format!(
            "{}: {name}: {e} (or set sense.prewhiten = false in {})",
            file.display(),
            config.display()
        ))
    };
    let psi = match noise {
        CoilNoise::Samples(n) => {
            let k = n.len() / coils.max(1);
            if let Some(w) = recon_coils::check_noise_samples(k, coils).map_err(|e| fail(&e))? {
                warnings.push(format!("{}: {name}: {w}", file.display()));
            }
            recon_coils::covariance(n, coils).map_err(|e| fail(&e))?
        }
        CoilNoise::Covariance(c) => c.clone(),
    };
    recon_coils::whitening(&psi, coils).map_err(|e| fail(&e))?;
    let k = recon_coils::condition(&psi, coils).map_err(|e| fail(&e))?;
    if k > recon_coils::MAX_CONDITION {
        warnings.push(format!(
            "{}: {name}: the noise covariance has condition number {k:.1e} (above \
             {:.0e}): whitening amplifies its weakest direction {:.0} times, beyond any real coil \
             array and beyond what float32 data carry; check the noise data, or set \
             sense.prewhiten = false",
            file.display(),
            recon_coils::MAX_CONDITION,
            k.sqrt()
        ));
    }
    Ok(warnings)
}

/// Refuses a Q cache inside the output folder (or the folder itself): a
/// run replaces its output folder whole, so the commit would throw the
/// cache away, and the cache's files would then make the folder one that
/// recon refuses to replace.
fn check_cache_place(cfg: &Config) -> Result<()> {
    let (true, Some(out)) = (cfg.q.cache, &cfg.output.dir) else {
        return Ok(());
    };
    let cache = cache_dir(cfg);
    let (c, o) = (absolute(&cache), absolute(out));
    if c.starts_with(&o) {
        let from = if cfg.q.dir.is_some() {
            "`q.dir`"
        } else if std::env::var_os("RECON_CACHE_DIR").is_some() {
            "RECON_CACHE_DIR"
        } else {
            "the default cache folder"
        };
        crate::bail!(
            "config keys `q.dir` and `output.dir`: the Q cache {} ({from}) is {} the output folder \
             {}, which each run replaces whole: put the cache elsewhere, or set q.cache = false",
            cache.display(),
            if c == o { "the same folder as" } else { "inside" },
            out.display()
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

/// The cache folder of a config: its Q files, and the compiled GPU
/// kernels beside them.
pub fn cache_dir(cfg: &Config) -> PathBuf {
    cfg.q.dir.clone().unwrap_or_else(default_cache_dir)
}

/// The cache folder without a config's `q.dir`: `RECON_CACHE_DIR`, else
/// `recon/q` in the user's cache folder.
pub fn default_cache_dir() -> PathBuf {
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
