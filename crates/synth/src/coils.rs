//! Receive coils for synthetic data, with sensitivities that keep k-space
//! analytic.
//!
//! Each coil's sensitivity is a short sum of complex exponentials,
//! `S(x) = sum_f a_f exp(i 2pi f . x / FOV)` with f in `{-1/2, 0, 1/2}^3`
//! cycles per FOV. Then `S . rho` transforms into `sum_f a_f rho^(k - f)`:
//! 27 shifted copies of the phantom's analytic transform, shared by every
//! coil. So multi-coil data are still computed from the phantom's formula,
//! never from a rasterised image (no inverse crime).
//!
//! The profile is a product over the axes of `1 + 2 r e^(i psi)
//! cos(pi (x_d - p_d) / FOV_d)`: largest at the coil's position p,
//! smallest a FOV away, with a phase that varies over the object. (A period
//! of one FOV would wrap: a coil beyond the FOV's edge would see the far
//! side best.)

use crate::{Phantom, SynthError};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, StandardNormal};
use rayon::prelude::*;
use recon_core::{Complex, Grid};
use std::f64::consts::{PI, TAU};

/// Where the coils sit around the object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arrangement {
    /// Evenly on a circle in the z = 0 plane (a head or knee array).
    Ring,
    /// Spread over the upper half of a sphere (a head helmet).
    Helmet,
}

/// Synthetic receive coils.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Coils {
    pub count: usize,
    pub arrangement: Arrangement,
    /// Distance of the coils from the centre, in half FOVs (1: at the
    /// edge of the field of view).
    pub radius: f64,
}

/// How strongly a profile varies along an axis: between `1 - 2r` and
/// `1 + 2r` (6 to 1 across an object of 60% of the FOV, coils at 1.2).
const R: f64 = 0.4;

/// One coil's sensitivity, `sum_f a_f exp(i 2pi f . x / FOV)`.
#[derive(Debug, Clone, PartialEq)]
pub struct Sensitivity {
    /// `(f, a_f)`: f in cycles per FOV.
    pub terms: Vec<([f64; 3], Complex<f64>)>,
}

/// The 27 shifts `f in {-1/2, 0, 1/2}^3`, in a fixed order.
fn shifts() -> Vec<[f64; 3]> {
    (0..27)
        .map(|i| [i % 3, (i / 3) % 3, i / 9].map(|v| (v as f64 - 1.0) / 2.0))
        .collect()
}

impl Sensitivity {
    /// The sensitivity at a point in mm.
    pub fn at(&self, grid: &Grid, r_mm: [f64; 3]) -> Complex<f64> {
        self.terms
            .iter()
            .map(|(f, a)| {
                let phase: f64 = (0..3).map(|d| TAU * f[d] * r_mm[d] / grid.fov_mm[d]).sum();
                a * Complex::from_polar(1.0, phase)
            })
            .sum()
    }

    /// At each voxel centre (x fastest).
    pub fn on_grid(&self, grid: &Grid) -> Vec<Complex<f64>> {
        let vox = grid.voxel_mm();
        (0..grid.len())
            .into_par_iter()
            .map(|idx| {
                let c = recon_core::index3(grid.n, idx);
                // Voxel centres; a flat axis's one plane at 0.
                let r = [0, 1, 2].map(|d| {
                    if grid.n[d] == 1 {
                        0.0
                    } else {
                        (c[d] as f64 - grid.n[d] as f64 / 2.0) * vox[d]
                    }
                });
                self.at(grid, r)
            })
            .collect()
    }
}

impl Coils {
    pub fn check(&self) -> Result<(), SynthError> {
        let bad = |reason: String| {
            Err(SynthError::Invalid {
                what: "coils".into(),
                reason,
            })
        };
        if !(1..=128).contains(&self.count) {
            return bad(format!("count must be 1 to 128, got {}", self.count));
        }
        if !(self.radius.is_finite() && self.radius > 0.0 && self.radius <= 4.0) {
            return bad(format!(
                "radius must be above 0 and at most 4 half FOVs, got {}",
                self.radius
            ));
        }
        Ok(())
    }

    /// Coil positions as fractions of the FOV (the centre at 0).
    fn positions(&self) -> Vec<[f64; 3]> {
        let c = self.count;
        let r = self.radius / 2.0;
        (0..c)
            .map(|i| match self.arrangement {
                Arrangement::Ring => {
                    let t = TAU * i as f64 / c as f64;
                    [r * t.cos(), r * t.sin(), 0.0]
                }
                Arrangement::Helmet => {
                    // A Fibonacci spiral over z >= 0: even area per coil.
                    let z = 1.0 - (i as f64 + 0.5) / c as f64;
                    let t = PI * (3.0 - 5f64.sqrt()) * i as f64;
                    let s = (1.0 - z * z).sqrt();
                    [r * s * t.cos(), r * s * t.sin(), r * z]
                }
            })
            .collect()
    }

    /// Every coil's sensitivity, scaled so that the root sum of squares
    /// over the coils is 1 at the centre of the FOV.
    pub fn sensitivities(&self) -> Vec<Sensitivity> {
        let c = self.count;
        let mut out: Vec<Sensitivity> = self
            .positions()
            .iter()
            .enumerate()
            .map(|(i, p)| {
                // A phase per coil, and a twist per axis so that the phase
                // varies over the object as a real coil's does.
                let phase = TAU * i as f64 / c as f64;
                let psi = [0.3, -0.2, 0.25].map(|v: f64| v * (1.0 + (i % 3) as f64));
                let factor = |d: usize, f: f64| -> Complex<f64> {
                    if f == 0.0 {
                        Complex::new(1.0, 0.0)
                    } else {
                        // f = +-1/2: r e^(i psi) e^(-+ i pi p_d)
                        Complex::from_polar(R, psi[d] - f * TAU * p[d])
                    }
                };
                let terms = shifts()
                    .into_iter()
                    .map(|f| {
                        let a = factor(0, f[0]) * factor(1, f[1]) * factor(2, f[2]);
                        (f, a * Complex::from_polar(1.0, phase))
                    })
                    .collect();
                Sensitivity { terms }
            })
            .collect();
        let centre: f64 = out
            .iter()
            .map(|s| s.terms.iter().map(|t| t.1).sum::<Complex<f64>>().norm_sqr())
            .sum::<f64>()
            .sqrt();
        for s in &mut out {
            for t in &mut s.terms {
                t.1 /= centre;
            }
        }
        out
    }

    /// Noiseless k-space of every coil, coil after coil (`[C, M]`):
    /// `D_c(k) = sum_f a_cf rho^(k - f)`, with the 27 shifted transforms of
    /// the phantom computed once.
    pub fn kspace(&self, phantom: &Phantom, grid: &Grid, traj: &[[f64; 3]]) -> Vec<Complex<f64>> {
        let sens = self.sensitivities();
        let shifted: Vec<Vec<Complex<f64>>> = shifts()
            .iter()
            .map(|f| {
                // A 2-D grid sees the projection along z through the coil's
                // profile at z = 0: no shift along k_z (the data stay at
                // k_z = 0, the projection's transform).
                let fz = if grid.is_2d() { 0.0 } else { f[2] };
                let moved: Vec<[f64; 3]> = traj
                    .iter()
                    .map(|k| [k[0] - f[0], k[1] - f[1], k[2] - fz])
                    .collect();
                phantom.kspace(grid, &moved)
            })
            .collect();
        let m = traj.len();
        let mut out = vec![Complex::new(0.0, 0.0); self.count * m];
        out.par_chunks_mut(m).zip(&sens).for_each(|(d, s)| {
            for (j, (_, a)) in s.terms.iter().enumerate() {
                for (d, v) in d.iter_mut().zip(&shifted[j]) {
                    *d += a * v;
                }
            }
        });
        out
    }
}

/// Correlated noise over coils: the noise of coil c is
/// `rho n_(c-1) + sqrt(1 - rho^2) z_c` for white `z`, so its covariance is
/// `sigma^2 rho^|c - d|` (neighbouring coils share flux).
#[derive(Debug, Clone, Copy)]
pub struct CoilNoise {
    pub snr: f64,
    pub seed: u64,
    /// `rho`, from 0 (independent) to below 1.
    pub correlation: f64,
}

/// Adds correlated noise to `data` (`[C, M]`, coil after coil) in place
/// and returns its covariance `[C, C]` (row-major). `sigma` is the RMS of
/// all the data over `snr`. With one coil this is [`crate::add_noise`]:
/// the same numbers from the same seed.
pub fn add_coil_noise(data: &mut [Complex<f64>], coils: usize, noise: CoilNoise) -> Vec<f64> {
    let m = data.len() / coils.max(1);
    let rms = (data.iter().map(|d| d.norm_sqr()).sum::<f64>() / data.len().max(1) as f64).sqrt();
    let sigma = rms / noise.snr;
    let rho = noise.correlation;
    let s = sigma / std::f64::consts::SQRT_2;
    let mut rng = ChaCha8Rng::seed_from_u64(noise.seed);
    let mut prev = Complex::new(0.0, 0.0);
    for i in 0..m {
        for c in 0..coils {
            let re: f64 = StandardNormal.sample(&mut rng);
            let im: f64 = StandardNormal.sample(&mut rng);
            let z = Complex::new(re, im);
            let n = if c == 0 {
                z
            } else {
                prev * rho + z * (1.0 - rho * rho).sqrt()
            };
            prev = n;
            data[c * m + i] += n * s;
        }
    }
    let mut cov = vec![0.0; coils * coils];
    for a in 0..coils {
        for b in 0..coils {
            cov[a * coils + b] = sigma * sigma * rho.powi((a as i32 - b as i32).abs());
        }
    }
    cov
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{add_noise, Ellipsoid, Noise};

    fn phantom() -> Phantom {
        Phantom::new(
            "two",
            "",
            vec![
                Ellipsoid {
                    value: 1.0,
                    semi_axes_mm: [60.0, 50.0, 40.0],
                    centre_mm: [5.0, -3.0, 2.0],
                    rotation_deg: [10.0, 0.0, 20.0],
                },
                Ellipsoid {
                    value: 0.5,
                    semi_axes_mm: [20.0, 15.0, 25.0],
                    centre_mm: [-20.0, 10.0, 0.0],
                    rotation_deg: [0.0; 3],
                },
            ],
        )
        .unwrap()
    }

    #[test]
    fn coil_kspace_is_the_transform_of_the_weighted_phantom() {
        // D_c(k) against a direct sum of S_c(x) rho(x) exp(-i 2pi k.x) over
        // a fine grid of points: the quadrature of a ball's indicator is
        // only first-order accurate at its surface, so the check is at low
        // k (where the phantom's transform is large) to 2%.
        let grid = Grid::new([16, 16, 16], [240.0; 3]).unwrap();
        let coils = Coils {
            count: 4,
            arrangement: Arrangement::Ring,
            radius: 1.2,
        };
        let p = phantom();
        let traj = vec![[0.0, 0.0, 0.0], [1.5, -0.5, 0.0], [0.0, 2.0, 1.0]];
        let d = coils.kspace(&p, &grid, &traj);
        let sens = coils.sensitivities();
        let fine = 64;
        let h = 240.0 / fine as f64;
        for (c, s) in sens.iter().enumerate() {
            for (m, k) in traj.iter().enumerate() {
                let mut acc = Complex::new(0.0, 0.0);
                for i in 0..fine * fine * fine {
                    let r = [i % fine, (i / fine) % fine, i / (fine * fine)]
                        .map(|v| (v as f64 + 0.5) * h - 120.0);
                    let v = p.value_at(r);
                    if v == 0.0 {
                        continue;
                    }
                    let ph = -TAU * (0..3).map(|d| k[d] * r[d] / 240.0).sum::<f64>();
                    acc += s.at(&grid, r) * v * Complex::from_polar(h * h * h, ph);
                }
                let got = d[c * traj.len() + m];
                let err = (got - acc).norm() / acc.norm();
                assert!(err < 0.02, "coil {c}, k {k:?}: {got} vs {acc} ({err:e})");
            }
        }
    }

    #[test]
    fn sensitivities_vary_over_the_object_and_are_normalised_at_the_centre() {
        let grid = Grid::new([8, 8, 8], [200.0; 3]).unwrap();
        for arrangement in [Arrangement::Ring, Arrangement::Helmet] {
            let coils = Coils {
                count: 8,
                arrangement,
                radius: 1.2,
            };
            let sens = coils.sensitivities();
            let rss = |r: [f64; 3]| -> f64 {
                sens.iter()
                    .map(|s| s.at(&grid, r).norm_sqr())
                    .sum::<f64>()
                    .sqrt()
            };
            assert!((rss([0.0; 3]) - 1.0).abs() < 1e-12);
            // Each coil sees its own side better than the far side.
            for (i, p) in coils.positions().iter().enumerate() {
                let len = p.iter().map(|v| v * v).sum::<f64>().sqrt();
                let u = p.map(|v| 60.0 * v / len);
                let near = sens[i].at(&grid, u).norm();
                let far = sens[i].at(&grid, u.map(|v| -v)).norm();
                assert!(
                    near > 2.0 * far,
                    "{arrangement:?} coil {i}: {near} vs {far}"
                );
            }
        }
    }

    #[test]
    fn coil_noise_has_its_covariance_and_one_coil_is_add_noise() {
        let m = 100_000;
        let clean: Vec<Complex<f64>> = (0..3 * m)
            .map(|i| Complex::new((i as f64).cos(), 0.5))
            .collect();
        let mut data = clean.clone();
        let cov = add_coil_noise(
            &mut data,
            3,
            CoilNoise {
                snr: 5.0,
                seed: 3,
                correlation: 0.5,
            },
        );
        let n: Vec<Complex<f64>> = data.iter().zip(&clean).map(|(a, b)| a - b).collect();
        for a in 0..3 {
            for b in 0..3 {
                let e: Complex<f64> = (0..m)
                    .map(|i| n[a * m + i] * n[b * m + i].conj())
                    .sum::<Complex<f64>>()
                    / m as f64;
                // 1e5 samples: a sample covariance within about 1% of
                // sigma^2; allow 3%.
                assert!(
                    (e.re - cov[a * 3 + b]).abs() < 0.03 * cov[0] && e.im.abs() < 0.03 * cov[0],
                    "({a}, {b}): {e} vs {}",
                    cov[a * 3 + b]
                );
            }
        }
        let mut one = clean[..m].to_vec();
        let mut two = one.clone();
        let cov = add_coil_noise(
            &mut one,
            1,
            CoilNoise {
                snr: 5.0,
                seed: 3,
                correlation: 0.5,
            },
        );
        let sigma = add_noise(&mut two, Noise { snr: 5.0, seed: 3 });
        assert_eq!(one, two);
        assert_eq!(cov, vec![sigma * sigma]);
    }
}
