//! Where an image lies in the scanner, and which image of a scan a sample
//! belongs to.
//!
//! [`Geometry`] is ISMRMRD's: the centre of the image (`position`, mm) and
//! the directions of its logical axes (`read_dir`, `phase_dir`,
//! `slice_dir`, unit vectors), all in the patient coordinate system LPS
//! (x to the patient's left, y to posterior, z to head). The trajectory's
//! kx, ky, kz are along the logical readout, phase and slice axes, so the
//! image's x, y, z are those three directions; [`Geometry::affine`] turns a
//! voxel index into scanner RAS millimetres (NIfTI's frame: x and y of LPS
//! negated), with voxel `N/2` at `position` (0 along a 2-D grid's z).
//!
//! [`Index`] is an image's place in a scan of several (ISMRMRD's `idx`):
//! its slice, contrast, phase, repetition and set. A [`Part`] is the run
//! of a scan's samples that one image holds.

use recon_core::Grid;
use std::ops::Range;

/// Position and orientation of an image, in LPS (see the module).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Geometry {
    /// The image centre, mm.
    pub position_mm: [f64; 3],
    /// Unit vectors of the image's x (readout), y (phase) and z (slice).
    pub read_dir: [f64; 3],
    pub phase_dir: [f64; 3],
    pub slice_dir: [f64; 3],
}

/// How far from unit length and from orthogonal the direction cosines may
/// be: scanners store them as float32 (7 digits), and a rotation composed
/// of a few float32 rotations is orthonormal to about 1e-6.
pub const ORTHONORMAL_TOLERANCE: f64 = 1e-4;

fn dot(a: [f64; 3], b: [f64; 3]) -> f64 {
    a[0] * b[0] + a[1] * b[1] + a[2] * b[2]
}

impl Geometry {
    /// Synthetic data's geometry: the image centred on the isocentre, its
    /// axes along the scanner's (image x, y, z along RAS x, y, z).
    pub fn identity() -> Geometry {
        Geometry {
            position_mm: [0.0; 3],
            read_dir: [-1.0, 0.0, 0.0],
            phase_dir: [0.0, -1.0, 0.0],
            slice_dir: [0.0, 0.0, 1.0],
        }
    }

    /// The directions, named as ISMRMRD names them.
    pub fn directions(&self) -> [(&'static str, [f64; 3]); 3] {
        [
            ("read_dir", self.read_dir),
            ("phase_dir", self.phase_dir),
            ("slice_dir", self.slice_dir),
        ]
    }

    /// `Err` with what is wrong when a value is not finite or the
    /// directions are not orthonormal (within [`ORTHONORMAL_TOLERANCE`]).
    pub fn check(&self) -> Result<(), String> {
        if self.position_mm.iter().any(|v| !v.is_finite()) {
            return Err(format!("position {:?} mm is not finite", self.position_mm));
        }
        let dirs = self.directions();
        for (name, d) in dirs {
            if d.iter().any(|v| !v.is_finite()) {
                return Err(format!("{name} {d:?} is not finite"));
            }
            let len = dot(d, d).sqrt();
            if (len - 1.0).abs() > ORTHONORMAL_TOLERANCE {
                return Err(format!(
                    "{name} {d:?} has length {len:.6}, not 1: the directions must be orthonormal"
                ));
            }
        }
        for (i, j) in [(0, 1), (0, 2), (1, 2)] {
            let c = dot(dirs[i].1, dirs[j].1);
            if c.abs() > ORTHONORMAL_TOLERANCE {
                return Err(format!(
                    "{} and {} are not orthogonal (their dot product is {c:.6}): the directions must be orthonormal",
                    dirs[i].0, dirs[j].0
                ));
            }
        }
        Ok(())
    }

    /// The voxel-to-scanner transform of an image on `grid`: rows of a 3 x 4
    /// matrix taking `(i, j, k, 1)` to RAS mm. Voxel `N/2` of each axis
    /// lies at `position` (a 2-D grid's one plane: k = 0).
    pub fn affine(&self, grid: &Grid) -> [[f64; 4]; 3] {
        self.affine_with_spacing(grid, grid.voxel_mm()[2])
    }

    /// [`Geometry::affine`], with `dz` mm from plane to plane along
    /// `slice_dir` (for slices of a 2-D scan stacked into a volume, whose
    /// first slice is this geometry's).
    pub fn affine_with_spacing(&self, grid: &Grid, dz: f64) -> [[f64; 4]; 3] {
        let v = grid.voxel_mm();
        let steps = [v[0], v[1], dz];
        // The image's offset of voxel 0 from its centre, per axis.
        let first = [0, 1, 2].map(|d| {
            if d == 2 && grid.n[2] == 1 {
                0.0
            } else {
                -(grid.n[d] as f64 / 2.0) * steps[d]
            }
        });
        // LPS to RAS: x and y negated.
        let ras = [-1.0, -1.0, 1.0];
        let dirs = [self.read_dir, self.phase_dir, self.slice_dir];
        let mut m = [[0.0; 4]; 3];
        for (r, row) in m.iter_mut().enumerate() {
            for c in 0..3 {
                row[c] = ras[r] * dirs[c][r] * steps[c];
            }
            row[3] =
                ras[r] * (self.position_mm[r] + (0..3).map(|c| first[c] * dirs[c][r]).sum::<f64>());
        }
        m
    }

    /// Whether two geometries are the same within float32's precision
    /// (positions to 1e-3 mm).
    pub fn same(&self, other: &Geometry) -> bool {
        let close = |a: [f64; 3], b: [f64; 3], tol: f64| (0..3).all(|d| (a[d] - b[d]).abs() <= tol);
        close(self.position_mm, other.position_mm, 1e-3)
            && close(self.read_dir, other.read_dir, 1e-5)
            && close(self.phase_dir, other.phase_dir, 1e-5)
            && close(self.slice_dir, other.slice_dir, 1e-5)
    }
}

/// The names of an [`Index`]'s counters, in its order, with what each
/// counts (plural).
pub const AXES: [(&str, &str); 5] = [
    ("slice", "slices"),
    ("contrast", "contrasts (echoes)"),
    ("phase", "phases"),
    ("repetition", "repetitions"),
    ("set", "sets"),
];

/// An image's place in a scan of several: its slice, contrast, phase,
/// repetition and set (ISMRMRD's `idx`, in [`AXES`]' order).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Index(pub [u16; 5]);

impl Index {
    pub fn slice(&self) -> u16 {
        self.0[0]
    }

    /// `slice 2, contrast 1`: the slice, and the other counters that are
    /// not 0.
    pub fn describe(&self) -> String {
        let mut parts = vec![format!("slice {}", self.0[0])];
        for ((name, _), v) in AXES.iter().zip(self.0).skip(1) {
            if v != 0 {
                parts.push(format!("{name} {v}"));
            }
        }
        parts.join(", ")
    }
}

/// One image of a scan that holds several: its index, the samples it
/// holds (a range of the trajectory, the same for every coil) and where
/// it lies.
#[derive(Debug, Clone, PartialEq)]
pub struct Part {
    pub index: Index,
    pub samples: Range<usize>,
    pub geometry: Option<Geometry>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_identity_puts_voxel_half_n_at_the_isocentre_along_ras() {
        let g = Grid::new([8, 8, 4], [80.0, 80.0, 40.0]).unwrap();
        let a = Geometry::identity().affine(&g);
        assert_eq!(a[0], [10.0, 0.0, 0.0, -40.0]);
        assert_eq!(a[1], [0.0, 10.0, 0.0, -40.0]);
        assert_eq!(a[2], [0.0, 0.0, 10.0, -20.0]);
    }

    #[test]
    fn an_oblique_off_centre_geometry_maps_the_centre_voxel_to_its_position() {
        let (c, s) = (0.6f64, 0.8f64);
        let geo = Geometry {
            position_mm: [10.0, -20.0, 30.0],
            read_dir: [c, s, 0.0],
            phase_dir: [-s, c, 0.0],
            slice_dir: [0.0, 0.0, 1.0],
        };
        geo.check().unwrap();
        let g = Grid::new([16, 16, 1], [160.0, 160.0, 5.0]).unwrap();
        let a = geo.affine(&g);
        let at =
            |i: [f64; 3]| [0, 1, 2].map(|r| (0..3).map(|c| a[r][c] * i[c]).sum::<f64>() + a[r][3]);
        // Voxel N/2 is the position (in RAS: x and y negated).
        let p = at([8.0, 8.0, 0.0]);
        for (got, want) in p.iter().zip([-10.0, 20.0, 30.0]) {
            assert!((got - want).abs() < 1e-12, "{p:?}");
        }
        // One voxel along x is 10 mm along read_dir.
        let q = at([9.0, 8.0, 0.0]);
        for (d, want) in [-10.0 * c, -10.0 * s, 0.0].iter().enumerate() {
            assert!((q[d] - p[d] - want).abs() < 1e-12);
        }
    }

    #[test]
    fn directions_that_are_not_orthonormal_are_refused_by_name() {
        let mut geo = Geometry::identity();
        geo.phase_dir = [0.1, -1.0, 0.0];
        let e = geo.check().unwrap_err();
        assert!(e.contains("phase_dir") && e.contains("orthonormal"), "{e}");
        let mut geo = Geometry::identity();
        geo.slice_dir = [0.0, 0.6, 0.8];
        let e = geo.check().unwrap_err();
        assert!(e.contains("phase_dir and slice_dir"), "{e}");
        let mut geo = Geometry::identity();
        geo.position_mm[1] = f64::NAN;
        assert!(geo.check().unwrap_err().contains("position"));
    }
}
