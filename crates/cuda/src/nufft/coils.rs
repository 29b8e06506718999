//! SENSE's F^H D on one GPU: type 1 batched over the coils through one
//! plan, `out = sum_c conj(S_c) . type1(w . d_c)`.
//!
//! The coils' values go up one after another through two pinned host
//! buffers: while the GPU spreads and transforms coil c, the host weighs
//! coil c + 1 into the other buffer, and the copy engine moves it without
//! staging. Taken one by one through pageable memory, the host's weighing
//! and copying came between the GPU's coils: where a coil's GPU work is
//! short (64^3), F^H D took 2.6 times as long; from 128^3 on, the GPU's
//! spreading is the limit either way. On the line FFTs the map rides on
//! type 1's last write, so a coil costs one copy, one spread and three
//! line passes.

use super::{CudaNufft, Fft};
use crate::device::Device;
use crate::error::Ctx;
use cudarc::driver::{CudaEvent, CudaSlice, PinnedHostSlice};
use rayon::prelude::*;
use recon_core::{Complex, Error, Progress, Result};

/// Points weighed per rayon task.
const CHUNK: usize = 1 << 14;

/// A plan's staging for [`Device::nufft_type1_coils`], made on first use:
/// two pinned host buffers of one coil's values (interleaved float32), the
/// events that mark their copies done, and the values on the device.
pub(crate) struct Staging {
    host: [PinnedHostSlice<f32>; 2],
    copied: [CudaEvent; 2],
    mu: CudaSlice<f32>,
}

impl Device {
    fn staging(&self, points: usize) -> Result<Staging> {
        let len = 2 * points.max(1);
        let pinned = || -> Result<PinnedHostSlice<f32>> {
            // SAFETY: zeroed at once, before anything reads it.
            let mut h =
                unsafe { self.ctx.alloc_pinned::<f32>(len) }.at("allocate pinned host memory")?;
            h.as_mut_slice().at("pinned host memory")?.fill(0.0);
            Ok(h)
        };
        let event = || self.ctx.new_event(None).at("create an event");
        Ok(Staging {
            host: [pinned()?, pinned()?],
            copied: [event()?, event()?],
            mu: self.zeros::<f32>(len)?,
        })
    }

    /// `out = sum_c conj(S_c) . type1(w . d_c)` (module docs): `d` holds
    /// the coils' values in turn (`[C, M]`), `w` one weight per point,
    /// `maps` one `S_c` per coil.
    pub(crate) fn nufft_type1_coils(
        &self,
        p: &CudaNufft,
        out: &mut CudaSlice<f32>,
        w: &[f64],
        d: &[Complex<f64>],
        maps: &[&CudaSlice<f32>],
        progress: Progress<'_>,
    ) -> Result<()> {
        let m = p.points;
        Error::check_len("NUFFT weights (one per point)", m, w.len())?;
        Error::check_len("NUFFT modes", 2 * p.modes_len(), out.len())?;
        let mut staging = p.staging.lock().expect("NUFFT staging poisoned");
        if staging.is_none() {
            *staging = Some(self.staging(m)?);
        }
        let st = staging.as_mut().expect("made above");
        let mut fine = p.fine.lock().expect("NUFFT fine grid poisoned");
        // The cuFFT path writes type 1 whole, then applies the map.
        let mut one = match p.fft {
            Fft::Lines(_) => None,
            Fft::Cufft(_) => Some(self.zeros::<f32>(out.len())?),
        };
        for (c, s) in maps.iter().enumerate() {
            let k = c % 2;
            // This buffer's copy (two coils ago) must be done before the
            // host writes it again.
            st.copied[k].synchronize().at("wait for a coil's copy")?;
            let host = st.host[k].as_mut_slice().at("pinned host memory")?;
            // mu = w . d_c, as float32
            host[..2 * m]
                .par_chunks_mut(2 * CHUNK)
                .zip(w.par_chunks(CHUNK))
                .zip(d[c * m..(c + 1) * m].par_chunks(CHUNK))
                .for_each(|((h, w), d)| {
                    for ((h, w), d) in h.chunks_exact_mut(2).zip(w).zip(d) {
                        h[0] = (d.re * w) as f32;
                        h[1] = (d.im * w) as f32;
                    }
                });
            self.stream
                .memcpy_htod(&st.host[k], &mut st.mu)
                .at("copy a coil's values to the device")?;
            st.copied[k].record(&self.stream).at("mark a coil's copy")?;
            self.nufft_spread(p, &mut fine, &st.mu)?;
            match &mut one {
                None => self.type1_from_fine(p, out, &mut fine, Some((s, c > 0)))?,
                Some(one) => {
                    self.type1_from_fine(p, one, &mut fine, None)?;
                    // out (+)= conj(S_c) . one
                    self.coil(out, if c == 0 { 1 } else { 2 }, s, one)?;
                }
            }
            progress(c as u64 + 1, maps.len() as u64);
        }
        Ok(())
    }
}
