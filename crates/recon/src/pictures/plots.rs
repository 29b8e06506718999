//! Plots: curves against an axis with a legend (the CG residuals,
//! `validate`'s sweeps) and a horizontal bar chart.

use super::canvas::{Canvas, Rgb, BLACK, GREY, WHITE};
use std::path::Path;

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
