//! The Toeplitz product on the GPU, pruned and fused:
//! `out = crop(IFFT(fq .* FFT(pad(x))))` on the `2n` grid, as five passes of
//! FFTs along lines, of our own (kernels/toeplitz.cu), with no cuFFT call:
//! 1. x lines: each row of x, zero-padded to 2nx, transformed (rows y < ny,
//!    z < nz only: the others are zero);
//! 2. y lines: transformed for z < nz, their upper half read as zero;
//! 3. z lines, every (x, y): the FFT (upper half zero), the product with
//!    FFT(Q) scaled by `1 / (2n)^3` and the inverse FFT, lower half kept;
//! 4. y lines: the inverse FFT for z < nz, lower half kept;
//! 5. x lines: the inverse FFT of the rows y < ny, z < nz, cropped into out.
//!
//! The grid is held as its lower half in z only. Each pass reads and writes
//! global memory once and skips the points that are zero or not needed: in
//! units of x's size, 34 reads and writes against about 55 for padding and
//! cropping around cuFFT's 2-D transforms of the planes, and 90 for 3-D
//! transforms of the whole grid. Shapes whose doubled sizes are all in
//! [`LENGTHS`] take this path; others fall back to the pieces.

use crate::device::Device;
use crate::error::Ctx;
use cudarc::driver::{CudaFunction, CudaSlice, DeviceRepr, LaunchConfig, PushKernelArg};
use recon_core::Result;

/// The line lengths `2 n` with kernels (`toeplitz_lines_L` and
/// `toeplitz_columns_L`), as in toeplitz.cu: the even sizes of 8 to 512
/// whose double has no prime factor above 5 and divides by 8.
pub(crate) const LENGTHS: [usize; 14] = [
    16, 32, 64, 96, 128, 160, 192, 256, 320, 384, 512, 640, 768, 1024,
];

/// Every kernel of toeplitz.cu.
pub(crate) fn kernel_names() -> Vec<String> {
    LENGTHS
        .iter()
        .flat_map(|l| {
            [
                format!("toeplitz_columns_{l}"),
                format!("toeplitz_lines_{l}"),
            ]
        })
        .collect()
}

/// Lines per block for length `l`, as `columns_for` in toeplitz.cu: a
/// power of two from 4 to 32, about 256 threads a block.
fn columns_per_block(l: usize) -> usize {
    let mut c = 1;
    while 2 * c * (l / 8) <= 256 && 2 * c <= 32 {
        c *= 2;
    }
    c.max(4)
}

/// The kernels' dynamic shared memory: the twiddles, then the block's lines
/// of `l` float2, one word of padding per 32.
fn shared_bytes(l: usize) -> usize {
    let words = l * columns_per_block(l);
    8 * (l + words + words / 32)
}

/// Where line q's points lie: point i at `(q / a) * b + (q % a) * d + i *
/// step` (in float2), for i < n. `Map` in toeplitz.cu.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
struct Map {
    b: i64,
    d: i64,
    step: i64,
    a: i32,
    n: i32,
}

// SAFETY: plain integers, laid out as the C struct (8 + 8 + 8 + 4 + 4 bytes).
unsafe impl DeviceRepr for Map {}

/// Lines one after another in memory, `len` points each, `n` of them read
/// or written.
fn rows(len: usize, n: usize) -> Map {
    Map {
        b: 0,
        d: len as i64,
        step: 1,
        a: 1 << 30,
        n: n as i32,
    }
}

/// One kernel for lines of length `l`, with its twiddles and launch shape
/// for `count` lines.
struct Pass {
    kernel: CudaFunction,
    twiddles: CudaSlice<f32>,
    cfg: LaunchConfig,
    count: i32,
}

impl Device {
    fn pass(&self, kind: &str, l: usize, count: usize) -> Result<Pass> {
        let tw: Vec<f32> = (0..l)
            .flat_map(|k| {
                let a = std::f64::consts::TAU * k as f64 / l as f64;
                [a.cos() as f32, a.sin() as f32]
            })
            .collect();
        let c = columns_per_block(l);
        Ok(Pass {
            kernel: self.f(&format!("toeplitz_{kind}_{l}")).clone(),
            twiddles: self.upload(&tw)?,
            cfg: LaunchConfig {
                grid_dim: (count.div_ceil(c) as u32, 1, 1),
                block_dim: ((c * l / 8) as u32, 1, 1),
                shared_mem_bytes: shared_bytes(l) as u32,
            },
            count: count as i32,
        })
    }

    /// Lines' FFT of sign `s` from `src` (None: in place) into `dst`.
    fn lines(
        &self,
        p: &Pass,
        dst: &mut CudaSlice<f32>,
        src: Option<&CudaSlice<f32>>,
        mo: Map,
        mi: Map,
        s: f32,
    ) -> Result<()> {
        let none = 0u64;
        let mut b = self.stream.launch_builder(&p.kernel);
        b.arg(&mut *dst);
        match src {
            Some(src) => b.arg(src),
            None => b.arg(&none),
        };
        b.arg(&mo).arg(&mi).arg(&p.count).arg(&p.twiddles).arg(&s);
        unsafe { b.launch(p.cfg) }
            .at("launch toeplitz_lines")
            .map(|_| ())
    }
}

/// What the fused path needs per grid shape, made once: the passes along
/// x (rows of x), y and z.
pub(crate) struct Passes {
    x: Pass,
    y: Pass,
    z: Pass,
}

impl Device {
    fn passes(&self, n: [usize; 3]) -> Result<Option<Passes>> {
        let [nx, ny, nz] = n;
        if ![nx, ny, nz].iter().all(|v| LENGTHS.contains(&(2 * v))) {
            return Ok(None);
        }
        Ok(Some(Passes {
            x: self.pass("lines", 2 * nx, ny * nz)?,
            y: self.pass("lines", 2 * ny, 2 * nx * nz)?,
            z: self.pass("columns", 2 * nz, 4 * nx * ny)?,
        }))
    }

    /// The pruned, fused Toeplitz product (module docs); `Ok(false)`, with
    /// nothing done, for shapes it does not cover. `work` holds at least
    /// the lower half of the 2n grid.
    pub fn toeplitz(
        &self,
        out: &mut CudaSlice<f32>,
        x: &CudaSlice<f32>,
        fq: &CudaSlice<f32>,
        work: &mut CudaSlice<f32>,
        n: [usize; 3],
    ) -> Result<bool> {
        use std::collections::hash_map::Entry;
        let mut cache = self.toeplitz.lock().expect("Toeplitz plans poisoned");
        let p = match cache.entry(n) {
            Entry::Occupied(e) => e.into_mut(),
            Entry::Vacant(e) => match self.passes(n)? {
                Some(p) => e.insert(p),
                None => return Ok(false),
            },
        };
        let [nx, ny, nz] = n;
        let (px, py) = (2 * nx, 2 * ny);
        let plane = (px * py) as i64;
        // The lower half of `work` holds the planes z < nz: point (x, y, z)
        // at z * plane + y * px + x.
        // Rows of work, y < ny: row q = z ny + y.
        let work_rows = |n| Map {
            b: plane,
            d: px as i64,
            step: 1,
            a: ny as i32,
            n: n as i32,
        };
        // y lines of work: line q = z px + x.
        let work_ys = |n| Map {
            b: plane,
            d: 1,
            step: px as i64,
            a: px as i32,
            n: n as i32,
        };
        // 1. x: FFT of x's rows zero-padded to 2nx
        self.lines(&p.x, work, Some(x), work_rows(px), rows(nx, nx), -1.0)?;
        // 2. y: FFT, points y >= ny zero
        self.lines(&p.y, work, None, work_ys(py), work_ys(ny), -1.0)?;
        // 3. z: FFT, product with FFT(Q) / (2n)^3, inverse FFT
        // 1 / (2n)^3: every pass transforms unnormalised.
        let scale = 1.0 / (plane as usize * 2 * nz) as f32;
        let nz32 = nz as i32;
        let mut b = self.stream.launch_builder(&p.z.kernel);
        b.arg(&mut *work)
            .arg(fq)
            .arg(&p.z.twiddles)
            .arg(&plane)
            .arg(&nz32)
            .arg(&scale);
        unsafe { b.launch(p.z.cfg) }.at("launch toeplitz_columns")?;
        // 4. y: inverse FFT, points y < ny kept
        self.lines(&p.y, work, None, work_ys(ny), work_ys(py), 1.0)?;
        // 5. x: inverse FFT of the rows y < ny, cropped into out
        self.lines(&p.x, out, Some(work), rows(nx, nx), work_rows(px), 1.0)?;
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_length_has_radices_8_4_2_3_5_and_fits_a_block() {
        for l in LENGTHS {
            assert_eq!(l % 8, 0, "L = {l}");
            let mut rest = l;
            for r in [2, 3, 5] {
                while rest % r == 0 {
                    rest /= r;
                }
            }
            assert_eq!(rest, 1, "L = {l}");
            let c = columns_per_block(l);
            assert!(c.is_power_of_two() && (4..=32).contains(&c), "L = {l}");
            assert!(c * l / 8 <= 512, "L = {l}");
            // No opt-in to more than the default 48 KiB of shared memory.
            assert!(shared_bytes(l) <= 48 * 1024, "L = {l}");
        }
        assert_eq!(columns_per_block(256), 8);
        assert_eq!(columns_per_block(96), 16);
        assert_eq!(columns_per_block(1024), 4);
        assert_eq!(std::mem::size_of::<Map>(), 32);
    }
}
