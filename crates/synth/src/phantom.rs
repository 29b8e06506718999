//! Ellipsoid phantoms: parsing, analytic Fourier transform, rasterisation.

use crate::SynthError;
use rayon::prelude::*;
use recon_core::{Complex, Grid};
use serde::Deserialize;
use std::f64::consts::PI;
use std::path::Path;

/// One ellipsoid of constant value. Values of overlapping ellipsoids add.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Ellipsoid {
    /// Value added inside the ellipsoid (e.g. mM of sodium).
    pub value: f64,
    /// Semi-axes (a, b, c) in mm, along the ellipsoid's own axes.
    pub semi_axes_mm: [f64; 3],
    /// Centre in mm.
    pub centre_mm: [f64; 3],
    /// Rotation of the ellipsoid's axes, in degrees, about x, then y, then z
    /// (fixed axes): `R = Rz Ry Rx`.
    #[serde(default)]
    pub rotation_deg: [f64; 3],
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PhantomFile {
    name: String,
    #[serde(default)]
    description: String,
    #[serde(rename = "ellipsoid")]
    ellipsoids: Vec<Ellipsoid>,
}

/// A phantom: a sum of ellipsoids, with each rotation precomputed.
#[derive(Debug, Clone)]
pub struct Phantom {
    pub name: String,
    pub description: String,
    pub ellipsoids: Vec<Ellipsoid>,
    /// Rotation matrices R (row-major), one per ellipsoid.
    rot: Vec<[[f64; 3]; 3]>,
}

fn rotation(deg: [f64; 3]) -> [[f64; 3]; 3] {
    let [a, b, g] = deg.map(f64::to_radians);
    let (sa, ca) = a.sin_cos();
    let (sb, cb) = b.sin_cos();
    let (sg, cg) = g.sin_cos();
    let rx = [[1.0, 0.0, 0.0], [0.0, ca, -sa], [0.0, sa, ca]];
    let ry = [[cb, 0.0, sb], [0.0, 1.0, 0.0], [-sb, 0.0, cb]];
    let rz = [[cg, -sg, 0.0], [sg, cg, 0.0], [0.0, 0.0, 1.0]];
    matmul(rz, matmul(ry, rx))
}

fn matmul(a: [[f64; 3]; 3], b: [[f64; 3]; 3]) -> [[f64; 3]; 3] {
    let mut c = [[0.0; 3]; 3];
    for i in 0..3 {
        for j in 0..3 {
            c[i][j] = (0..3).map(|l| a[i][l] * b[l][j]).sum();
        }
    }
    c
}

/// `R^T v`
fn rot_t(r: &[[f64; 3]; 3], v: [f64; 3]) -> [f64; 3] {
    [0, 1, 2].map(|j| r[0][j] * v[0] + r[1][j] * v[1] + r[2][j] * v[2])
}

/// Fourier transform of the unit ball's indicator at spatial frequency
/// `nu` (cycles per unit length): `(sin x - x cos x) / (2 pi^2 nu^3)` with
/// `x = 2 pi nu`, and its series near 0, where the formula cancels.
pub fn unit_ball_ft(nu: f64) -> f64 {
    let x = 2.0 * PI * nu;
    if x < 0.1 {
        // next term 3 x^8 / (11 * 9!) < 1e-14 here; the closed form loses
        // ~eps / x^2 to cancellation
        let x2 = x * x;
        4.0 * PI / 3.0 * (1.0 - x2 / 10.0 + x2 * x2 / 280.0 - x2 * x2 * x2 / 15120.0)
    } else {
        (x.sin() - x * x.cos()) / (2.0 * PI * PI * nu * nu * nu)
    }
}

/// The largest semi-axis or centre coordinate of an ellipsoid, in mm (100 m).
pub const MAX_MM: f64 = 1e5;
/// The largest value of an ellipsoid.
pub const MAX_VALUE: f64 = 1e12;

impl Phantom {
    /// Builds a phantom, checking every ellipsoid.
    ///
    /// Limits: sizes and positions within [`MAX_MM`], values within
    /// [`MAX_VALUE`].
    pub fn new(
        name: &str,
        description: &str,
        ellipsoids: Vec<Ellipsoid>,
    ) -> Result<Self, SynthError> {
        if ellipsoids.is_empty() {
            return Err(SynthError::Invalid {
                what: format!("phantom {name}"),
                reason: "it has no ellipsoids".into(),
            });
        }
        for (i, e) in ellipsoids.iter().enumerate() {
            let finite = e.value.is_finite()
                && e.centre_mm
                    .iter()
                    .chain(&e.rotation_deg)
                    .all(|v| v.is_finite());
            if !finite || !e.semi_axes_mm.iter().all(|a| a.is_finite() && *a > 0.0) {
                return Err(SynthError::Invalid {
                    what: format!("phantom {name}, ellipsoid {}", i + 1),
                    reason: "semi-axes must be positive and all numbers finite".into(),
                });
            }
            // Far beyond any scanner, and small enough that the k-space
            // data (value x volume, summed over samples) stay finite even
            // in float32.
            let big = e
                .semi_axes_mm
                .iter()
                .chain(&e.centre_mm)
                .any(|v| v.abs() > MAX_MM);
            if big || e.value.abs() > MAX_VALUE {
                return Err(SynthError::Invalid {
                    what: format!("phantom {name}, ellipsoid {}", i + 1),
                    reason: format!(
                        "semi-axes and centre must be within {MAX_MM:e} mm and the value within \
                         {MAX_VALUE:e} (got semi-axes {:?} mm, centre {:?} mm, value {})",
                        e.semi_axes_mm, e.centre_mm, e.value
                    ),
                });
            }
        }
        let rot = ellipsoids
            .iter()
            .map(|e| rotation(e.rotation_deg))
            .collect();
        Ok(Phantom {
            name: name.to_string(),
            description: description.to_string(),
            ellipsoids,
            rot,
        })
    }

    /// Reads a phantom TOML file (see `phantoms/`).
    pub fn load(path: &Path) -> Result<Self, SynthError> {
        let p = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| SynthError::Read {
            path: p.clone(),
            source,
        })?;
        Self::parse(&text, &p)
    }

    /// Parses phantom TOML; `origin` names it in errors.
    pub fn parse(text: &str, origin: &str) -> Result<Self, SynthError> {
        let de = toml::Deserializer::new(text);
        let file: PhantomFile =
            serde_path_to_error::deserialize(de).map_err(|e| SynthError::Parse {
                path: origin.to_string(),
                message: format!("at `{}`: {}", e.path(), e.inner().message()),
            })?;
        Self::new(&file.name, &file.description, file.ellipsoids)
    }

    /// The phantom's value at a point (mm).
    pub fn value_at(&self, r: [f64; 3]) -> f64 {
        let mut v = 0.0;
        for (e, rot) in self.ellipsoids.iter().zip(&self.rot) {
            let d = [0, 1, 2].map(|i| r[i] - e.centre_mm[i]);
            let u = rot_t(rot, d);
            let s: f64 = (0..3).map(|i| (u[i] / e.semi_axes_mm[i]).powi(2)).sum();
            if s <= 1.0 {
                v += e.value;
            }
        }
        v
    }

    /// The analytic Fourier transform at `k` in cycles/mm:
    /// `sum_e value abc exp(-i 2pi k.c) B(|diag(a,b,c) R^T k|)`, with B the
    /// unit ball's transform.
    pub fn fourier(&self, k: [f64; 3]) -> Complex<f64> {
        let mut acc = Complex::new(0.0, 0.0);
        for (e, rot) in self.ellipsoids.iter().zip(&self.rot) {
            let kr = rot_t(rot, k);
            let a = e.semi_axes_mm;
            let nu =
                ((a[0] * kr[0]).powi(2) + (a[1] * kr[1]).powi(2) + (a[2] * kr[2]).powi(2)).sqrt();
            let shift =
                -2.0 * PI * (k[0] * e.centre_mm[0] + k[1] * e.centre_mm[1] + k[2] * e.centre_mm[2]);
            acc += Complex::from_polar(e.value * a[0] * a[1] * a[2] * unit_ball_ft(nu), shift);
        }
        acc
    }

    /// Noiseless k-space data `D_m = rho^(k_m / FOV)` at trajectory points
    /// in cycles/FOV.
    pub fn kspace(&self, grid: &Grid, traj: &[[f64; 3]]) -> Vec<Complex<f64>> {
        traj.par_iter()
            .map(|k| self.fourier([0, 1, 2].map(|d| k[d] / grid.fov_mm[d])))
            .collect()
    }

    /// The phantom's integral along z through the point `(x, y)` (mm):
    /// each ellipsoid's value times its chord there.
    pub fn projection_at(&self, x: f64, y: f64) -> f64 {
        let mut v = 0.0;
        for (e, rot) in self.ellipsoids.iter().zip(&self.rot) {
            // u(t) = R^T ((x, y, t) - c) = u0 + t w; inside where
            // sum_i (u_i / a_i)^2 <= 1, a quadratic A t^2 + 2 B t + C <= 1.
            let u0 = rot_t(
                rot,
                [x - e.centre_mm[0], y - e.centre_mm[1], -e.centre_mm[2]],
            );
            let w = rot_t(rot, [0.0, 0.0, 1.0]);
            let a2 = e.semi_axes_mm.map(|a| a * a);
            let qa: f64 = (0..3).map(|i| w[i] * w[i] / a2[i]).sum();
            let qb: f64 = (0..3).map(|i| u0[i] * w[i] / a2[i]).sum();
            let qc: f64 = (0..3).map(|i| u0[i] * u0[i] / a2[i]).sum();
            let disc = qb * qb - qa * (qc - 1.0);
            if disc > 0.0 {
                v += e.value * 2.0 * disc.sqrt() / qa;
            }
        }
        v
    }

    /// The true image: the phantom averaged over each voxel with `s^3`
    /// sub-samples (x fastest). On a 2-D grid, whose data are the
    /// phantom's transform at k_z = 0 (its projection along z), the truth
    /// is that projection over the slab's thickness (`fov_z`), averaged
    /// over each pixel with `s^2` sub-samples.
    pub fn rasterise(&self, grid: &Grid, s: usize) -> Vec<f64> {
        let vox = grid.voxel_mm();
        let n = grid.n;
        if grid.is_2d() {
            return (0..grid.len())
                .into_par_iter()
                .map(|idx| {
                    let c = [idx % n[0], idx / n[0]];
                    let centre = [0, 1].map(|d| (c[d] as f64 - n[d] as f64 / 2.0) * vox[d]);
                    let mut sum = 0.0;
                    for i in 0..s * s {
                        let sub = [i % s, i / s];
                        let r = [0, 1]
                            .map(|d| centre[d] + ((sub[d] as f64 + 0.5) / s as f64 - 0.5) * vox[d]);
                        sum += self.projection_at(r[0], r[1]);
                    }
                    sum / (s * s) as f64 / grid.fov_mm[2]
                })
                .collect();
        }
        (0..grid.len())
            .into_par_iter()
            .map(|idx| {
                let c = recon_core::index3(n, idx);
                let centre = [0, 1, 2].map(|d| (c[d] as f64 - n[d] as f64 / 2.0) * vox[d]);
                let mut sum = 0.0;
                for i in 0..s * s * s {
                    let sub = [i % s, (i / s) % s, i / (s * s)];
                    let r = [0, 1, 2]
                        .map(|d| centre[d] + ((sub[d] as f64 + 0.5) / s as f64 - 0.5) * vox[d]);
                    sum += self.value_at(r);
                }
                sum / (s * s * s) as f64
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Gauss-Legendre nodes and weights on [-1, 1] (Newton on P_n).
    fn gauss_legendre(n: usize) -> Vec<(f64, f64)> {
        (0..n)
            .map(|i| {
                let mut x = (PI * (i as f64 + 0.75) / (n as f64 + 0.5)).cos();
                loop {
                    let (mut p0, mut p1) = (1.0, x);
                    for k in 2..=n {
                        let p2 = ((2 * k - 1) as f64 * x * p1 - (k - 1) as f64 * p0) / k as f64;
                        p0 = p1;
                        p1 = p2;
                    }
                    let dp = n as f64 * (x * p1 - p0) / (x * x - 1.0);
                    let dx = p1 / dp;
                    x -= dx;
                    if dx.abs() < 1e-15 {
                        return (x, 2.0 / ((1.0 - x * x) * dp * dp));
                    }
                }
            })
            .collect()
    }

    /// Integrates `exp(-i 2pi k.r)` over one ellipsoid numerically: Gauss-
    /// Legendre in (radius, cos polar, azimuth) of the unit ball, mapped
    /// through the ellipsoid's axes, rotation and centre. It knows nothing
    /// of the closed form.
    fn numerical(e: &Ellipsoid, k: [f64; 3]) -> Complex<f64> {
        let rot = rotation(e.rotation_deg);
        let q = gauss_legendre(48);
        let mut acc = Complex::new(0.0, 0.0);
        for &(xr, wr) in &q {
            let r = 0.5 * (xr + 1.0);
            for &(ct, wt) in &q {
                let st = (1.0 - ct * ct).sqrt();
                for &(xp, wp) in &q {
                    let ph = PI * (xp + 1.0);
                    let u = [r * st * ph.cos(), r * st * ph.sin(), r * ct];
                    let local = [0, 1, 2].map(|i| u[i] * e.semi_axes_mm[i]);
                    let p = [0, 1, 2].map(|i| {
                        e.centre_mm[i] + (0..3).map(|j| rot[i][j] * local[j]).sum::<f64>()
                    });
                    let phase = -2.0 * PI * (k[0] * p[0] + k[1] * p[1] + k[2] * p[2]);
                    // dV = abc r^2 dr dcos dphi; dr = 0.5 dx, dphi = pi dx
                    let w = wr * 0.5 * wt * wp * PI * r * r;
                    acc += Complex::from_polar(w, phase);
                }
            }
        }
        let a = e.semi_axes_mm;
        acc * (e.value * a[0] * a[1] * a[2])
    }

    #[test]
    fn analytic_transform_matches_numerical_integration() {
        let e = Ellipsoid {
            value: 1.7,
            semi_axes_mm: [30.0, 20.0, 12.0],
            centre_mm: [5.0, -8.0, 3.0],
            rotation_deg: [20.0, -35.0, 50.0],
        };
        let p = Phantom::new("one", "", vec![e.clone()]).unwrap();
        // k from DC to a few cycles across the ellipsoid, off every axis.
        for k in [
            [0.0, 0.0, 0.0],
            [0.004, -0.002, 0.001],
            [0.013, 0.021, -0.017],
            [-0.03, 0.011, 0.04],
        ] {
            let a = p.fourier(k);
            let b = numerical(&e, k);
            let scale = e.value * 4.0 / 3.0 * PI * 30.0 * 20.0 * 12.0;
            // 48^3-point Gauss quadrature of an entire integrand: error far
            // below 1e-9 of the DC value at these frequencies.
            assert!((a - b).norm() / scale < 1e-9, "k = {k:?}: {a} vs {b}");
        }
    }

    #[test]
    fn projection_is_the_integral_along_z() {
        let e = Ellipsoid {
            value: 1.7,
            semi_axes_mm: [30.0, 20.0, 12.0],
            centre_mm: [5.0, -8.0, 3.0],
            rotation_deg: [20.0, -35.0, 50.0],
        };
        let p = Phantom::new("one", "", vec![e.clone()]).unwrap();
        for (x, y) in [(5.0, -8.0), (12.0, 1.0), (-10.0, -15.0), (60.0, 0.0)] {
            // Midpoint rule over z in [-50, 50] mm, 2e5 steps of 0.5 um:
            // the chord's two ends each cost at most one step's value.
            let steps = 200_000;
            let dz = 100.0 / steps as f64;
            let num: f64 = (0..steps)
                .map(|i| p.value_at([x, y, -50.0 + (i as f64 + 0.5) * dz]) * dz)
                .sum();
            let got = p.projection_at(x, y);
            assert!(
                (got - num).abs() <= 2.0 * 1.7 * dz,
                "({x}, {y}): {got} vs {num}"
            );
        }
        // Over the plane, the projections hold the whole mass: F(0).
        let (h, n) = (0.25, 480);
        let mass: f64 = (0..n * n)
            .map(|i| {
                let (x, y) = ((i % n) as f64 * h - 60.0, (i / n) as f64 * h - 60.0);
                p.projection_at(x + h / 2.0, y + h / 2.0) * h * h
            })
            .sum();
        let want = p.fourier([0.0; 3]).re;
        // A midpoint rule on 0.25 mm cells over a smooth (sqrt) profile.
        assert!((mass / want - 1.0).abs() < 1e-3, "{mass} vs {want}");
    }

    #[test]
    fn ball_transform_series_joins_closed_form() {
        // Either side of the switch at x = 0.1 the two forms agree to about
        // eps / x^2 (the closed form's cancellation), well inside 1e-12.
        let x = 0.1 * (1.0 + 1e-9);
        let nu = x / (2.0 * PI);
        let closed = unit_ball_ft(nu); // just above the switch: the closed form
        let x2 = x * x;
        let series = 4.0 * PI / 3.0 * (1.0 - x2 / 10.0 + x2 * x2 / 280.0 - x2 * x2 * x2 / 15120.0);
        let (below, above) = (series, closed);
        assert!((below - above).abs() < 1e-12 * below);
    }

    #[test]
    fn unknown_key_is_named() {
        let err = Phantom::parse("name = \"x\"\n[[ellipsoid]]\nvalue = 1\nsemi_axes_mm = [1,1,1]\ncentre_mm=[0,0,0]\ncolour = 3\n", "t")
            .unwrap_err()
            .to_string();
        assert!(err.contains("colour"), "{err}");
    }
}
