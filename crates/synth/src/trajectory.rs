//! k-space trajectories, parameterised in TOML and fully deterministic.
//! Positions are in cycles/FOV; `kmax` is a fraction of Nyquist (N/2).

use crate::SynthError;
use recon_core::Grid;
use serde::{Deserialize, Serialize};
use std::f64::consts::{PI, TAU};

fn one() -> f64 {
    1.0
}

fn quarter() -> f64 {
    0.25
}

/// A trajectory, selected by `kind`.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Trajectory {
    /// 3-D radial "kooshball": centre-out spokes whose directions follow the
    /// 2-D golden means (Chan et al. 2009), so any prefix is near-uniform.
    Radial {
        spokes: usize,
        samples: usize,
        #[serde(default = "one")]
        kmax: f64,
    },
    /// Stack of stars: Cartesian kz partitions, each with the same
    /// `spokes` full-diameter spokes through the centre, each rotated by
    /// the golden angle (111.25 degrees) from the last, so that any prefix
    /// is near-uniform (Winkelmann et al. 2007). On a 2-D grid, one
    /// partition at k_z = 0: 2-D golden-angle radial.
    StackOfStars {
        spokes: usize,
        samples: usize,
        /// kz partitions; default Nz.
        partitions: Option<usize>,
        #[serde(default = "one")]
        kmax: f64,
    },
    /// Stack of spirals: Cartesian kz partitions, each with `interleaves`
    /// Archimedean spirals of `turns` turns out to kmax.
    StackOfSpirals {
        interleaves: usize,
        turns: f64,
        samples: usize,
        /// kz partitions; default Nz.
        partitions: Option<usize>,
        #[serde(default = "one")]
        kmax: f64,
    },
    /// Twisted projection imaging (Boada et al. 1997), the usual sodium
    /// trajectory: radial out to `p kmax`, then twisting on cones so that the
    /// 3-D sampling density stays uniform.
    Tpi {
        cones: usize,
        projections: usize,
        samples: usize,
        #[serde(default = "quarter")]
        p: f64,
        #[serde(default = "one")]
        kmax: f64,
    },
    /// Every Cartesian grid point, `-N/2 <= k < N/2` along each axis.
    Cartesian {},
}

/// Position of sample `i` of `samples` along a readout, from 0 to 1.
fn along(i: usize, samples: usize) -> f64 {
    if samples == 1 {
        0.0
    } else {
        i as f64 / (samples - 1) as f64
    }
}

/// The golden angle between successive full-diameter spokes: 180 degrees
/// over the golden ratio (Winkelmann et al. 2007).
const GOLDEN_ANGLE: f64 = PI * 0.618_033_988_749_894_8;

/// Partition `p` of `parts` Cartesian kz partitions, in [-1, 1) of kmax;
/// 0 for a single partition.
fn partition_kz(p: usize, parts: usize) -> f64 {
    if parts == 1 {
        return 0.0;
    }
    (p as f64 - parts as f64 / 2.0) / (parts as f64 / 2.0)
}

/// Golden means of the 3-D golden-angle radial scheme (Chan et al. 2009).
const PHI1: f64 = 0.465_571_231_876_768_0;
const PHI2: f64 = 0.682_327_803_828_019_3;

fn positive(what: &str, v: usize) -> Result<(), SynthError> {
    if v == 0 {
        return Err(SynthError::Invalid {
            what: format!("trajectory.{what}"),
            reason: "must be at least 1".into(),
        });
    }
    Ok(())
}

fn fraction(what: &str, v: f64, allow_one: bool) -> Result<(), SynthError> {
    let ok = v.is_finite() && v > 0.0 && (v < 1.0 || (allow_one && v == 1.0));
    if !ok {
        let range = if allow_one { "(0, 1]" } else { "(0, 1)" };
        return Err(SynthError::Invalid {
            what: format!("trajectory.{what}"),
            reason: format!("must lie in {range}, got {v}"),
        });
    }
    Ok(())
}

/// A stack's checks: its counts at least 1, `partitions` (when given) at
/// least 1, `kmax` in (0, 1].
fn stack(
    counts: [(&str, usize); 2],
    partitions: Option<usize>,
    kmax: f64,
) -> Result<(), SynthError> {
    for (what, v) in counts {
        positive(what, v)?;
    }
    if let Some(p) = partitions {
        positive("partitions", p)?;
    }
    fraction("kmax", kmax, true)
}

/// Polar angle of TPI cone `j` of `cones`.
fn tpi_theta(j: usize, cones: usize) -> f64 {
    PI * (j as f64 + 0.5) / cones as f64
}

/// Projections on each TPI cone: shared in proportion to `sin(theta)`, at
/// least one each.
fn tpi_per_cone(cones: usize, projections: usize) -> Vec<usize> {
    let total_sin: f64 = (0..cones).map(|j| tpi_theta(j, cones).sin()).sum();
    (0..cones)
        .map(|j| {
            ((projections as f64 * tpi_theta(j, cones).sin() / total_sin).round() as usize).max(1)
        })
        .collect()
}

/// The most TPI cones (each is a loop over its projections).
const MAX_CONES: usize = 1 << 20;

impl Trajectory {
    /// Checks parameters without generating.
    pub fn check(&self) -> Result<(), SynthError> {
        match *self {
            Trajectory::Radial {
                spokes,
                samples,
                kmax,
            } => {
                positive("spokes", spokes)?;
                positive("samples", samples)?;
                fraction("kmax", kmax, true)
            }
            Trajectory::StackOfStars {
                spokes,
                samples,
                partitions,
                kmax,
            } => stack([("spokes", spokes), ("samples", samples)], partitions, kmax),
            Trajectory::StackOfSpirals {
                interleaves,
                turns,
                samples,
                partitions,
                kmax,
            } => {
                stack(
                    [("interleaves", interleaves), ("samples", samples)],
                    partitions,
                    kmax,
                )?;
                if !(turns.is_finite() && turns > 0.0) {
                    return Err(SynthError::Invalid {
                        what: "trajectory.turns".into(),
                        reason: format!("must be positive, got {turns}"),
                    });
                }
                Ok(())
            }
            Trajectory::Tpi {
                cones,
                projections,
                samples,
                p,
                kmax,
            } => {
                positive("cones", cones)?;
                positive("samples", samples)?;
                if cones > MAX_CONES {
                    return Err(SynthError::Invalid {
                        what: "trajectory.cones".into(),
                        reason: format!("must be at most {MAX_CONES}, got {cones}"),
                    });
                }
                if projections < cones {
                    return Err(SynthError::Invalid {
                        what: "trajectory.projections".into(),
                        reason: format!("must be at least `cones` ({cones}), got {projections}"),
                    });
                }
                fraction("p", p, false)?;
                fraction("kmax", kmax, true)
            }
            Trajectory::Cartesian {} => Ok(()),
        }
    }

    /// The number of samples [`Trajectory::generate`] makes, computed
    /// without making them; an error when it passes
    /// [`recon_core::MAX_SAMPLES`].
    pub fn len(&self, grid: &Grid) -> Result<usize, SynthError> {
        self.check()?;
        self.check_planes(grid)?;
        let count: Option<usize> = match *self {
            Trajectory::Radial {
                spokes, samples, ..
            } => spokes.checked_mul(samples),
            Trajectory::StackOfStars {
                spokes,
                samples,
                partitions,
                ..
            } => partitions
                .unwrap_or(grid.n[2])
                .checked_mul(spokes)
                .and_then(|v| v.checked_mul(samples)),
            Trajectory::StackOfSpirals {
                interleaves,
                samples,
                partitions,
                ..
            } => partitions
                .unwrap_or(grid.n[2])
                .checked_mul(interleaves)
                .and_then(|v| v.checked_mul(samples)),
            Trajectory::Tpi {
                cones,
                projections,
                samples,
                ..
            } => tpi_per_cone(cones, projections)
                .into_iter()
                .try_fold(0usize, |a, p| a.checked_add(p))
                .and_then(|p| p.checked_mul(samples)),
            Trajectory::Cartesian {} => Some(grid.len()),
        };
        match count {
            Some(c) if c <= recon_core::MAX_SAMPLES => Ok(c),
            _ => Err(SynthError::Invalid {
                what: "trajectory".into(),
                reason: format!(
                    "asks for {} samples; at most {} are allowed",
                    count.map_or("more than 2^64".into(), |c| c.to_string()),
                    recon_core::MAX_SAMPLES
                ),
            }),
        }
    }

    /// A 2-D grid (one plane) is sampled at k_z = 0 only: by a stack of
    /// one partition, or the Cartesian plane.
    fn check_planes(&self, grid: &Grid) -> Result<(), SynthError> {
        if !grid.is_2d() {
            return Ok(());
        }
        let stack = |p: Option<usize>| match p {
            Some(p) if p > 1 => Err(SynthError::Invalid {
                what: "trajectory.partitions".into(),
                reason: format!("a 2-D grid (matrix z = 1) takes one partition, got {p}"),
            }),
            _ => Ok(()),
        };
        match *self {
            Trajectory::StackOfStars { partitions, .. }
            | Trajectory::StackOfSpirals { partitions, .. } => stack(partitions),
            Trajectory::Cartesian {} => Ok(()),
            Trajectory::Radial { .. } | Trajectory::Tpi { .. } => Err(SynthError::Invalid {
                what: "trajectory.kind".into(),
                reason: "is 3-D; a 2-D grid (matrix z = 1) takes stack-of-stars, \
                         stack-of-spirals or cartesian"
                    .into(),
            }),
        }
    }

    /// Sample positions in cycles/FOV, in acquisition order.
    pub fn generate(&self, grid: &Grid) -> Result<Vec<[f64; 3]>, SynthError> {
        let count = self.len(grid)?;
        // Nyquist radius along each axis.
        let half = grid.n.map(|n| n as f64 / 2.0);
        let scale = |u: [f64; 3], kmax: f64| [0, 1, 2].map(|d| u[d] * kmax * half[d]);
        let mut k = Vec::with_capacity(count);
        match *self {
            Trajectory::Radial {
                spokes,
                samples,
                kmax,
            } => {
                for s in 0..spokes {
                    let z = 2.0 * (s as f64 * PHI1).fract() - 1.0;
                    let az = TAU * (s as f64 * PHI2).fract();
                    let r = (1.0 - z * z).sqrt();
                    let dir = [r * az.cos(), r * az.sin(), z];
                    for i in 0..samples {
                        let t = along(i, samples);
                        k.push(scale(dir.map(|v| v * t), kmax));
                    }
                }
            }
            Trajectory::StackOfStars {
                spokes,
                samples,
                partitions,
                kmax,
            } => {
                let parts = partitions.unwrap_or(grid.n[2]);
                for p in 0..parts {
                    let kz = partition_kz(p, parts);
                    for s in 0..spokes {
                        let (sin, cos) = (s as f64 * GOLDEN_ANGLE).sin_cos();
                        for i in 0..samples {
                            // From -kmax to just short of kmax, the centre sampled.
                            let t = (i as f64 - (samples / 2) as f64) / (samples as f64 / 2.0);
                            k.push(scale([t * cos, t * sin, kz], kmax));
                        }
                    }
                }
            }
            Trajectory::StackOfSpirals {
                interleaves,
                turns,
                samples,
                partitions,
                kmax,
            } => {
                let parts = partitions.unwrap_or(grid.n[2]);
                for p in 0..parts {
                    let kz = partition_kz(p, parts);
                    for l in 0..interleaves {
                        for i in 0..samples {
                            let t = along(i, samples);
                            let ang = TAU * (turns * t + l as f64 / interleaves as f64);
                            k.push(scale([t * ang.cos(), t * ang.sin(), kz], kmax));
                        }
                    }
                }
            }
            Trajectory::Tpi {
                cones,
                projections,
                samples,
                p,
                kmax,
            } => {
                // Normalised units: kmax = 1, radial speed 1 until k = p.
                // Beyond p, k^2 dk/dt is constant (uniform 3-D density):
                // k^3 = p^3 + 3 p^2 (t - p), and on a cone of polar angle theta
                // the azimuth is phi(k) = (sqrt(k^4 - p^4) - p^2 acos(p^2 / k^2)) / (2 p^2 sin theta).
                let t_end = p + (1.0 - p * p * p) / (3.0 * p * p);
                for (j, per_cone) in tpi_per_cone(cones, projections).into_iter().enumerate() {
                    let theta = tpi_theta(j, cones);
                    let (st, ct) = theta.sin_cos();
                    for l in 0..per_cone {
                        let az0 = TAU * l as f64 / per_cone as f64;
                        for i in 0..samples {
                            let t = t_end * along(i, samples);
                            let (r, phi) = if t <= p {
                                (t, 0.0)
                            } else {
                                let r = (p * p * p + 3.0 * p * p * (t - p)).cbrt().min(1.0);
                                let q = (p * p) / (r * r);
                                let phi = ((r.powi(4) - p.powi(4)).max(0.0).sqrt()
                                    - p * p * q.min(1.0).acos())
                                    / (2.0 * p * p * st);
                                (r, phi)
                            };
                            let az = az0 + phi;
                            k.push(scale([r * st * az.cos(), r * st * az.sin(), r * ct], kmax));
                        }
                    }
                }
            }
            Trajectory::Cartesian {} => {
                let n = grid.n;
                // -N/2 .. N/2 along each axis; 0 alone along a 2-D grid's z.
                let first = n.map(|n| (n / 2) as f64);
                for z in 0..n[2] {
                    for y in 0..n[1] {
                        for x in 0..n[0] {
                            k.push([
                                x as f64 - first[0],
                                y as f64 - first[1],
                                z as f64 - first[2],
                            ]);
                        }
                    }
                }
            }
        }
        Ok(k)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grid() -> Grid {
        Grid::new([16, 16, 16], [200.0; 3]).unwrap()
    }

    fn within_nyquist(k: &[[f64; 3]]) -> bool {
        // Tiny slack for rounding in sin/cos of the directions.
        k.iter().all(|k| k.iter().all(|v| v.abs() <= 8.0 + 1e-9))
    }

    #[test]
    fn every_trajectory_is_deterministic_and_within_nyquist() {
        let all = [
            Trajectory::Radial {
                spokes: 50,
                samples: 9,
                kmax: 1.0,
            },
            Trajectory::StackOfSpirals {
                interleaves: 3,
                turns: 4.0,
                samples: 40,
                partitions: None,
                kmax: 1.0,
            },
            Trajectory::Tpi {
                cones: 6,
                projections: 40,
                samples: 30,
                p: 0.3,
                kmax: 1.0,
            },
            Trajectory::StackOfStars {
                spokes: 13,
                samples: 16,
                partitions: None,
                kmax: 1.0,
            },
            Trajectory::Cartesian {},
        ];
        for t in &all {
            let a = t.generate(&grid()).unwrap();
            assert_eq!(a, t.generate(&grid()).unwrap());
            assert!(within_nyquist(&a), "{t:?}");
            assert!(!a.is_empty());
            assert_eq!(a.len(), t.len(&grid()).unwrap());
        }
    }

    #[test]
    fn a_2d_grid_is_sampled_in_the_plane_kz_0() {
        let flat = Grid::new([16, 12, 1], [200.0, 150.0, 5.0]).unwrap();
        let stars = Trajectory::StackOfStars {
            spokes: 21,
            samples: 16,
            partitions: None,
            kmax: 1.0,
        };
        let spirals = Trajectory::StackOfSpirals {
            interleaves: 4,
            turns: 3.0,
            samples: 50,
            partitions: Some(1),
            kmax: 1.0,
        };
        for t in [&stars, &spirals, &Trajectory::Cartesian {}] {
            let k = t.generate(&flat).unwrap();
            assert!(k.iter().all(|k| k[2] == 0.0), "{t:?}");
            assert!(
                k.iter()
                    .all(|k| k[0].abs() <= 8.0 && k[1].abs() <= 6.0 + 1e-12),
                "{t:?}"
            );
        }
        // Stars: 21 spokes of 16 samples, each through the centre, each
        // spoke turned by the golden angle from the last.
        let k = stars.generate(&flat).unwrap();
        assert_eq!(k.len(), 21 * 16);
        assert!(k.chunks(16).all(|s| s[8] == [0.0, 0.0, 0.0]));
        let angle = |s: &[[f64; 3]]| (s[15][1] / 6.0).atan2(s[15][0] / 8.0);
        let turn = (angle(&k[16..32]) - angle(&k[..16])).rem_euclid(PI);
        assert!((turn - GOLDEN_ANGLE).abs() < 1e-12, "{turn}");
        assert_eq!(
            Trajectory::Cartesian {}.generate(&flat).unwrap().len(),
            16 * 12
        );
        // 3-D trajectories and several partitions are refused, by name.
        let radial = Trajectory::Radial {
            spokes: 5,
            samples: 4,
            kmax: 1.0,
        };
        let err = radial.generate(&flat).unwrap_err().to_string();
        assert!(
            err.contains("trajectory.kind") && err.contains("2-D"),
            "{err}"
        );
        let many = Trajectory::StackOfStars {
            spokes: 5,
            samples: 4,
            partitions: Some(2),
            kmax: 1.0,
        };
        let err = many.generate(&flat).unwrap_err().to_string();
        assert!(err.contains("trajectory.partitions"), "{err}");
    }

    #[test]
    fn tpi_reaches_kmax_and_is_radial_below_p() {
        let t = Trajectory::Tpi {
            cones: 4,
            projections: 20,
            samples: 200,
            p: 0.25,
            kmax: 1.0,
        };
        let k = t.generate(&grid()).unwrap();
        let r = |k: &[f64; 3]| (k[0] * k[0] + k[1] * k[1] + k[2] * k[2]).sqrt() / 8.0;
        let rmax = k.iter().map(r).fold(0.0, f64::max);
        assert!((rmax - 1.0).abs() < 1e-9);
        // Radius is monotone along each projection.
        for proj in k.chunks(200) {
            assert!(proj.windows(2).all(|w| r(&w[1]) >= r(&w[0]) - 1e-12));
        }
    }

    #[test]
    fn bad_parameters_are_named() {
        let t = Trajectory::Radial {
            spokes: 0,
            samples: 4,
            kmax: 1.0,
        };
        assert!(t
            .generate(&grid())
            .unwrap_err()
            .to_string()
            .contains("trajectory.spokes"));
        let t = Trajectory::Tpi {
            cones: 3,
            projections: 10,
            samples: 4,
            p: 1.5,
            kmax: 1.0,
        };
        assert!(t
            .generate(&grid())
            .unwrap_err()
            .to_string()
            .contains("trajectory.p"));
    }
}
