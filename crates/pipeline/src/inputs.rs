//! A run's inputs: the trajectory, and k-space data synthesised from the
//! phantom (per coil, with noise) or read from the scan, with the truth and
//! the anatomical reference; the coils prewhitened and compressed, and the
//! data normalised to a power of two.

use crate::coils::prepare;
use crate::config::{Loaded, Source};
use crate::{Context, Outputs, Result, Ui};
use rayon::prelude::*;
use recon_core::{Complex, Volume};
use recon_synth::{add_coil_noise, CoilNoise};

/// The inputs of a run.
pub struct Inputs {
    pub traj: Vec<[f64; 3]>,
    /// `[C, M]`: each coil's samples in turn.
    pub data: Vec<Complex<f64>>,
    /// Receive coils C (1: one coil of sensitivity 1, no SENSE).
    pub coils: usize,
    /// The coils' true sensitivities on the grid, when known (synthetic
    /// coils), whitened and compressed as the data.
    pub true_maps: Option<Vec<Vec<Complex<f64>>>>,
    /// Whether the coils' data (and maps) were prewhitened ...
    pub whitened: bool,
    /// ... and compressed: `(C, energy kept)`.
    pub compressed: Option<(usize, f64)>,
    /// The true image, when known (always for synthetic data). With
    /// synthetic coils it is the phantom times the root sum of squares of
    /// the true sensitivities: the image that unit-norm maps estimated from
    /// the data reconstruct.
    pub truth: Option<Vec<f64>>,
    /// A proton-density reference, on its own grid ...
    pub anatomy: Option<Volume>,
    /// ... and averaged onto the reconstruction's grid (recon_prior::resample).
    pub anatomy_on_grid: Option<Vec<f64>>,
    /// The first coil's noise deviation per sample, in the data's units:
    /// synthetic data's (0 without noise), a scan's from its noise scan or
    /// covariance; `None` when the scan says nothing of its noise.
    pub noise_sigma: Option<f64>,
    /// Each sample's noise variance `E |n|^2` in `data` as prepared
    /// (whitened, compressed and normalised): the mean of the noise
    /// covariance's diagonal (whitening keeps it, see
    /// `recon_coils::whitening`) times `data_scale^2`; `None` without noise
    /// data (noiseless synthetic data included).
    pub sigma2: Option<f64>,
    /// The power of two the data (and, to match, the truth) were multiplied
    /// by so that the largest |D| lies in [0.5, 1): see [`normalise`].
    pub data_scale: f64,
}

/// The sample positions: generated, or from the scan file.
pub fn trajectory(l: &Loaded) -> Result<Vec<[f64; 3]>> {
    Ok(match &l.source {
        Source::Synthetic { trajectory, .. } => trajectory.generate(&l.grid)?,
        Source::Scan(s) => s.traj.clone(),
    })
}

/// The inputs as synthesised or read, before the coils are prepared.
pub struct Raw {
    pub traj: Vec<[f64; 3]>,
    /// `[C, M]`
    pub data: Vec<Complex<f64>>,
    pub coils: usize,
    /// The coils' sensitivities: the synthetic coils' own, or the scan
    /// file's `/coils/maps`.
    pub maps: Option<Vec<Vec<Complex<f64>>>>,
    /// The coils' noise covariance `[C, C]`, when known.
    pub covariance: Option<Vec<Complex<f64>>>,
    pub truth: Option<Vec<f64>>,
    /// Whether the truth is the phantom alone, to be weighted by the
    /// prepared maps' root sum of squares (synthetic coils).
    pub truth_by_maps: bool,
    pub anatomy: Option<Volume>,
    /// As [`Inputs::noise_sigma`].
    pub noise_sigma: Option<f64>,
}

/// k-space data on `traj`, the truth and the anatomy, with the coils
/// prepared ([`prepare`]): see [`raw_inputs`].
pub fn inputs(l: &Loaded, traj: Vec<[f64; 3]>, ui: &impl Ui) -> Result<Inputs> {
    prepared(l, raw_inputs(l, traj, ui)?, ui)
}

/// Prewhitens and compresses the coils of `raw`, and weights a synthetic
/// truth by the prepared maps ([`truth_seen`]).
pub fn prepared(l: &Loaded, raw: Raw, ui: &impl Ui) -> Result<Inputs> {
    let mut p = prepare(l, raw.data, raw.coils, raw.maps, raw.covariance.as_deref())?;
    let data_scale = normalise(&mut p.data);
    let sigma2 = raw.covariance.as_ref().map(|c| {
        let mean = (0..raw.coils).map(|i| c[i * raw.coils + i].re).sum::<f64>() / raw.coils as f64;
        mean * data_scale * data_scale
    });
    let mut truth = truth_seen(raw.truth, raw.truth_by_maps, p.maps.as_deref());
    if let Some(t) = &mut truth {
        t.iter_mut().for_each(|v| *v *= data_scale);
    }
    Ok(Inputs {
        data_scale,
        truth,
        anatomy_on_grid: match &raw.anatomy {
            Some(a) => ui.stage("reference on the grid", |_| on_grid(&l.grid, Some(a)))?,
            None => None,
        },
        anatomy: raw.anatomy,
        traj: raw.traj,
        data: p.data,
        coils: p.coils,
        true_maps: p.maps,
        whitened: p.whitened,
        compressed: p.compressed,
        noise_sigma: raw.noise_sigma,
        sigma2: sigma2.filter(|s| *s > 0.0),
    })
}

/// Multiplies `data` by the power of two that brings its largest |D| into
/// [0.5, 1), and returns it (1 for all-zero data). The float32 engine's
/// sums and dot products overflow for data of 1e10 times the usual scale
/// and underflow for 1e-20 times; every stage is linear in the data, and a
/// power of two scales every floating-point operation exactly, so the
/// normalised run's images, divided by the factor, are the very numbers
/// an unnormalised run gives wherever that one does not overflow. The
/// truth is multiplied by the same factor, so that PSNR compares like with
/// like, and [`Inputs::unscale`] undoes both for the outputs.
pub fn normalise(data: &mut [Complex<f64>]) -> f64 {
    let largest = data.iter().map(|d| d.norm()).fold(0.0, f64::max);
    if !(largest > 0.0 && largest.is_finite()) {
        return 1.0;
    }
    // largest = f 2^e with f in [0.5, 1): multiply by 2^-e.
    let e = largest.log2().floor() as i32 + 1;
    let scale = 2f64.powi(-e);
    data.iter_mut().for_each(|d| *d *= scale);
    scale
}

impl Inputs {
    /// Bytes of host memory the inputs hold (their arrays'), for a memory
    /// check made once they exist ([`crate::check_memory_holding`]).
    pub fn bytes(&self) -> u64 {
        use std::mem::size_of_val;
        let maps = self.true_maps.iter().flatten().map(|m| size_of_val(&m[..]));
        let sizes = [
            size_of_val(&self.traj[..]),
            size_of_val(&self.data[..]),
            self.truth.as_deref().map_or(0, size_of_val),
            self.anatomy
                .as_ref()
                .map_or(0, |a| size_of_val(&a.values[..])),
            self.anatomy_on_grid.as_deref().map_or(0, size_of_val),
        ];
        sizes.into_iter().chain(maps).map(|b| b as u64).sum()
    }

    /// What the truth and a run's images are multiplied by to be in the
    /// data's own units again: undoes [`normalise`].
    pub fn back(&self) -> f64 {
        1.0 / self.data_scale
    }

    /// Undoes [`normalise`] on the truth and on a run's images, for the
    /// outputs: they are then in the data's own units.
    pub fn unscale(&mut self, out: &mut Outputs) {
        let back = self.back();
        if back == 1.0 {
            return;
        }
        for v in [&mut out.recon, &mut out.gridding, &mut out.fhd] {
            v.par_iter_mut().for_each(|c| *c *= back);
        }
        if let Some(t) = &mut self.truth {
            t.par_iter_mut().for_each(|v| *v *= back);
        }
        self.data.par_iter_mut().for_each(|d| *d *= back);
        self.data_scale = 1.0;
    }
}

/// The truth a run measures PSNR against: with synthetic coils
/// (`by_maps`), the phantom weighted by the prepared maps' root sum of
/// squares, the image that maps of unit norm reconstruct.
pub fn truth_seen(
    truth: Option<Vec<f64>>,
    by_maps: bool,
    maps: Option<&[Vec<Complex<f64>>]>,
) -> Option<Vec<f64>> {
    let mut truth = truth?;
    if let (true, Some(maps)) = (by_maps, maps) {
        for (t, r) in truth.iter_mut().zip(recon_coils::rss(maps)) {
            *t *= r;
        }
    }
    Some(truth)
}

/// k-space data on `traj`, the truth and the anatomy: synthesised (analytic
/// transform, per coil with `[coils]`, plus noise, and the box-averaged
/// phantoms), or from the scan.
pub fn raw_inputs(l: &Loaded, traj: Vec<[f64; 3]>, ui: &impl Ui) -> Result<Raw> {
    let mut raw = source_inputs(l, traj, ui)?;
    if let Some(r) = reference_on_grid(l, ui)? {
        raw.anatomy = Some(r);
    }
    Ok(raw)
}

/// `prior.reference` (a NIfTI with its own geometry) averaged onto the
/// grid of `l`'s image, which its geometry places in the scanner (the
/// first image's, for a scan of several: runs split them first).
fn reference_on_grid(l: &Loaded, ui: &impl Ui) -> Result<Option<Volume>> {
    let Some(r) = &l.reference else {
        return Ok(None);
    };
    let affine = crate::config::image_affines(&l.grid, &l.source)[0];
    let mut values = vec![0.0; l.grid.len()];
    ui.stage("reference resampled onto the grid", |_| {
        recon_prior::resample_oriented(&mut values, &l.grid, &affine, r)
    })
    .context("the reference of prior.reference")?;
    Ok(Some(Volume::new(l.grid, values)?))
}

/// [`raw_inputs`] from the config's source alone.
fn source_inputs(l: &Loaded, traj: Vec<[f64; 3]>, ui: &impl Ui) -> Result<Raw> {
    match &l.source {
        Source::Synthetic {
            phantom, anatomy, ..
        } => {
            let coils = l.cfg.coils.as_ref().map(|c| c.coils());
            let mut data = ui.stage("k-space", |_| match &coils {
                Some(c) => c.kspace(phantom, &l.grid, &traj),
                None => phantom.kspace(&l.grid, &traj),
            });
            let count = coils.map_or(1, |c| c.count);
            let maps: Option<Vec<Vec<Complex<f64>>>> = coils.map(|c| {
                ui.stage("coil maps", |_| {
                    c.sensitivities()
                        .iter()
                        .map(|s| s.on_grid(&l.grid))
                        .collect()
                })
            });
            let covariance = l.cfg.noise.as_ref().map(|n| {
                let correlation = l.cfg.coils.as_ref().map_or(0.0, |c| c.noise_correlation);
                let noise = CoilNoise {
                    snr: n.snr,
                    seed: n.seed,
                    correlation,
                };
                add_coil_noise(&mut data, count, noise)
            });
            let noise_sigma = covariance.as_ref().map_or(0.0, |c| c[0].sqrt());
            let pc = l
                .cfg
                .phantom
                .as_ref()
                .expect("synthetic data have [phantom]");
            let s = pc.supersample;
            // The reference on its own matrix over the same FOV.
            let anatomy = match anatomy {
                Some(a) => {
                    let m = pc.anatomy_matrix.map_or(l.grid.n, |m| m.0);
                    let g = recon_core::Grid::new(m, l.grid.fov_mm)?;
                    Some(Volume::new(
                        g,
                        ui.stage("reference", |_| a.rasterise(&g, s)),
                    )?)
                }
                None => None,
            };
            // The phantom's limits keep these finite; check rather than
            // let a NaN surface later as a solver failure.
            if let Some(m) = data
                .iter()
                .position(|d| !(d.re.is_finite() && d.im.is_finite()))
            {
                crate::bail!(
                    "the synthetic k-space datum {m} of phantom `{}` is {}: check the phantom's values and sizes{}",
                    phantom.name,
                    data[m],
                    if noise_sigma.is_finite() { "" } else { " and noise.snr" }
                );
            }
            Ok(Raw {
                truth: Some(ui.stage("truth", |_| phantom.rasterise(&l.grid, s))),
                truth_by_maps: coils.is_some(),
                anatomy,
                traj,
                data,
                coils: count,
                maps,
                covariance: covariance
                    .map(|c| c.into_iter().map(|v| Complex::new(v, 0.0)).collect()),
                noise_sigma: Some(noise_sigma),
            })
        }
        Source::Scan(s) => {
            let covariance = match &s.noise {
                None => None,
                Some(recon_io::scan::CoilNoise::Covariance(c)) => Some(c.clone()),
                Some(recon_io::scan::CoilNoise::Samples(n)) => Some(
                    recon_coils::covariance(n, s.coils)
                        .context("the noise samples of the scan file (kspace/noise)")?,
                ),
            };
            Ok(Raw {
                traj,
                data: s.data.clone(),
                coils: s.coils,
                maps: s.maps.clone(),
                noise_sigma: covariance.as_ref().map(|c| c[0].re.sqrt()),
                covariance,
                truth: s.truth.clone(),
                truth_by_maps: false,
                anatomy: s.anatomy.clone(),
            })
        }
    }
}

/// The reference averaged onto `grid`, once, before anything is computed:
/// a reference whose FOV misses the grid stops the run here.
fn on_grid(grid: &recon_core::Grid, a: Option<&Volume>) -> Result<Option<Vec<f64>>> {
    let Some(a) = a else { return Ok(None) };
    let mut out = vec![0.0; grid.len()];
    recon_prior::resample(&mut out, grid, a).context("the anatomical reference")?;
    Ok(Some(out))
}
