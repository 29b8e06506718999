//! Pictures of a run, for people: a montage of the three orthogonal central
//! slices (truth | iterative | gridding | error) and the CG residual against
//! iteration. Drawn on a small RGB canvas with an 8x8 bitmap font (font8x8),
//! encoded by the png crate: no system fonts or plotting stack needed.

use font8x8::UnicodeFonts;
use rayon::prelude::*;
use recon_core::{Complex, Grid};
use recon_io::geometry::Geometry;
use std::path::Path;

type Rgb = [u8; 3];
const WHITE: Rgb = [255, 255, 255];
const BLACK: Rgb = [0, 0, 0];
const GREY: Rgb = [160, 160, 160];

/// An RGB image, row-major.
struct Canvas {
    w: usize,
    h: usize,
    px: Vec<u8>,
}

impl Canvas {
    fn new(w: usize, h: usize, bg: Rgb) -> Self {
        Canvas {
            w,
            h,
            px: bg.repeat(w * h),
        }
    }

    fn set(&mut self, x: i64, y: i64, c: Rgb) {
        if x >= 0 && y >= 0 && (x as usize) < self.w && (y as usize) < self.h {
            let i = 3 * (y as usize * self.w + x as usize);
            self.px[i..i + 3].copy_from_slice(&c);
        }
    }

    fn rect(&mut self, x: i64, y: i64, w: i64, h: i64, c: Rgb) {
        for yy in y..y + h {
            for xx in x..x + w {
                self.set(xx, yy, c);
            }
        }
    }

    /// Bresenham's line.
    fn line(&mut self, (mut x0, mut y0): (i64, i64), (x1, y1): (i64, i64), c: Rgb) {
        let (dx, dy) = ((x1 - x0).abs(), -(y1 - y0).abs());
        let (sx, sy) = (if x0 < x1 { 1 } else { -1 }, if y0 < y1 { 1 } else { -1 });
        let mut err = dx + dy;
        loop {
            self.set(x0, y0, c);
            if x0 == x1 && y0 == y1 {
                break;
            }
            let e2 = 2 * err;
            if e2 >= dy {
                err += dy;
                x0 += sx;
            }
            if e2 <= dx {
                err += dx;
                y0 += sy;
            }
        }
    }

    /// Text in the 8x8 font, top-left at (x, y).
    fn text(&mut self, x: i64, y: i64, s: &str, c: Rgb) {
        for (i, ch) in s.chars().enumerate() {
            let glyph = font8x8::BASIC_FONTS.get(ch).unwrap_or([0; 8]);
            for (row, bits) in glyph.iter().enumerate() {
                for col in 0..8 {
                    if bits & (1 << col) != 0 {
                        self.set(x + 8 * i as i64 + col, y + row as i64, c);
                    }
                }
            }
        }
    }

    fn write_png(&self, path: &Path) -> Result<(), recon_io::IoError> {
        // The OS's errors (a full disk) as every file names them.
        let err = |e: png::EncodingError| match e {
            png::EncodingError::IoError(e) => recon_io::os_error(path, "write", e),
            e => recon_io::IoError::Encode {
                path: path.display().to_string(),
                format: "PNG",
                message: e.to_string(),
            },
        };
        let file =
            std::fs::File::create(path).map_err(|e| recon_io::os_error(path, "create", e))?;
        let mut enc =
            png::Encoder::new(std::io::BufWriter::new(file), self.w as u32, self.h as u32);
        enc.set_color(png::ColorType::Rgb);
        enc.set_depth(png::BitDepth::Eight);
        // fdeflate's fast mode: a 256^3 run's montage (3.4 MB of pixels)
        // took 0.15-0.19 s to encode with the default (Balanced) on the GPU
        // machine, the longest of the outputs; a larger file is no matter.
        enc.set_compression(png::Compression::Fast);
        let mut w = enc.write_header().map_err(err)?;
        w.write_image_data(&self.px).map_err(err)?;
        w.finish().map_err(err)
    }
}

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

/// Colours of successive series.
const PALETTE: [Rgb; 8] = [
    [30, 90, 200],
    [200, 60, 40],
    [40, 150, 60],
    [150, 60, 170],
    [230, 150, 20],
    [20, 160, 170],
    [120, 120, 120],
    [0, 0, 0],
];

/// One curve: a name for the legend and its points.
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
}

fn ticks(lo: f64, hi: f64) -> Vec<f64> {
    let step = ((hi - lo) / 5.0).max(f64::MIN_POSITIVE);
    let mag = 10f64.powf(step.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| *s >= step)
        .unwrap_or(10.0 * mag);
    let mut t = (lo / step).ceil() * step;
    let mut out = Vec::new();
    while t <= hi + 1e-9 * step {
        out.push(t);
        t += step;
    }
    out
}

/// A line plot of several series with a legend; `fx` and `fy` format tick
/// labels (e.g. `1e-3` for a log axis drawn as exponents).
pub fn line_plot(
    path: &Path,
    title: &str,
    x_label: &str,
    series: &[Series],
    fx: &dyn Fn(f64) -> String,
    fy: &dyn Fn(f64) -> String,
) -> Result<(), recon_io::IoError> {
    let (w, h) = (720i64, 440i64);
    let (x0, y0, x1, y1) = (80i64, 40i64, w - 200, h - 60);
    let mut c = Canvas::new(w as usize, h as usize, WHITE);
    c.text(x0, 12, title, BLACK);
    let pts = || series.iter().flat_map(|s| s.points.iter().copied());
    let (mut xl, mut xh) = pts().fold((f64::MAX, f64::MIN), |(a, b), (x, _)| (a.min(x), b.max(x)));
    let (mut yl, mut yh) = pts().fold((f64::MAX, f64::MIN), |(a, b), (_, y)| (a.min(y), b.max(y)));
    if xl > xh {
        (xl, xh, yl, yh) = (0.0, 1.0, 0.0, 1.0);
    }
    if xh - xl < 1e-12 {
        xh = xl + 1.0;
    }
    if yh - yl < 1e-12 {
        (yl, yh) = (yl - 0.5, yh + 0.5);
    }
    let (ty, tx) = (ticks(yl, yh), ticks(xl, xh));
    let yl = yl.min(ty.first().copied().unwrap_or(yl));
    let yh = yh.max(ty.last().copied().unwrap_or(yh));
    let px = |x: f64| x0 + ((x1 - x0) as f64 * (x - xl) / (xh - xl)).round() as i64;
    let py = |y: f64| y1 - ((y1 - y0) as f64 * (y - yl) / (yh - yl)).round() as i64;
    for &t in &ty {
        c.line((x0, py(t)), (x1, py(t)), GREY);
        let label = fy(t);
        c.text(x0 - 8 - 8 * label.len() as i64, py(t) - 4, &label, BLACK);
    }
    for &t in &tx {
        c.line((px(t), y1), (px(t), y1 + 4), BLACK);
        let label = fx(t);
        c.text(px(t) - 4 * label.len() as i64, y1 + 8, &label, BLACK);
    }
    c.line((x0, y0), (x0, y1), BLACK);
    c.line((x0, y1), (x1, y1), BLACK);
    c.text(
        (x0 + x1) / 2 - 4 * x_label.len() as i64,
        h - 24,
        x_label,
        BLACK,
    );
    for (k, s) in series.iter().enumerate() {
        let col = PALETTE[k % PALETTE.len()];
        for p in s.points.windows(2) {
            let (a, b) = ((px(p[0].0), py(p[0].1)), (px(p[1].0), py(p[1].1)));
            c.line(a, b, col);
            c.line((a.0, a.1 + 1), (b.0, b.1 + 1), col);
        }
        for &(x, y) in &s.points {
            c.rect(px(x) - 2, py(y) - 2, 5, 5, col);
        }
        c.rect(x1 + 16, y0 + 16 * k as i64 + 2, 12, 4, col);
        c.text(x1 + 32, y0 + 16 * k as i64, &s.name, BLACK);
    }
    c.write_png(path)
}

/// log10 of the relative residual against iteration.
pub fn residual_plot(path: &Path, residuals: &[f64]) -> Result<(), recon_io::IoError> {
    residual_curves(path, &[("CG".to_string(), residuals.to_vec())])
}

/// Residual curves of several solves, on a log scale.
pub fn residual_curves(path: &Path, runs: &[(String, Vec<f64>)]) -> Result<(), recon_io::IoError> {
    let series: Vec<Series> = runs
        .iter()
        .map(|(name, r)| Series {
            name: name.clone(),
            points: r
                .iter()
                .enumerate()
                .map(|(i, v)| ((i + 1) as f64, v.max(1e-300).log10()))
                .collect(),
        })
        .collect();
    line_plot(
        path,
        "CG relative residual ||b - Ax|| / ||b||",
        "iteration",
        &series,
        &|x| format!("{x:.0}"),
        &|y| format!("1e{y:.0}"),
    )
}

/// A horizontal bar chart: one labelled bar per entry, the value printed.
pub fn bar_chart(
    path: &Path,
    title: &str,
    bars: &[(String, f64)],
    unit: &str,
) -> Result<(), recon_io::IoError> {
    let label_w = bars.iter().map(|b| b.0.len()).max().unwrap_or(0) as i64 * 8 + 16;
    let (bar_w, row) = (360i64, 22i64);
    let (w, h) = (label_w + bar_w + 120, 48 + row * bars.len() as i64 + 16);
    let mut c = Canvas::new(w as usize, h as usize, WHITE);
    c.text(8, 12, title, BLACK);
    let max = bars.iter().map(|b| b.1).fold(f64::MIN_POSITIVE, f64::max);
    for (k, (name, v)) in bars.iter().enumerate() {
        let y = 40 + row * k as i64;
        c.text(8, y + 4, name, BLACK);
        let len = ((bar_w as f64) * (v / max).clamp(0.0, 1.0)).round() as i64;
        c.rect(label_w, y, len, row - 6, PALETTE[k % PALETTE.len()]);
        c.text(label_w + len + 6, y + 4, &format!("{v:.2} {unit}"), BLACK);
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
