//! The canvas every picture is drawn on: RGB pixels, rectangles,
//! Bresenham's lines and text in an 8x8 bitmap font (font8x8), written as
//! PNG by the png crate.

use font8x8::UnicodeFonts;
use std::path::Path;

pub(super) type Rgb = [u8; 3];
pub(super) const WHITE: Rgb = [255, 255, 255];
pub(super) const BLACK: Rgb = [0, 0, 0];
pub(super) const GREY: Rgb = [160, 160, 160];

/// An RGB image, row-major.
pub(super) struct Canvas {
    w: usize,
    h: usize,
    px: Vec<u8>,
}

impl Canvas {
    pub(super) fn new(w: usize, h: usize, bg: Rgb) -> Self {
        Canvas {
            w,
            h,
            px: bg.repeat(w * h),
        }
    }

    pub(super) fn set(&mut self, x: i64, y: i64, c: Rgb) {
        if x >= 0 && y >= 0 && (x as usize) < self.w && (y as usize) < self.h {
            let i = 3 * (y as usize * self.w + x as usize);
            self.px[i..i + 3].copy_from_slice(&c);
        }
    }

    pub(super) fn rect(&mut self, x: i64, y: i64, w: i64, h: i64, c: Rgb) {
        for yy in y..y + h {
            for xx in x..x + w {
                self.set(xx, yy, c);
            }
        }
    }

    /// Bresenham's line.
    pub(super) fn line(&mut self, (mut x0, mut y0): (i64, i64), (x1, y1): (i64, i64), c: Rgb) {
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
    pub(super) fn text(&mut self, x: i64, y: i64, s: &str, c: Rgb) {
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

    pub(super) fn write_png(&self, path: &Path) -> Result<(), recon_io::IoError> {
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
