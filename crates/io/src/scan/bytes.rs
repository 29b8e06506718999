//! A byte encoding of a checked [`Scan`], for handing it from the reader
//! process (which may meet a file that crashes HDF5) to its parent.

use super::{CoilNoise, Scan, MAX_COILS};
use recon_core::{Complex, Grid, Volume};

/// A byte encoding of a [`Scan`], for handing a checked scan from a reader
/// process to its parent: little-endian, lengths first, checked on decoding.
impl Scan {
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend_from_slice(ENCODING_MAGIC);
        let grid = |b: &mut Vec<u8>, g: &Grid| {
            g.n.iter()
                .for_each(|n| b.extend_from_slice(&(*n as u64).to_le_bytes()));
            g.fov_mm
                .iter()
                .for_each(|f| b.extend_from_slice(&f.to_le_bytes()));
        };
        let floats = |b: &mut Vec<u8>, v: &mut dyn Iterator<Item = f64>, len: usize| {
            b.extend_from_slice(&(len as u64).to_le_bytes());
            v.for_each(|x| b.extend_from_slice(&x.to_le_bytes()));
        };
        grid(&mut b, &self.grid);
        floats(
            &mut b,
            &mut self.traj.iter().flatten().copied(),
            3 * self.traj.len(),
        );
        b.extend_from_slice(&(self.coils as u64).to_le_bytes());
        let pairs = |b: &mut Vec<u8>, v: &[Complex<f64>]| {
            floats(b, &mut v.iter().flat_map(|c| [c.re, c.im]), 2 * v.len())
        };
        pairs(&mut b, &self.data);
        match &self.noise {
            None => b.push(0),
            Some(CoilNoise::Samples(v)) => {
                b.push(1);
                pairs(&mut b, v);
            }
            Some(CoilNoise::Covariance(v)) => {
                b.push(2);
                pairs(&mut b, v);
            }
        }
        match &self.maps {
            None => b.push(0),
            Some(m) => {
                b.push(1);
                pairs(&mut b, &m.concat());
            }
        }
        match &self.truth {
            Some(t) => floats(&mut b, &mut t.iter().copied(), t.len()),
            None => b.extend_from_slice(&u64::MAX.to_le_bytes()),
        }
        match &self.anatomy {
            Some(a) => {
                b.push(1);
                grid(&mut b, &a.grid);
                floats(&mut b, &mut a.values.iter().copied(), a.values.len());
            }
            None => b.push(0),
        }
        b
    }

    /// Decodes [`Scan::to_bytes`]; `None` when the bytes are not such an
    /// encoding of a valid scan.
    pub fn from_bytes(bytes: &[u8]) -> Option<Scan> {
        let mut r = Reader(bytes.strip_prefix(ENCODING_MAGIC.as_slice())?);
        let grid = r.grid()?;
        let t = r.floats()?;
        let coils = usize::try_from(r.u64()?)
            .ok()
            .filter(|c| (1..=MAX_COILS).contains(c))?;
        let d = r.pairs()?;
        if t.len() % 3 != 0 || t.len() / 3 * coils != d.len() {
            return None;
        }
        let noise = match r.take(1)? {
            [0] => None,
            [1] => Some(CoilNoise::Samples(r.pairs()?)),
            [2] => Some(CoilNoise::Covariance(r.pairs()?)),
            _ => return None,
        };
        match &noise {
            Some(CoilNoise::Samples(v)) if v.is_empty() || v.len() % coils != 0 => return None,
            Some(CoilNoise::Covariance(v)) if v.len() != coils * coils => return None,
            _ => {}
        }
        let maps = match r.take(1)? {
            [0] => None,
            [1] => {
                let v = r.pairs()?;
                if v.len() != coils * grid.len() {
                    return None;
                }
                Some(v.chunks_exact(grid.len()).map(|c| c.to_vec()).collect())
            }
            _ => return None,
        };
        let truth = match r.u64()? {
            u64::MAX => None,
            len => Some(r.floats_of(len)?).filter(|v| v.len() == grid.len()),
        };
        let anatomy = match r.take(1)? {
            [0] => None,
            [1] => {
                let g = r.grid()?;
                Some(Volume::new(g, r.floats()?).ok()?)
            }
            _ => return None,
        };
        if !r.0.is_empty() {
            return None;
        }
        Some(Scan {
            grid,
            traj: t.chunks_exact(3).map(|k| [k[0], k[1], k[2]]).collect(),
            coils,
            data: d,
            noise,
            maps,
            truth,
            anatomy,
        })
    }
}

/// Reads [`Scan::to_bytes`]'s encoding, checking every length.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (a, rest) = self.0.split_at(n);
        self.0 = rest;
        Some(a)
    }

    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }

    fn f64(&mut self) -> Option<f64> {
        Some(f64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }

    fn grid(&mut self) -> Option<Grid> {
        let mut n = [0usize; 3];
        for v in &mut n {
            *v = usize::try_from(self.u64()?).ok()?;
        }
        let mut fov = [0f64; 3];
        for v in &mut fov {
            *v = self.f64()?;
        }
        Grid::new(n, fov).ok()
    }

    fn floats_of(&mut self, len: u64) -> Option<Vec<f64>> {
        let len = usize::try_from(len).ok()?;
        let raw = self.take(len.checked_mul(8)?)?;
        Some(
            raw.chunks_exact(8)
                .map(|c| f64::from_le_bytes(c.try_into().expect("8 bytes")))
                .collect(),
        )
    }

    fn floats(&mut self) -> Option<Vec<f64>> {
        let len = self.u64()?;
        self.floats_of(len)
    }

    /// Floats read as (re, im) pairs.
    fn pairs(&mut self) -> Option<Vec<Complex<f64>>> {
        let v = self.floats()?;
        if v.len() % 2 != 0 {
            return None;
        }
        Some(
            v.chunks_exact(2)
                .map(|c| Complex::new(c[0], c[1]))
                .collect(),
        )
    }
}

const ENCODING_MAGIC: &[u8; 8] = b"reconSC2";
