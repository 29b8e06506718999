//! The multi-coil stages: the coils' data prepared (prewhitened,
//! compressed), SENSE's maps, `sum_c S_c^H F^H D_c`, and the gridding
//! baseline by the root sum of squares.

use super::{from_f64, Inputs, Ui};
use crate::config::{self, Loaded};
use crate::{Context, Result};
use rayon::prelude::*;
use recon_cg::{q_peak, Problem, Toeplitz};
use recon_core::Complex;
use recon_encoding::{NufftBackend, Plan, SenseTerm};
use std::time::Instant;

type C64 = Complex<f64>;

/// Coil data made ready for SENSE: whitened when the noise covariance is
/// known (`sense.prewhiten`), then compressed (`sense.compress_*`). Maps
/// that came with the data are mixed the same way.
pub struct Prepared {
    /// `[K, M]`
    pub data: Vec<C64>,
    pub coils: usize,
    pub maps: Option<Vec<Vec<C64>>>,
    /// Whether the data were prewhitened.
    pub whitened: bool,
    /// `(C, energy kept)` when compressed from C coils.
    pub compressed: Option<(usize, f64)>,
}

/// Prewhitening and compression of `[C, M]` data, as the config asks.
pub fn prepare(
    l: &Loaded,
    data: Vec<C64>,
    coils: usize,
    maps: Option<Vec<Vec<C64>>>,
    covariance: Option<&[C64]>,
) -> Result<Prepared> {
    let s = &l.cfg.sense;
    let mut mix: Option<recon_coils::Mix> = None;
    let whitened = s.prewhiten && coils > 1 && covariance.is_some();
    if whitened {
        let psi = covariance.expect("checked");
        mix = Some(recon_coils::whitening(psi, coils).context("prewhitening the coils")?);
    }
    let keep = match (s.compress_coils, s.compress_energy) {
        (Some(k), _) => Some(recon_coils::Keep::Coils(k.min(coils))),
        (None, Some(f)) => Some(recon_coils::Keep::Energy(f)),
        (None, None) => None,
    };
    let mut compressed = None;
    let mut data = match &mix {
        Some(m) => m.data(&data)?,
        None => data,
    };
    if let (Some(keep), true) = (keep, coils > 1) {
        let (c, kept) = recon_coils::compression(&data, coils, keep).context("coil compression")?;
        data = c.data(&data)?;
        compressed = Some((coils, kept));
        mix = Some(match mix {
            Some(w) => c.after(&w)?,
            None => c,
        });
    }
    let maps = match (maps, &mix) {
        (Some(m), Some(mix)) => Some(mix.maps(&m)?),
        (m, _) => m,
    };
    Ok(Prepared {
        coils: mix.as_ref().map_or(coils, |m| m.rows),
        data,
        maps,
        whitened,
        compressed,
    })
}

/// The run's problem on the device: FFT(Q) with the data term (F^H F, or
/// SENSE's sum over the coils with their maps) and the right-hand side
/// (F^H D, or `sum_c S_c^H F^H D_c`), made on the device and left there
/// ([`Problem::rhs_host`] brings it back when the outputs ask). Returns it
/// with, for several coils, the gridding plan the maps were estimated on
/// (for the baseline) and the maps used (for the outputs). Times "maps", "fft_q",
/// "maps_upload" (several coils) and "fhd". `coil_devices`: the devices that
/// share the coils (`None`: as [`SenseTerm::new`] decides). `gridder`: a
/// gridding plan of the same trajectory to estimate the maps on (another
/// image of the same plan's), else one is made.
#[allow(clippy::type_complexity, clippy::too_many_arguments)]
pub fn stage_problem<'b, B: NufftBackend>(
    backend: &'b B,
    plan: &Plan<'_, B>,
    l: &Loaded,
    inputs: &Inputs,
    q: &[Complex<B::Real>],
    coil_devices: Option<usize>,
    gridder: Option<recon_gridding::Gridding<'b, B>>,
    ui: &impl Ui,
    seconds: &mut Vec<(&'static str, f64)>,
) -> Result<(
    Problem<'b, B>,
    Option<recon_gridding::Gridding<'b, B>>,
    Option<Vec<Vec<Complex<f64>>>>,
)> {
    let grid = &l.grid;
    if !maps_on_gridder(inputs) {
        // F^H D on the device: only the data go up.
        let t = Instant::now();
        let mut rhs = backend.zeros(grid.len())?;
        ui.stage("F^H D", |p| {
            plan.adjoint_on_device(&mut rhs, &inputs.data, p)
        })
        .context("computing F^H D")?;
        backend.synchronize()?;
        seconds.push(("fhd", t.elapsed().as_secs_f64()));
        let t = Instant::now();
        let toeplitz = Box::new(Toeplitz::new(backend, grid, q)?);
        let mut problem = Problem::on_device(backend, grid, q_peak(grid, q)?, toeplitz, rhs)?;
        if preconditioned(l) {
            problem.precondition(backend, q)?;
        }
        backend.synchronize()?;
        seconds.push(("fft_q", t.elapsed().as_secs_f64()));
        return Ok((problem, None, None));
    }
    let t = Instant::now();
    let g = match gridder {
        Some(g) => g,
        None => self::gridder(backend, l, inputs)?,
    };
    let maps = stage_maps(l, inputs, &g, ui)?;
    seconds.push(("maps", t.elapsed().as_secs_f64()));

    // FFT(Q), once whatever the coils ...
    let t = Instant::now();
    let toeplitz = Toeplitz::new(backend, grid, q)?;
    backend.synchronize()?;
    seconds.push(("fft_q", t.elapsed().as_secs_f64()));
    // ... and the maps to the device (and FFT(Q) to the other GPUs).
    let t = Instant::now();
    let on_device: Vec<Vec<Complex<B::Real>>> = maps.par_iter().map(|m| from_f64(m)).collect();
    let mut sense = SenseTerm::new(backend, plan, toeplitz, &on_device, coil_devices)?;
    drop(on_device);
    backend.synchronize()?;
    seconds.push(("maps_upload", t.elapsed().as_secs_f64()));

    let t = Instant::now();
    let rhs = ui
        .stage("F^H D", |p| sense.rhs(backend, plan, &inputs.data, p))
        .context("computing F^H D")?;
    backend.synchronize()?;
    seconds.push(("fhd", t.elapsed().as_secs_f64()));
    let mut problem = Problem::on_device(backend, grid, q_peak(grid, q)?, Box::new(sense), rhs)?;
    if preconditioned(l) {
        problem.precondition(backend, q)?;
    }
    Ok((problem, Some(g), Some(maps)))
}

/// Whether the builder estimates coil maps (several coils, or one coil's
/// known map) on a gridding plan of its own, which then grids the
/// baseline too; else the baseline needs nothing of the built problem.
pub(crate) fn maps_on_gridder(inputs: &Inputs) -> bool {
    inputs.coils > 1 || inputs.true_maps.is_some()
}

/// The gridding plan of a run (density weights made once).
pub fn gridder<'b, B: NufftBackend>(
    backend: &'b B,
    l: &Loaded,
    inputs: &Inputs,
) -> Result<recon_gridding::Gridding<'b, B>> {
    let gp = recon_gridding::Params {
        dcf_iterations: l.cfg.gridding.dcf_iterations,
    };
    recon_gridding::Gridding::new(backend, &l.grid, &inputs.traj, &gp)
        .context("gridding's density weights")
}

/// Each coil's samples, `[C, M]` split.
fn per_coil(inputs: &Inputs) -> impl Iterator<Item = &[Complex<f64>]> {
    inputs.data.chunks_exact(inputs.traj.len().max(1))
}

/// The multi-coil gridding baseline: each coil gridded, combined by the
/// root sum of squares.
pub(super) fn gridding_rss<B: NufftBackend>(
    g: &recon_gridding::Gridding<'_, B>,
    inputs: &Inputs,
) -> Result<Vec<Complex<f64>>> {
    let images = per_coil(inputs)
        .map(|d| g.image(d, None))
        .collect::<recon_core::Result<Vec<_>>>()
        .context("gridding")?;
    Ok(recon_coils::rss(&images)
        .into_iter()
        .map(|v| Complex::new(v, 0.0))
        .collect())
}

/// SENSE's coil maps: those given with the data, or estimated from
/// low-resolution images of the k-space centre (`sense.calibration`).
pub fn stage_maps<B: NufftBackend>(
    l: &Loaded,
    inputs: &Inputs,
    g: &recon_gridding::Gridding<'_, B>,
    ui: &impl Ui,
) -> Result<Vec<Vec<Complex<f64>>>> {
    let s = &l.cfg.sense;
    if s.maps == config::MapsSource::Given {
        // config::load checked that the data came with maps. Normalised by
        // their root sum of squares, as estimated maps are: both
        // reconstruct the truth of [`Inputs::truth`].
        let maps = inputs
            .true_maps
            .as_ref()
            .context("sense.maps = \"given\" needs maps with the data")?;
        return Ok(recon_coils::unit_norm(maps));
    }
    ui.stage("coil maps", |_| maps_from_data(g, &l.grid, &inputs.data, s))
        .context("estimating coil maps")
}

/// Maps estimated from `[C, M]` data on the gridding plan's trajectory,
/// by `sense.maps`: Inati's iteration on each coil's k-space centre
/// gridded into a low-resolution image (`recon_coils::estimate_maps`), or
/// ESPIRiT on the Cartesian k-space centre of each coil's gridded image
/// ([`espirit_from_data`]).
pub fn maps_from_data<B: NufftBackend>(
    g: &recon_gridding::Gridding<'_, B>,
    grid: &recon_core::Grid,
    data: &[C64],
    s: &config::SenseCfg,
) -> recon_core::Result<Vec<Vec<C64>>> {
    // At most a quarter of the smallest resolved matrix size: the images
    // must be of low resolution for the maps to be smooth.
    let n_min = grid.n.iter().copied().filter(|&n| n > 1).min().unwrap_or(1) as f64;
    let kc = s.calibration.min(n_min / 4.0);
    if s.maps == config::MapsSource::Espirit {
        return espirit_from_data(g, grid, data, kc);
    }
    // Inati's iteration on cells as coarse as the images' resolution
    // allows; each coil's image is averaged over them as soon as it is
    // made, so only the cells are kept.
    let p = recon_coils::MapParams {
        cell: recon_coils::cell_for(grid.n, kc),
        ..s.params()
    };
    let low = data
        .chunks_exact(g.samples().max(1))
        .map(|d| {
            Ok(recon_coils::cell_means(
                g.image(d, Some(kc))?,
                grid.n,
                p.cell,
            ))
        })
        .collect::<recon_core::Result<Vec<_>>>()?;
    recon_coils::estimate_maps_from_cells(grid.n, &low, &p)
}

/// ESPIRiT maps from `[C, M]` data: each coil gridded at full resolution,
/// its Cartesian k-space centre (`2 kc` points across each resolved axis)
/// the calibration data; kernels of 6 points per axis in 2-D and 5 in 3-D
/// (BART's 6 would make 216 C columns), the eigenvectors on cells as
/// coarse as the calibration's resolution allows.
pub fn espirit_from_data<B: NufftBackend>(
    g: &recon_gridding::Gridding<'_, B>,
    grid: &recon_core::Grid,
    data: &[C64],
    kc: f64,
) -> recon_core::Result<Vec<Vec<C64>>> {
    let n = grid.n;
    let r = n.map(|n| {
        if n == 1 {
            1
        } else {
            ((2.0 * kc).round() as usize).clamp(4, n) & !1
        }
    });
    let calib = data
        .chunks_exact(g.samples().max(1))
        .map(|d| {
            let image = g.image(d, None)?;
            Ok(
                recon_coils::calibration(std::slice::from_ref(&image), n, r)?
                    .pop()
                    .expect("one image"),
            )
        })
        .collect::<recon_core::Result<Vec<_>>>()?;
    let p = recon_coils::EspiritParams {
        kernel: if grid.is_2d() { 6 } else { 5 },
        cell: recon_coils::cell_for(n, kc),
        ..Default::default()
    };
    let maps = recon_coils::espirit_maps(&calib, r, n, &p)?;
    // No eigenvector kept anywhere: the calibration region is too small for
    // the kernel (a thin grid) or holds no signal. Say which, not SENSE's
    // later "largest sum of |S_c|^2 is 0".
    let nothing = (0..grid.len()).all(|i| maps.iter().all(|m| m[i].norm_sqr() == 0.0));
    if nothing {
        return Err(recon_core::Error::Invalid {
            what: "ESPIRiT coil maps (sense.maps = \"espirit\")",
            reason: format!(
                "no voxel kept a map: the calibration region of {r:?} k-space samples (a radius of \
                 {kc} cycles/FOV: sense.calibration, at most a quarter of the smallest matrix size \
                 of {n:?}) is too small for ESPIRiT's kernel of {} or holds no signal; on a thin \
                 grid use sense.maps = \"estimate\"",
                p.kernel
            ),
        });
    }
    Ok(maps)
}

/// Whether the run's ADMM preconditions its x-updates.
fn preconditioned(l: &Loaded) -> bool {
    l.cfg.algorithm() == crate::config::Algorithm::Admm && l.cfg.solver.precondition
}
