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

const ENCODING_MAGIC: &[u8; 8] = b"reconSC4";

/// Little-endian, lengths first, checked on decoding.
impl Scan {
    /// Writes the encoding to `w` (buffer it: values are written one by one).
    pub fn write_to(&self, w: &mut impl Write) -> io::Result<()> {
        w.write_all(ENCODING_MAGIC)?;
        write_grid(w, &self.grid)?;
        write_u64(w, 3 * self.traj.len() as u64)?;
        for v in self.traj.iter().flatten() {
            w.write_all(&v.to_le_bytes())?;
        }
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
    v.iter().try_for_each(|x| w.write_all(&x.to_le_bytes()))
}

/// Complex numbers as (re, im) pairs, their count of floats first.
fn write_pairs(w: &mut impl Write, v: &[Complex<f64>]) -> io::Result<()> {
    write_u64(w, 2 * v.len() as u64)?;
    v.iter().try_for_each(|c| {
        w.write_all(&c.re.to_le_bytes())?;
        w.write_all(&c.im.to_le_bytes())
    })
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

/// Reads `len` floats in blocks, handing each block to `take`.
fn read_floats_into(r: &mut impl Read, len: u64, mut take: impl FnMut(&[f64])) -> io::Result<()> {
    check(len <= MAX_VALUES, "array length")?;
    let mut left = len as usize;
    let mut bytes = vec![0u8; 8 * BLOCK];
    let mut floats = vec![0f64; BLOCK];
    while left > 0 {
        let n = left.min(BLOCK);
        r.read_exact(&mut bytes[..8 * n])?;
        for (f, b) in floats[..n].iter_mut().zip(bytes.chunks_exact(8)) {
            *f = f64::from_le_bytes(b.try_into().expect("8 bytes"));
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
