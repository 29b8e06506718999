//! A byte encoding of a checked [`Scan`], for handing it from the reader
//! process (which may meet a file that crashes HDF5) to its parent. It is
//! streamed both ways: the reader writes straight from its scan into the
//! pipe and the parent decodes straight into its own, so neither holds the
//! encoding itself (a scan of several GiB would otherwise be held two or
//! three times over).

use super::{CoilNoise, Scan, MAX_COILS};
use crate::geometry::{Geometry, Index, Part};
use recon_core::{Complex, Grid, Volume};
use std::io::{self, Read, Write};

const ENCODING_MAGIC: &[u8; 8] = b"reconSC5";

/// Little-endian, lengths first, checked on decoding. Each array of values
/// says after its length whether they travel as float32 (4) or float64
/// (8): float32 where every value is one exactly, as a file's float32 data
/// are after the reader widened them, which halves the bytes through the
/// pipe.
impl Scan {
    /// Writes the encoding to `w` (buffer it: lengths and tags are written
    /// a few bytes at a time).
    pub fn write_to(&self, w: &mut impl Write) -> io::Result<()> {
        w.write_all(ENCODING_MAGIC)?;
        write_grid(w, &self.grid)?;
        write_u64(w, 3 * self.traj.len() as u64)?;
        write_values(w, || self.traj.iter().flatten().copied())?;
        write_u64(w, self.coils as u64)?;
        write_pairs(w, &self.data)?;
        match &self.noise {
            None => w.write_all(&[0])?,
            Some(CoilNoise::Samples(v)) => {
                w.write_all(&[1])?;
                write_pairs(w, v)?;
            }
            Some(CoilNoise::Covariance(v)) => {
                w.write_all(&[2])?;
                write_pairs(w, v)?;
            }
        }
        match &self.maps {
            None => w.write_all(&[0])?,
            Some(m) => {
                w.write_all(&[1])?;
                write_u64(w, m.len() as u64)?;
                for map in m {
                    write_pairs(w, map)?;
                }
            }
        }
        match &self.truth {
            Some(t) => write_floats(w, t)?,
            None => write_u64(w, u64::MAX)?,
        }
        match &self.anatomy {
            Some(a) => {
                w.write_all(&[1])?;
                write_grid(w, &a.grid)?;
                write_floats(w, &a.values)?;
            }
            None => w.write_all(&[0])?,
        }
        write_geometry(w, self.geometry.as_ref())?;
        write_u64(w, self.parts.len() as u64)?;
        for p in &self.parts {
            for v in p.index.0 {
                w.write_all(&v.to_le_bytes())?;
            }
            write_u64(w, p.samples.start as u64)?;
            write_u64(w, p.samples.end as u64)?;
            write_geometry(w, p.geometry.as_ref())?;
        }
        Ok(())
    }

    /// Decodes [`Scan::write_to`]'s encoding from `r`; an `InvalidData`
    /// error when it is not the encoding of a valid scan.
    pub fn read_from(r: &mut impl Read) -> io::Result<Scan> {
        let mut magic = [0u8; 8];
        r.read_exact(&mut magic)?;
        check(&magic == ENCODING_MAGIC, "not a scan encoding")?;
        let grid = read_grid(r)?;
        let len = read_u64(r)?;
        check(len % 3 == 0, "trajectory length")?;
        let t = read_reals(r, len)?;
        let coils = usize::try_from(read_u64(r)?).unwrap_or(0);
        check((1..=MAX_COILS).contains(&coils), "coil count")?;
        let data = read_pairs(r)?;
        check(t.len() / 3 * coils == data.len(), "data length")?;
        let noise = match read_byte(r)? {
            0 => None,
            1 => Some(CoilNoise::Samples(read_pairs(r)?)),
            2 => Some(CoilNoise::Covariance(read_pairs(r)?)),
            _ => return Err(invalid("noise tag")),
        };
        match &noise {
            Some(CoilNoise::Samples(v)) => {
                check(!v.is_empty() && v.len() % coils == 0, "noise length")?
            }
            Some(CoilNoise::Covariance(v)) => check(v.len() == coils * coils, "covariance")?,
            None => {}
        }
        let maps = match read_byte(r)? {
            0 => None,
            1 => {
                check(read_u64(r)? == coils as u64, "map count")?;
                let mut maps = Vec::with_capacity(coils);
                for _ in 0..coils {
                    let m = read_pairs(r)?;
                    check(m.len() == grid.len(), "map length")?;
                    maps.push(m);
                }
                Some(maps)
            }
            _ => return Err(invalid("maps tag")),
        };
        let truth = match read_u64(r)? {
            u64::MAX => None,
            len => {
                check(len == grid.len() as u64, "truth length")?;
                Some(read_reals(r, len)?)
            }
        };
        let anatomy = match read_byte(r)? {
            0 => None,
            1 => {
                let g = read_grid(r)?;
                let len = read_u64(r)?;
                let v = read_reals(r, len)?;
                Some(Volume::new(g, v).map_err(|e| invalid(&e.to_string()))?)
            }
            _ => return Err(invalid("anatomy tag")),
        };
        let geometry = read_geometry(r)?;
        let m = t.len() / 3;
        let count = read_u64(r)?;
        check(count <= m as u64, "part count")?;
        let mut parts = Vec::with_capacity(count as usize);
        let mut next = 0;
        for _ in 0..count {
            let mut index = [0u16; 5];
            for v in &mut index {
                let mut b = [0u8; 2];
                r.read_exact(&mut b)?;
                *v = u16::from_le_bytes(b);
            }
            let start = read_u64(r)?;
            let end = read_u64(r)?;
            // The parts tile the samples, in order.
            check(
                start == next && end > start && end <= m as u64,
                "part samples",
            )?;
            next = end;
            parts.push(Part {
                index: Index(index),
                samples: start as usize..end as usize,
                geometry: read_geometry(r)?,
            });
        }
        check(
            parts.is_empty() || next == m as u64,
            "parts cover the samples",
        )?;
        Ok(Scan {
            grid,
            traj: t.chunks_exact(3).map(|k| [k[0], k[1], k[2]]).collect(),
            coils,
            data,
            noise,
            maps,
            truth,
            anatomy,
            geometry,
            parts,
        })
    }

    /// The encoding as bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut b = Vec::new();
        self.write_to(&mut b).expect("writing to memory");
        b
    }

    /// Decodes [`Scan::to_bytes`]; `None` when the bytes are not exactly
    /// such an encoding of a valid scan.
    pub fn from_bytes(mut bytes: &[u8]) -> Option<Scan> {
        let s = Scan::read_from(&mut bytes).ok()?;
        bytes.is_empty().then_some(s)
    }
}

fn write_u64(w: &mut impl Write, v: u64) -> io::Result<()> {
    w.write_all(&v.to_le_bytes())
}

fn write_grid(w: &mut impl Write, g: &Grid) -> io::Result<()> {
    for n in g.n {
        write_u64(w, n as u64)?;
    }
    for f in g.fov_mm {
        w.write_all(&f.to_le_bytes())?;
    }
    Ok(())
}

fn write_geometry(w: &mut impl Write, g: Option<&Geometry>) -> io::Result<()> {
    match g {
        None => w.write_all(&[0]),
        Some(g) => {
            w.write_all(&[1])?;
            for v in [g.position_mm, g.read_dir, g.phase_dir, g.slice_dir]
                .iter()
                .flatten()
            {
                w.write_all(&v.to_le_bytes())?;
            }
            Ok(())
        }
    }
}

fn read_geometry(r: &mut impl Read) -> io::Result<Option<Geometry>> {
    match read_byte(r)? {
        0 => Ok(None),
        1 => {
            let mut v = [[0f64; 3]; 4];
            for x in v.iter_mut().flatten() {
                *x = f64::from_bits(read_u64(r)?);
            }
            let g = Geometry {
                position_mm: v[0],
                read_dir: v[1],
                phase_dir: v[2],
                slice_dir: v[3],
            };
            g.check().map_err(|e| invalid(&e))?;
            Ok(Some(g))
        }
        _ => Err(invalid("geometry tag")),
    }
}

fn write_floats(w: &mut impl Write, v: &[f64]) -> io::Result<()> {
    write_u64(w, v.len() as u64)?;
    write_values(w, || v.iter().copied())
}

/// Complex numbers as (re, im) pairs, their count of floats first.
fn write_pairs(w: &mut impl Write, v: &[Complex<f64>]) -> io::Result<()> {
    write_u64(w, 2 * v.len() as u64)?;
    write_values(w, || v.iter().flat_map(|c| [c.re, c.im]))
}

/// The values of `values()` (called twice: a look, then the writing), after
/// their width: 4 bytes each where every one is a float32 exactly, else 8.
/// Encoded a block at a time.
fn write_values<I: Iterator<Item = f64>>(
    w: &mut impl Write,
    values: impl Fn() -> I,
) -> io::Result<()> {
    let narrow = values().all(|x| f64::from(x as f32) == x);
    let width = if narrow { 4 } else { 8 };
    w.write_all(&[width as u8])?;
    let mut bytes = Vec::with_capacity(width * BLOCK);
    let mut all = values().peekable();
    while all.peek().is_some() {
        bytes.clear();
        let block = all.by_ref().take(BLOCK);
        if narrow {
            block.for_each(|x| bytes.extend_from_slice(&(x as f32).to_le_bytes()));
        } else {
            block.for_each(|x| bytes.extend_from_slice(&x.to_le_bytes()));
        }
        w.write_all(&bytes)?;
    }
    Ok(())
}

fn invalid(what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("malformed scan: {what}"),
    )
}

fn check(ok: bool, what: &str) -> io::Result<()> {
    if ok {
        Ok(())
    } else {
        Err(invalid(what))
    }
}

fn read_byte(r: &mut impl Read) -> io::Result<u8> {
    let mut b = [0u8; 1];
    r.read_exact(&mut b)?;
    Ok(b[0])
}

fn read_u64(r: &mut impl Read) -> io::Result<u64> {
    let mut b = [0u8; 8];
    r.read_exact(&mut b)?;
    Ok(u64::from_le_bytes(b))
}

fn read_grid(r: &mut impl Read) -> io::Result<Grid> {
    let mut n = [0usize; 3];
    for v in &mut n {
        *v = usize::try_from(read_u64(r)?).map_err(|_| invalid("grid"))?;
    }
    let mut fov = [0f64; 3];
    for v in &mut fov {
        *v = f64::from_bits(read_u64(r)?);
    }
    Grid::new(n, fov).map_err(|_| invalid("grid"))
}

/// The most values one array of the encoding may declare: a scan's largest
/// array (the data of [`MAX_COILS`] coils of the most samples) as floats.
const MAX_VALUES: u64 = 2 * MAX_COILS as u64 * recon_core::MAX_SAMPLES as u64;

/// Floats decoded per block (even, so that no pair is split).
const BLOCK: usize = 8192;

/// Reads `len` floats (after their width, 4 or 8 bytes) in blocks, handing
/// each block to `take`.
fn read_floats_into(r: &mut impl Read, len: u64, mut take: impl FnMut(&[f64])) -> io::Result<()> {
    check(len <= MAX_VALUES, "array length")?;
    let width = read_byte(r)? as usize;
    check(width == 4 || width == 8, "value width")?;
    let mut left = len as usize;
    let mut bytes = vec![0u8; width * BLOCK];
    let mut floats = vec![0f64; BLOCK];
    while left > 0 {
        let n = left.min(BLOCK);
        r.read_exact(&mut bytes[..width * n])?;
        let chunks = bytes[..width * n].chunks_exact(width);
        // One loop per width: the width is the array's, not the value's.
        if width == 4 {
            for (f, b) in floats[..n].iter_mut().zip(chunks) {
                *f = f64::from(f32::from_le_bytes(b.try_into().expect("4 bytes")));
            }
        } else {
            for (f, b) in floats[..n].iter_mut().zip(chunks) {
                *f = f64::from_le_bytes(b.try_into().expect("8 bytes"));
            }
        }
        take(&floats[..n]);
        left -= n;
    }
    Ok(())
}

/// `len` reals, straight into their vector.
fn read_reals(r: &mut impl Read, len: u64) -> io::Result<Vec<f64>> {
    let mut v = Vec::with_capacity(len.min(MAX_VALUES) as usize);
    read_floats_into(r, len, |f| v.extend_from_slice(f))?;
    Ok(v)
}

/// Complex numbers from (re, im) pairs, their count of floats first.
fn read_pairs(r: &mut impl Read) -> io::Result<Vec<Complex<f64>>> {
    let len = read_u64(r)?;
    check(len % 2 == 0, "pairs")?;
    let mut v = Vec::with_capacity((len.min(MAX_VALUES) / 2) as usize);
    read_floats_into(r, len, |f| {
        v.extend(f.chunks_exact(2).map(|c| Complex::new(c[0], c[1])))
    })?;
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A scan of one coil, 64 samples, with a truth; values from `value`.
    fn scan(value: impl Fn(usize) -> f64) -> Scan {
        let grid = Grid::new([4, 4, 4], [200.0; 3]).unwrap();
        Scan {
            grid,
            traj: (0..64)
                .map(|i| [value(i), value(i + 1), value(i + 2)])
                .collect(),
            coils: 1,
            data: (0..64)
                .map(|i| Complex::new(value(3 * i), -value(i)))
                .collect(),
            noise: Some(CoilNoise::Covariance(vec![Complex::new(2.0, 0.0)])),
            maps: None,
            truth: Some((0..64).map(|i| value(7 * i)).collect()),
            anatomy: None,
            geometry: None,
            parts: Vec::new(),
        }
    }

    #[test]
    fn values_travel_as_float32_only_where_that_loses_nothing() {
        // Float32 values (a file's, widened): 4 bytes each, back exactly.
        let narrow = scan(|i| f64::from((i as f32).sin() * 3.5));
        let bytes = narrow.to_bytes();
        assert_eq!(Scan::from_bytes(&bytes), Some(narrow));
        // One value that float32 would round: that array in float64, and
        // every value back exactly.
        let mut wide = scan(|i| f64::from((i as f32).sin() * 3.5));
        wide.truth.as_mut().unwrap()[5] = 0.1;
        let wide_bytes = wide.to_bytes();
        assert_eq!(Scan::from_bytes(&wide_bytes), Some(wide));
        // The truth's 64 values: 4 more bytes each, nothing else changed.
        assert_eq!(wide_bytes.len(), bytes.len() + 64 * 4);
        // Values of float64 throughout: 8 bytes each (the traj's 192 values,
        // the data's 128 and the truth's 64; the covariance, 2 + 0i, stays
        // float32).
        let f64_bytes = scan(|i| (i as f64).sin() * 3.5).to_bytes();
        assert_eq!(f64_bytes.len(), bytes.len() + (192 + 128 + 64) * 4);
        assert_eq!(
            Scan::from_bytes(&f64_bytes),
            Some(scan(|i| (i as f64).sin() * 3.5))
        );
    }

    #[test]
    fn a_width_other_than_4_or_8_is_malformed() {
        let mut bytes = scan(|i| i as f64).to_bytes();
        // The trajectory's width: after the magic, the grid (3 sizes and
        // 3 FOVs) and its length.
        let at = 8 + 6 * 8 + 8;
        assert_eq!(bytes[at], 4);
        assert!(Scan::from_bytes(&bytes).is_some());
        for w in [0, 2, 5, 16] {
            bytes[at] = w;
            let e = Scan::read_from(&mut &bytes[..]).unwrap_err();
            assert!(e.to_string().contains("value width"), "{e}");
        }
    }
}
