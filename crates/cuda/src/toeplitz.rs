//! The Toeplitz product on the GPU, pruned and fused:
//! `out = crop(IFFT(fq .* FFT(pad(x))))` on the `2n` grid without ever
//! touching its upper half in z.
//!
//! The padded input is zero for z >= nz and only z < nz of the output is
//! kept, so the grid is held as its lower half only:
//! 1. pad x into the planes z < nz (zeros beyond nx and ny);
//! 2. cuFFT: batched 2-D FFTs of those planes (x and y);
//! 3. `toeplitz_columns` (kernels/toeplitz.cu): per (x, y) column, the z FFT
//!    of the column (upper half zero), the product with FFT(Q) scaled by
//!    `1 / (2n)^3`, and the inverse z FFT, keeping the lower half, in one
//!    pass through shared memory;
//! 4. cuFFT: batched inverse 2-D FFTs of the planes;
//! 5. crop.
//!
//! Against cuFFT's 3-D transforms on the whole grid, half the planes are
//! transformed in x and y, the z transforms and the product cost one read
//! and one write of half the grid, and the separate scaling and product
//! passes are gone. The column lengths of [`LENGTHS`] take this path;
//! others fall back to the pieces.

use crate::device::Device;
use crate::error::Ctx;
use cudarc::cufft::{sys as fft_sys, CudaFft};
use cudarc::driver::{CudaFunction, CudaSlice, LaunchConfig, PushKernelArg};
use recon_core::Result;

/// The column lengths `2 nz` with a kernel (`toeplitz_columns_L`), as in
/// toeplitz.cu: the even matrices of 8 to 512 whose doubled size has no
/// prime factor above 5 and divides by 8.
pub(crate) const LENGTHS: [usize; 14] = [
    16, 32, 64, 96, 128, 160, 192, 256, 320, 384, 512, 640, 768, 1024,
];

/// Every kernel of toeplitz.cu.
pub(crate) fn kernel_names() -> Vec<String> {
    LENGTHS.iter().map(|l| kernel(*l)).collect()
}

fn kernel(l: usize) -> String {
    format!("toeplitz_columns_{l}")
}

/// Columns per block for length `l`, as `columns_for` in toeplitz.cu: a
/// power of two from 4 to 32, about 256 threads a block.
fn columns_per_block(l: usize) -> usize {
    let mut c = 1;
    while 2 * c * (l / 8) <= 256 && 2 * c <= 32 {
        c *= 2;
    }
    c.max(4)
}

/// The kernel's dynamic shared memory: the twiddles, then the block's
/// columns of `l` float2, one word of padding per 32.
fn shared_bytes(l: usize) -> usize {
    let words = l * columns_per_block(l);
    8 * (l + words + words / 32)
}

/// What the fused path needs per grid shape, made once.
pub(crate) struct Columns {
    /// Batched 2-D FFTs of the nz lower planes of the 2n grid.
    planes: CudaFft,
    /// exp(i 2pi k / L), k < L, as float2.
    twiddles: CudaSlice<f32>,
    /// The column kernel for this length, and its launch shape.
    kernel: CudaFunction,
    cfg: LaunchConfig,
}

impl Device {
    fn columns(&self, n: [usize; 3]) -> Result<Option<Columns>> {
        let l = 2 * n[2];
        if !LENGTHS.contains(&l) {
            return Ok(None);
        }
        let (px, py) = (2 * n[0], 2 * n[1]);
        let plane = (px * py) as i32;
        self.ensure_fits(8 * px * py * n[2], "the Toeplitz product's cuFFT plan")?;
        // cuFFT is row-major: a plane is (2ny, 2nx), nz of them, contiguous.
        let planes = CudaFft::plan_many(
            &[py as i32, px as i32],
            None,
            1,
            plane,
            None,
            1,
            plane,
            fft_sys::cufftType::CUFFT_C2C,
            n[2] as i32,
            self.stream.clone(),
        )
        .at(&format!("cuFFT plan for the planes of {n:?}"))?;
        let tw: Vec<f32> = (0..l)
            .flat_map(|k| {
                let a = std::f64::consts::TAU * k as f64 / l as f64;
                [a.cos() as f32, a.sin() as f32]
            })
            .collect();
        let c = columns_per_block(l);
        Ok(Some(Columns {
            planes,
            twiddles: self.upload(&tw)?,
            kernel: self.f(&kernel(l)).clone(),
            cfg: LaunchConfig {
                grid_dim: ((px * py).div_ceil(c) as u32, 1, 1),
                block_dim: ((c * l / 8) as u32, 1, 1),
                shared_mem_bytes: shared_bytes(l) as u32,
            },
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
        let cols = match cache.entry(n) {
            Entry::Occupied(e) => e.into_mut(),
            Entry::Vacant(e) => match self.columns(n)? {
                Some(c) => e.insert(c),
                None => return Ok(false),
            },
        };
        let l = 2 * n[2];
        let p = 4 * n[0] * n[1];
        // The lower half of `work` holds the planes z < nz.
        // 1. those planes of pad(x)
        self.pad(work, x, n, n[2])?;
        // 2. FFT along x and y
        self.fft_exec(&cols.planes, work, -1)?;
        // 3. along z: FFT, product with FFT(Q) / (2n)^3, inverse FFT
        // 1 / (2n)^3: cuFFT and the columns transform unnormalised.
        let scale = 1.0 / (p * l) as f32;
        let (p, nz) = (p as i64, n[2] as i32);
        let mut b = self.stream.launch_builder(&cols.kernel);
        b.arg(&mut *work)
            .arg(fq)
            .arg(&cols.twiddles)
            .arg(&p)
            .arg(&nz)
            .arg(&scale);
        unsafe { b.launch(cols.cfg) }.at("launch toeplitz_columns")?;
        // 4. inverse FFT along x and y
        self.fft_exec(&cols.planes, work, 1)?;
        // 5. crop
        self.crop(out, work, n)?;
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
    }
}
