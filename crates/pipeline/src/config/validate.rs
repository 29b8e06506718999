//! Parsing and checking a config: every value, each error naming its key
//! and what is allowed.

use super::*;
use crate::{bail, Result};

fn fail<T>(key: &str, msg: impl fmt::Display) -> Result<T> {
    bail!("config key `{key}`: {msg}")
}

impl Config {
    /// Parses TOML; errors name the offending key.
    pub fn parse(text: &str) -> Result<Self> {
        Self::parse_lines(text, true)
    }

    /// [`Config::parse`] of TOML that no user wrote line by line (a config
    /// with the command line's settings): errors name the key, no line.
    pub fn parse_without_lines(text: &str) -> Result<Self> {
        Self::parse_lines(text, false)
    }

    fn parse_lines(text: &str, lines: bool) -> Result<Self> {
        let de = toml::Deserializer::new(text);
        serde_path_to_error::deserialize(de).map_err(|e| {
            let key = e.path().to_string();
            let inner = e.into_inner();
            let msg = inner.message().trim_end().to_string();
            let line = inner
                .span()
                .filter(|_| lines)
                .map(|s| format!(" (line {})", text[..s.start].lines().count().max(1)))
                .unwrap_or_default();
            if key == "." {
                crate::Error::Invalid(format!("config{line}: {msg}"))
            } else {
                crate::Error::Invalid(format!("config key `{key}`{line}: {msg}"))
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
                    format!("missing: synthetic data need [grid], [phantom] and [trajectory] (missing: {}), or give a scan file ([scan] file = ..., or `recon SCAN` on the command line)", missing.join(", ")),
                );
            }
        }
        let (Some(grid), Some(phantom)) = (&self.grid, &self.phantom) else {
            return self.validate_common();
        };
        if let Some(rule) = recon_core::matrix_problem(grid.matrix.0) {
            return fail("grid.matrix", format!("{rule}; got {:?}", grid.matrix.0));
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
        if let (Some(_), Some(_)) = (&self.prior.reference, &phantom.anatomy) {
            return fail(
                "prior.reference",
                "give the reference as phantom.anatomy or as prior.reference, not both",
            );
        }
        if let (Some(key), None, None) = (
            self.needs_reference(),
            &phantom.anatomy,
            &self.prior.reference,
        ) {
            return fail(
                key,
                format!(
                    "{} needs a reference image: set phantom.anatomy (a proton-density twin of the phantom) or prior.reference (a NIfTI file)",
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
            t.check()
                .map_err(|e| crate::Error::Invalid(format!("config key {e}")))?;
        }
        if let Some(c) = &self.coils {
            c.coils()
                .check()
                .map_err(|e| crate::Error::Invalid(format!("config key `coils`: {e}")))?;
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
        if s.smoothing.is_multiple_of(2) || s.smoothing > 63 {
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
        if self.lambda() == Lambda::Gcv && self.prior.kind.sparse() {
            return fail(
                "solver.lambda",
                format!(
                    "\"gcv\" is for the quadratic prior, whose image is linear in the data; \
                     prior.kind = \"{}\" takes a value or \"auto\" (the discrepancy principle)",
                    self.prior.kind.name()
                ),
            );
        }
        if let Lambda::Fixed(v) = self.solver.lambda {
            if !(v.is_finite() && v >= 0.0) {
                return fail(
                    "solver.lambda",
                    format!("must be zero or positive, \"auto\" or \"gcv\", got {v}"),
                );
            }
        }
        if let Err((key, msg)) = self.check_prior() {
            return fail(key, msg);
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
        if !(32..=1024).contains(&e.block()) || !e.block().is_multiple_of(32) {
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
