//! Pictures of a run, for people: a montage of the three orthogonal central
//! slices (truth | iterative | gridding | error) and the CG residual against
//! iteration. Drawn on a small RGB canvas with an 8x8 bitmap font (font8x8),
//! encoded by the png crate: no system fonts or plotting stack needed. This
//! file draws the montage; `canvas` is what every picture draws on, `plots`
//! the curves and bars.

mod canvas;
mod plots;

use canvas::{Canvas, Rgb, BLACK, GREY, WHITE};
pub use plots::{bar_chart, line_plot, residual_curves, residual_plot, Series};
use rayon::prelude::*;
use recon_core::{Complex, Grid};
use recon_io::geometry::Geometry;
use std::path::Path;

/// One 2-D slice: its width and values (row-major, top row first), and
/// the grid axes (0 x, 1 y, 2 z) along its width and up its height.
struct Slice {
    w: usize,
    v: Vec<f64>,
    axes: (usize, usize),
}

/// The central axial (xy), coronal (xz) and sagittal (yz) slices of an
/// `[Nz, Ny, Nx]` volume, each shown with its second axis pointing up.
fn central_slices(grid: &Grid, vol: &Values) -> [Slice; 3] {
    let [nx, ny, nz] = grid.n;
    let at = |x: usize, y: usize, z: usize| vol.at((z * ny + y) * nx + x);
    let (cx, cy, cz) = (nx / 2, ny / 2, nz / 2);
    let flip = |h: usize, r: usize| h - 1 - r;
    [
        Slice {
            w: nx,
            v: (0..ny * nx)
                .map(|i| at(i % nx, flip(ny, i / nx), cz))
                .collect(),
            axes: (0, 1),
        },
        Slice {
            w: nx,
            v: (0..nz * nx)
                .map(|i| at(i % nx, cy, flip(nz, i / nx)))
                .collect(),
            axes: (0, 2),
        },
        Slice {
            w: ny,
            v: (0..nz * ny)
                .map(|i| at(cx, i % ny, flip(nz, i / ny)))
                .collect(),
            axes: (1, 2),
        },
    ]
}

fn grey(v: f64, max: f64) -> Rgb {
    let g = (255.0 * (v / max).clamp(0.0, 1.0)).round() as u8;
    [g, g, g]
}

/// A value for a label: three significant digits, in exponent form where
/// fixed point would hide them (real data are around 1e-5).
fn label(v: f64) -> String {
    match v.abs() {
        a if a == 0.0 => "0".into(),
        a if (0.01..10000.0).contains(&a) => format!("{v:.3}"),
        _ => format!("{v:.2e}"),
    }
}

/// A horizontal grey-scale bar from 0 to `max`, labelled with its units.
fn colour_bar(c: &mut Canvas, x: i64, y: i64, w: i64, label_text: &str, max: f64) {
    for i in 0..w {
        c.rect(x + i, y, 1, 10, grey(i as f64, (w - 1) as f64));
    }
    c.text(x, y + 14, "0", BLACK);
    let m = label(max);
    c.text(x + w - 8 * m.len() as i64, y + 14, &m, BLACK);
    c.text(x, y - 12, label_text, BLACK);
}

/// The letter of the patient direction a (LPS) unit vector points to most:
/// L/R, P/A, S/I.
fn direction_letter(v: [f64; 3]) -> char {
    let i = (0..3)
        .max_by(|&a, &b| v[a].abs().total_cmp(&v[b].abs()))
        .expect("3 axes");
    let letters = [('L', 'R'), ('P', 'A'), ('S', 'I')];
    match v[i] >= 0.0 {
        true => letters[i].0,
        false => letters[i].1,
    }
}

/// The montage: rows axial / coronal / sagittal; columns truth, iterative,
/// gridding and | |iterative| - truth | (magnitudes; without a truth, the
/// two reconstructions only). Images share one grey scale, 0 to the truth's
/// maximum (the iterative result's without a truth); the error has its own.
/// `geometry` places the image in the patient (LPS) for the panels'
/// orientation letters; `None`: the scanner's axes (synthetic data).
pub fn montage(
    path: &Path,
    grid: &Grid,
    geometry: Option<&Geometry>,
    truth: Option<&[f64]>,
    recon: &[Complex<f64>],
    gridding: &[Complex<f64>],
) -> Result<(), recon_io::IoError> {
    let mut cols = Vec::new();
    if let Some(t) = truth {
        cols.push(Column::new("truth", Values::Real(t), Scale::Image));
    }
    cols.push(Column::new(
        "iterative",
        Values::Magnitude(recon),
        Scale::Image,
    ));
    cols.push(Column::new(
        "gridding",
        Values::Magnitude(gridding),
        Scale::Image,
    ));
    if let Some(t) = truth {
        cols.push(Column::new(
            "|error| iterative",
            Values::Error(recon, t),
            Scale::Error,
        ));
    }
    montage_columns(path, grid, geometry, &cols)
}

/// |v| per voxel.
pub fn magnitude(v: &[Complex<f64>]) -> Vec<f64> {
    v.par_iter().map(|c| c.norm()).collect()
}

/// Which grey scale a montage column shares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scale {
    /// Images of the object: 0 to the truth's peak (or the first image's).
    Image,
    /// Errors: 0 to the largest error shown.
    Error,
    /// Its own: 0 to its peak (a reference of another contrast).
    Own,
}

/// A column's voxel values, each computed where it is read: a montage
/// reads three slices and the peak, so no volume of them is made (at
/// 256^3 a volume of magnitudes is 134 MB).
#[derive(Clone, Copy)]
pub enum Values<'a> {
    /// Real values as they are.
    Real(&'a [f64]),
    /// The magnitudes of a complex image.
    Magnitude(&'a [Complex<f64>]),
    /// `| |image| - truth |`.
    Error(&'a [Complex<f64>], &'a [f64]),
    /// `|a - b|` of magnitudes.
    RealError(&'a [f64], &'a [f64]),
}

impl Values<'_> {
    fn at(&self, i: usize) -> f64 {
        // |z| as sqrt(re^2 + im^2), not hypot: a grey level needs no
        // guard against overflow, and hypot is the montage's slowest part.
        match self {
            Values::Real(v) => v[i],
            Values::Magnitude(v) => v[i].norm_sqr().sqrt(),
            Values::Error(v, t) => (v[i].norm_sqr().sqrt() - t[i]).abs(),
            Values::RealError(a, b) => (a[i] - b[i]).abs(),
        }
    }

    fn len(&self) -> usize {
        match self {
            Values::Real(v) | Values::RealError(v, _) => v.len(),
            Values::Magnitude(v) | Values::Error(v, _) => v.len(),
        }
    }

    /// The largest value (at least the smallest positive float).
    fn peak(&self) -> f64 {
        (0..self.len())
            .into_par_iter()
            .map(|i| self.at(i))
            .reduce(|| 0.0, f64::max)
            .max(f64::MIN_POSITIVE)
    }
}

/// One column of a montage: central slices of a volume.
pub struct Column<'a> {
    pub name: String,
    pub values: Values<'a>,
    pub scale: Scale,
}

impl<'a> Column<'a> {
    pub fn new(name: &str, values: Values<'a>, scale: Scale) -> Self {
        Column {
            name: name.to_string(),
            values,
            scale,
        }
    }

    /// `|image - truth|`, of magnitudes.
    pub fn error(name: &str, image: &'a [f64], truth: &'a [f64]) -> Self {
        Column::new(name, Values::RealError(image, truth), Scale::Error)
    }
}

/// Pixels per voxel along each grid axis: physical proportions (the
/// largest FOV about 160 pixels across), each axis at least 40 pixels
/// long, so that a thin slab's side views stay readable.
fn pixels_per_voxel(grid: &Grid) -> [i64; 3] {
    let fov = grid.fov_mm.iter().copied().fold(0.0, f64::max);
    let v = grid.voxel_mm();
    [0, 1, 2].map(|d| {
        let physical = (160.0 * v[d] / fov).round().max(1.0) as i64;
        physical.max((40 + grid.n[d] as i64 - 1) / grid.n[d] as i64)
    })
}

/// Central axial, coronal and sagittal slices (rows) of each column; the
/// one plane of a 2-D grid. Each panel carries the patient directions of
/// its edges (from `geometry`, else the scanner's axes).
pub fn montage_columns(
    path: &Path,
    grid: &Grid,
    geometry: Option<&Geometry>,
    cols: &[Column],
) -> Result<(), recon_io::IoError> {
    let peak = |v: &Values| v.peak();
    let shared = |scale: Scale| -> Option<f64> {
        let vols: Vec<&Column> = cols.iter().filter(|c| c.scale == scale).collect();
        match scale {
            Scale::Image => vols.first().map(|c| peak(&c.values)),
            _ => vols.iter().map(|c| peak(&c.values)).reduce(f64::max),
        }
    };
    let (img_max, err_max) = (shared(Scale::Image), shared(Scale::Error));
    let g = geometry.copied().unwrap_or_else(Geometry::identity);
    let dirs = [g.read_dir, g.phase_dir, g.slice_dir];
    let ends = |d: usize| {
        let v = dirs[d];
        (direction_letter(v.map(|x| -x)), direction_letter(v))
    };
    let p = pixels_per_voxel(grid);
    // A 2-D grid has its one plane to show.
    let rows = if grid.is_2d() { 1 } else { 3 };
    let size = |axes: (usize, usize)| {
        (
            grid.n[axes.0] as i64 * p[axes.0],
            grid.n[axes.1] as i64 * p[axes.1],
        )
    };
    let panels = [(0, 1), (0, 2), (1, 2)];
    // Column width: the widest panel; row height: its panel's.
    let cell_w = panels[..rows].iter().map(|a| size(*a).0).max().unwrap_or(1) + 24;
    let row_h: Vec<i64> = panels[..rows].iter().map(|a| size(*a).1 + 24).collect();
    let (left, top) = (80i64, 28i64);
    let w = (left + cols.len() as i64 * cell_w + 8).max(440);
    let h = top + row_h.iter().sum::<i64>() + 76;
    let mut c = Canvas::new(w as usize, h as usize, WHITE);
    for (j, col) in cols.iter().enumerate() {
        let (name, vol) = (&col.name, &col.values);
        c.text(left + j as i64 * cell_w + 10, 10, name, BLACK);
        let max = match col.scale {
            Scale::Image => img_max,
            Scale::Error => err_max,
            Scale::Own => None,
        }
        .unwrap_or_else(|| peak(vol));
        let mut y0 = top;
        for (r, sl) in central_slices(grid, vol).iter().take(rows).enumerate() {
            let x0 = left + j as i64 * cell_w + 10;
            let (pw, ph) = (p[sl.axes.0], p[sl.axes.1]);
            for (i, v) in sl.v.iter().enumerate() {
                let (x, y) = ((i % sl.w) as i64, (i / sl.w) as i64);
                c.rect(x0 + x * pw, y0 + 8 + y * ph, pw, ph, grey(*v, max));
            }
            // Orientation: the horizontal axis's ends left and right, the
            // vertical's (pointing up) top and bottom.
            let (wd, hd) = size(sl.axes);
            let ((l, rr), (b, t)) = (ends(sl.axes.0), ends(sl.axes.1));
            c.text(x0 - 9, y0 + 8 + hd / 2 - 4, &l.to_string(), GREY);
            c.text(x0 + wd + 1, y0 + 8 + hd / 2 - 4, &rr.to_string(), GREY);
            c.text(x0 + wd / 2 - 4, y0 - 1, &t.to_string(), GREY);
            c.text(x0 + wd / 2 - 4, y0 + 9 + hd, &b.to_string(), GREY);
            y0 += row_h[r];
        }
    }
    let names: &[&str] = if rows == 1 {
        &["plane"]
    } else {
        &["axial", "coronal", "sagittal"]
    };
    let mut y0 = top;
    for (r, name) in names.iter().enumerate() {
        c.text(4, y0 + row_h[r] / 2 - 4, name, BLACK);
        y0 += row_h[r];
    }
    let y = top + row_h.iter().sum::<i64>() + 24;
    if let Some(m) = img_max {
        colour_bar(&mut c, left, y, 160, "|image|, data units", m);
    }
    if let Some(m) = err_max {
        colour_bar(&mut c, left + 200, y, 160, "|error|, data units", m);
    }
    c.write_png(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_keep_three_significant_digits_at_any_scale() {
        assert_eq!(label(0.556), "0.556");
        // real data are around 1e-5: never "0.000"
        assert_eq!(label(1.234e-5), "1.23e-5");
        assert_eq!(label(123456.0), "1.23e5");
        assert_eq!(label(0.0), "0");
    }

    #[test]
    fn orientation_letters_follow_the_geometry() {
        // recon's frame without geometry: x to the patient's right, y
        // anterior, z superior (LPS: -x, -y, +z).
        let g = Geometry::identity();
        assert_eq!(direction_letter(g.read_dir), 'R');
        assert_eq!(direction_letter(g.phase_dir), 'A');
        assert_eq!(direction_letter(g.slice_dir), 'S');
        // a sagittal slice: readout along P, phase along S, slice along L,
        // and an oblique vector takes its largest component
        assert_eq!(direction_letter([0.0, 1.0, 0.0]), 'P');
        assert_eq!(direction_letter([0.0, 0.0, -1.0]), 'I');
        assert_eq!(direction_letter([0.3, -0.2, 0.93]), 'S');
        assert_eq!(direction_letter([0.9, 0.1, 0.4]), 'L');
    }

    #[test]
    fn a_thin_slab_keeps_its_side_views_readable() {
        // 4 slices of 10 mm under a 240 mm FOV: physically 40 px tall at
        // 160 px per 240 mm would be 27 px; each axis gets at least 40 px.
        let g = Grid::new([32, 32, 4], [240.0, 240.0, 40.0]).unwrap();
        let p = pixels_per_voxel(&g);
        assert_eq!(p[0], 5);
        assert_eq!(p[1], 5);
        assert!(p[2] * 4 >= 40, "{p:?}");
    }
}
