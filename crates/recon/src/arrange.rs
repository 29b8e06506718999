//! How a run's images are laid out in its files: one image as a volume; a
//! scan of several (slices, contrasts, phases, repetitions, sets) with one
//! array axis per counter that varies, outermost first in the order of
//! [`recon_io::geometry::AXES`]. In NIfTI, slices of a 2-D scan that lie
//! evenly spaced along one slice direction fill the volume's z (so a
//! multi-slice scan is one volume in the scanner's frame); every other
//! counter, and slices that do not stack so, take NIfTI's 4th to 7th
//! dimensions.

use recon_core::Grid;
use recon_io::geometry::{Geometry, Index, AXES};

/// The counters that vary over a run's images, with their values.
#[derive(Debug, Clone, PartialEq)]
pub struct Arrangement {
    /// `(axis position in Index, name, values)`, outermost first.
    pub axes: Vec<(usize, &'static str, Vec<u16>)>,
}

impl Arrangement {
    /// The arrangement of images given in index order (a complete grid of
    /// the counters, as the readers make it).
    pub fn of(indices: &[Index]) -> Arrangement {
        let mut axes = Vec::new();
        for (d, (name, _)) in AXES.iter().enumerate() {
            let mut v: Vec<u16> = indices.iter().map(|i| i.0[d]).collect();
            v.sort_unstable();
            v.dedup();
            if v.len() > 1 {
                axes.push((d, *name, v));
            }
        }
        let a = Arrangement { axes };
        debug_assert_eq!(a.shape().iter().product::<usize>(), indices.len());
        a
    }

    /// The series' own dimensions, outermost first (empty for one image).
    pub fn shape(&self) -> Vec<usize> {
        self.axes.iter().map(|(_, _, v)| v.len()).collect()
    }

    fn slices(&self) -> Option<usize> {
        self.axes.iter().position(|(d, _, _)| *d == 0)
    }
}

/// A NIfTI image of a run: its dimensions (x fastest), its values in that
/// order, and the voxel-to-RAS transform of its first three.
pub struct Nifti<T = f32> {
    pub dims: Vec<usize>,
    pub values: Vec<T>,
    pub affine: [[f64; 4]; 3],
    /// Voxel sizes along the first three dimensions (mm).
    pub voxel_mm: [f64; 3],
}

/// How far slice positions may stray from even steps along the slice
/// direction and still stack into one volume: float32 positions of a few
/// hundred mm hold about 1e-4 mm; 1e-2 mm is far below any voxel.
const STACK_TOLERANCE_MM: f64 = 1e-2;

/// The spacing of slices that stack into a volume: their geometries share
/// the directions and step evenly along `slice_dir`; `None` otherwise.
/// Slices without geometry stack at the FOV's thickness.
fn slice_step(grid: &Grid, slices: &[Option<Geometry>]) -> Option<f64> {
    let first = slices.first()?;
    let Some(g0) = first else {
        return slices.iter().all(Option::is_none).then_some(grid.fov_mm[2]);
    };
    let gs: Vec<&Geometry> = slices.iter().map(|g| g.as_ref()).collect::<Option<_>>()?;
    let g1 = gs.get(1)?;
    let along = |p: [f64; 3]| {
        (0..3)
            .map(|d| (p[d] - g0.position_mm[d]) * g0.slice_dir[d])
            .sum::<f64>()
    };
    let step = along(g1.position_mm);
    if step.abs() < STACK_TOLERANCE_MM {
        return None;
    }
    for (s, g) in gs.iter().enumerate() {
        let same_dirs = (0..3).all(|d| {
            (g.read_dir[d] - g0.read_dir[d]).abs() < 1e-5
                && (g.phase_dir[d] - g0.phase_dir[d]).abs() < 1e-5
                && (g.slice_dir[d] - g0.slice_dir[d]).abs() < 1e-5
        });
        let want = [0, 1, 2].map(|d| g0.position_mm[d] + s as f64 * step * g0.slice_dir[d]);
        let on_line = (0..3).all(|d| (g.position_mm[d] - want[d]).abs() < STACK_TOLERANCE_MM);
        if !(same_dirs && on_line) {
            return None;
        }
    }
    Some(step)
}

/// The NIfTI of `values`, one volume per image (image after image, in
/// index order, each `[Nz, Ny, Nx]` x fastest), `frames` volumes per image
/// (coil maps: one per coil; else 1) placed after the series' dimensions.
pub fn nifti<T: Copy>(
    grid: &Grid,
    arrangement: &Arrangement,
    geometries: &[Option<Geometry>],
    values: Vec<T>,
    frames: usize,
) -> Nifti<T> {
    let n = grid.n;
    let series = arrangement.shape();
    let geometry = geometries
        .first()
        .copied()
        .flatten()
        .unwrap_or_else(Geometry::identity);
    // Slices of a 2-D scan that stack: z is the slice.
    let stacked = match (grid.is_2d(), arrangement.slices()) {
        (true, Some(a)) => {
            // The slices' geometries, at the first value of every other axis.
            let stride: usize = series[a + 1..].iter().product();
            let count = series[a];
            let slices: Vec<Option<Geometry>> =
                (0..count).map(|s| geometries[s * stride]).collect();
            slice_step(grid, &slices).map(|dz| (a, dz))
        }
        _ => None,
    };
    // Array axes, outermost first: [series..., frames, Nz, Ny, Nx]; the
    // NIfTI's, outermost first: the series' other axes, frames, then
    // (z, y, x) with a stacked slice axis in place of Nz.
    let mut shape: Vec<usize> = series.clone();
    shape.extend([frames, n[2], n[1], n[0]]);
    let k = series.len();
    let mut order: Vec<usize> = (0..k)
        .filter(|&a| Some(a) != stacked.map(|s| s.0))
        .collect();
    order.extend([k, k + 1]);
    if let Some((a, _)) = stacked {
        order.push(a);
    }
    order.extend([k + 2, k + 3]);
    let array =
        ndarray::ArrayViewD::from_shape(shape.clone(), &values).expect("one value per voxel");
    let mut permuted = array.permuted_axes(order.clone());
    let mut dims: Vec<usize> = order.iter().map(|&a| shape[a]).collect();
    // Drop Nz (1) where the slices took its place, and the frames axis
    // when there is one frame.
    let mut drop = |axis: usize| {
        let at = order.iter().position(|&a| a == axis).expect("an axis");
        permuted = permuted.clone().index_axis_move(ndarray::Axis(at), 0);
        dims.remove(at);
        order.remove(at);
    };
    if stacked.is_some() {
        drop(k + 1);
    }
    if frames == 1 {
        drop(k);
    }
    // One image's array is already in order: kept as it is (a copy, or a
    // dynamic-rank array's element iterator, is slow on large volumes).
    let in_order = permuted
        .as_slice()
        .is_some_and(|s| s.as_ptr() == values.as_ptr() && s.len() == values.len());
    let values: Vec<T> = match in_order {
        true => values,
        false => permuted.as_standard_layout().iter().copied().collect(),
    };
    dims.reverse();
    let v = grid.voxel_mm();
    let (affine, dz) = match stacked {
        Some((_, dz)) => (geometry.affine_with_spacing(grid, dz), dz.abs()),
        None => (geometry.affine(grid), v[2]),
    };
    Nifti {
        dims,
        values,
        affine,
        voxel_mm: [v[0], v[1], dz],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Slices 0 to 2, contrasts 0 and 1, in index order.
    fn three_slices_two_contrasts() -> Vec<Index> {
        (0..3)
            .flat_map(|s| (0..2).map(move |c| Index([s, c, 0, 0, 0])))
            .collect()
    }

    #[test]
    fn one_image_is_a_volume_and_several_have_an_axis_per_counter() {
        assert!(Arrangement::of(&[Index::default()]).shape().is_empty());
        let ids = three_slices_two_contrasts();
        let a = Arrangement::of(&ids);
        assert_eq!(a.shape(), vec![3, 2]);
        assert_eq!(a.axes[0].1, "slice");
        assert_eq!(a.axes[1].2, vec![0, 1]);
    }

    #[test]
    fn evenly_spaced_slices_of_a_2d_scan_fill_z_and_contrasts_the_4th_dimension() {
        let grid = Grid::new([4, 4, 1], [40.0, 40.0, 5.0]).unwrap();
        let ids = three_slices_two_contrasts();
        let a = Arrangement::of(&ids);
        let geo = |s: usize| Geometry {
            position_mm: [0.0, 0.0, 6.0 * s as f64 - 3.0],
            ..Geometry::identity()
        };
        let geos: Vec<Option<Geometry>> =
            ids.iter().map(|i| Some(geo(i.slice() as usize))).collect();
        // Value = 100 slice + 10 contrast + voxel.
        let values: Vec<f32> = ids
            .iter()
            .flat_map(|i| (0..16).map(move |v| (100 * i.0[0] + 10 * i.0[1]) as f32 + v as f32))
            .collect();
        let n = nifti(&grid, &a, &geos, values.clone(), 1);
        assert_eq!(n.dims, vec![4, 4, 3, 2]);
        // x fastest, then y, then slice, then contrast.
        let at = |x: usize, y: usize, s: usize, c: usize| n.values[x + 4 * (y + 4 * (s + 3 * c))];
        assert_eq!(at(1, 2, 2, 1), (200 + 10 + 9) as f32);
        assert_eq!(at(3, 0, 1, 0), (100 + 3) as f32);
        // 6 mm between slices; slice 0 at z = -3 mm.
        assert_eq!(n.voxel_mm[2], 6.0);
        assert!((n.affine[2][2] - 6.0).abs() < 1e-12 && (n.affine[2][3] + 3.0).abs() < 1e-12);
        // Slices that do not lie on a line stay a dimension of their own.
        let mut odd = geos.clone();
        odd[4] = Some(Geometry {
            position_mm: [1.0, 0.0, 9.0],
            ..Geometry::identity()
        });
        let n = nifti(&grid, &a, &odd, values, 1);
        assert_eq!(n.dims, vec![4, 4, 1, 2, 3]);
    }

    #[test]
    fn one_image_keeps_its_values_where_they_are() {
        // At 256^3 a copy of the values was a tenth of writing the file.
        let grid = Grid::new([4, 2, 2], [40.0, 20.0, 20.0]).unwrap();
        let a = Arrangement::of(&[Index::default()]);
        let values: Vec<f32> = (0..16).map(|v| v as f32).collect();
        let (at, copy) = (values.as_ptr(), values.clone());
        let n = nifti(&grid, &a, &[None], values, 1);
        assert_eq!(n.dims, vec![4, 2, 2]);
        assert_eq!(n.values, copy);
        assert_eq!(n.values.as_ptr(), at);
    }
}
