//! The schema of several coils: `[coils]` (synthetic receive coils) and
//! `[sense]` (how their data are prepared and their maps found).

use super::yes;
use serde::Deserialize;

/// Synthetic receive coils (synthetic data only). Without `[coils]` the
/// data come from one coil of sensitivity 1, as before.
#[derive(Debug, Clone, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct CoilsCfg {
    /// Number of coils, 1 to 128.
    pub count: usize,
    /// "ring" (in the z = 0 plane) or "helmet" (over the upper half sphere).
    #[serde(default)]
    pub arrangement: ArrangementCfg,
    /// Distance of the coils from the centre, in half FOVs.
    #[serde(default = "default_coil_radius")]
    pub radius: f64,
    /// Correlation of neighbouring coils' noise, 0 to below 1 (with [noise]).
    #[serde(default)]
    pub noise_correlation: f64,
}

#[derive(Debug, Clone, Copy, Deserialize, serde::Serialize, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum ArrangementCfg {
    #[default]
    Ring,
    Helmet,
}

fn default_coil_radius() -> f64 {
    1.2
}

impl CoilsCfg {
    pub fn coils(&self) -> recon_synth::Coils {
        recon_synth::Coils {
            count: self.count,
            arrangement: match self.arrangement {
                ArrangementCfg::Ring => recon_synth::Arrangement::Ring,
                ArrangementCfg::Helmet => recon_synth::Arrangement::Helmet,
            },
            radius: self.radius,
        }
    }
}

/// Where SENSE's coil maps come from.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum MapsSource {
    /// Estimated from the data (Inati's iteration on low-resolution coil
    /// images of the k-space centre).
    #[default]
    Estimate,
    /// Estimated from the data by ESPIRiT (Uecker et al. 2014): kernels
    /// from the Cartesian k-space centre of the gridded coil images, maps
    /// as the eigenvectors of eigenvalue near 1 (`recon_coils::espirit_maps`).
    Espirit,
    /// The sensitivities that came with the data: the synthetic coils' own
    /// (the best SENSE can do, for comparison), or the scan file's
    /// `/coils/maps`. Normalised by their root sum of squares.
    Given,
}

/// SENSE settings, used when the data have several coils.
#[derive(Debug, Clone, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct SenseCfg {
    #[serde(default)]
    pub maps: MapsSource,
    /// Radius of the k-space centre the maps are estimated from, in
    /// cycles/FOV (at most a quarter of the smallest matrix size).
    #[serde(default = "default_calibration")]
    pub calibration: f64,
    /// Width of the box that smooths the maps, in voxels (odd).
    #[serde(default = "default_smoothing")]
    pub smoothing: usize,
    /// Signal, as a fraction of its peak, below which the maps fade to 0.
    #[serde(default = "default_map_floor")]
    pub floor: f64,
    /// Whiten the coils' noise when its covariance is known (synthetic coil
    /// noise; a scan file's noise samples or covariance).
    #[serde(default = "yes")]
    pub prewhiten: bool,
    /// Compress to this many virtual coils ...
    pub compress_coils: Option<usize>,
    /// ... or to the fewest that keep this fraction of the data's energy.
    pub compress_energy: Option<f64>,
}

fn default_calibration() -> f64 {
    12.0
}

fn default_smoothing() -> usize {
    recon_coils::MapParams::default().smoothing
}

fn default_map_floor() -> f64 {
    recon_coils::MapParams::default().floor
}

impl Default for SenseCfg {
    fn default() -> Self {
        SenseCfg {
            maps: MapsSource::Estimate,
            calibration: default_calibration(),
            smoothing: default_smoothing(),
            floor: default_map_floor(),
            prewhiten: true,
            compress_coils: None,
            compress_energy: None,
        }
    }
}

impl SenseCfg {
    pub fn params(&self) -> recon_coils::MapParams {
        recon_coils::MapParams {
            smoothing: self.smoothing,
            floor: self.floor,
            ..recon_coils::MapParams::default()
        }
    }
}
