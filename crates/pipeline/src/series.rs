//! A scan of several images (an ISMRMRD file's slices, contrasts, phases,
//! repetitions and sets), reconstructed one after the other in one run.
//!
//! Images whose trajectory is the image before's share its problem: the
//! plan, Q and FFT(Q) are built once, and only F^H D (and a reference's
//! prior) changes, as in a stack's slices. With several coils they share
//! the coil maps too, when they are of the same slice (a slice elsewhere
//! sees other sensitivities) and the coils are not compressed (compression
//! makes each image's virtual coils its own). Anything else builds afresh;
//! Q then still comes from the cache when it is on. Consecutive 2-D images
//! of one trajectory with one coil and the uniform quadratic prior are
//! solved together as one batch ([`crate::batch`]), as `solver.stack`
//! says.

use crate::config::{Loaded, Source};
use crate::run::{finish, AtEnd, Baseline, Part, Ready};
use crate::{from_f64, inputs, stage_fhd, trajectory, Built, Context, Inputs, Outputs, Result, Ui};
use recon_core::Complex;
use recon_encoding::NufftBackend;
use recon_io::geometry::{Geometry, Index};
use recon_q::Stored;
use std::time::Instant;

/// One image of a run: its index, where it lies, its inputs and outputs.
pub struct Image {
    pub index: Index,
    /// `None`: the isocentre, along the scanner's axes.
    pub geometry: Option<Geometry>,
    pub inputs: Inputs,
    pub out: Outputs,
    /// Whether it reused the image before's plan and Q (and maps).
    pub shared: bool,
    /// The images solved together in its batch (1: alone).
    pub batch: usize,
}

/// The images of `l`'s scan, each as a config of its own whose scan holds
/// that image's samples only (synthetic data: one image).
pub fn split(l: Loaded) -> Vec<(Index, Loaded)> {
    let Loaded {
        path,
        cfg,
        grid,
        source,
        reference,
        warnings,
    } = l;
    let scans = match source {
        Source::Scan(s) => s.split(),
        synthetic => {
            return vec![(
                Index::default(),
                Loaded {
                    path,
                    cfg,
                    grid,
                    source: synthetic,
                    reference,
                    warnings,
                },
            )]
        }
    };
    scans
        .into_iter()
        .map(|(index, s)| {
            let one = Loaded {
                path: path.clone(),
                cfg: cfg.clone(),
                grid,
                source: Source::Scan(s),
                reference: reference.clone(),
                warnings: warnings.clone(),
            };
            (index, one)
        })
        .collect()
}

/// Where an image of `l` lies, from its scan (`None`: synthetic data, at
/// the isocentre along the scanner's axes).
pub fn geometry(l: &Loaded) -> Option<Geometry> {
    match &l.source {
        Source::Scan(s) => s.geometry,
        Source::Synthetic { .. } => None,
    }
}

/// Reconstructs each of `images` (from [`split`]) on `backend`, in order;
/// `ui` is told which image is under way. The outputs and the truth are
/// in the data's own units ([`Inputs::unscale`]).
pub fn reconstruct_series<B>(
    backend: &B,
    images: &[(Index, Loaded)],
    ui: &impl Ui,
) -> Result<Vec<Image>>
where
    B: NufftBackend,
    B::Real: Stored,
{
    reconstruct_series_from(backend, images, None, &AtEnd, ui)
}

/// The first image's inputs and their seconds, made before its backend is
/// ([`reconstruct_series_from`]): made while the GPU opens.
pub fn read_first(images: &[(Index, Loaded)], ui: &impl Ui) -> Result<(Inputs, f64)> {
    read_image(images, 0, ui)
}

/// [`reconstruct_series`], the first image's inputs already made
/// ([`read_first`]) when `first` is given, and each image's outputs that
/// are final before its solve ends given to `early` as they are (an image
/// solved in a batch gives none: its outputs come with the batch's).
pub fn reconstruct_series_from<B>(
    backend: &B,
    images: &[(Index, Loaded)],
    first: Option<(Inputs, f64)>,
    early: &dyn Ready,
    ui: &impl Ui,
) -> Result<Vec<Image>>
where
    B: NufftBackend,
    B::Real: Stored,
{
    let count = images.len();
    let mut done: Vec<Image> = Vec::with_capacity(count);
    // The problem of the image before, with what the images sharing it reuse.
    let mut last: Option<Shared<'_, B>> = None;
    // An image's inputs, read ahead: the first one's made before the
    // backend, or one read while looking for a batch it did not join.
    let mut pending: Option<(Inputs, f64)> = first;
    for (j, (index, l)) in images.iter().enumerate() {
        if done.len() > j {
            continue; // solved in a batch
        }
        let (inputs, read) = match pending.take() {
            Some(p) => p,
            None => read_image(images, j, ui)?,
        };
        // Consecutive 2-D images that can join this one in a batch.
        let mut batch = vec![(inputs, read)];
        if l.grid.is_2d() && crate::batch::wanted(l, &batch[0].0)? {
            for k in j + 1..count {
                let next = read_image(images, k, ui)?;
                if next.0.traj == batch[0].0.traj && crate::batch::wanted(&images[k].1, &next.0)? {
                    batch.push(next);
                } else {
                    pending = Some(next);
                    break;
                }
            }
        }
        if batch.len() > 1 {
            last = None;
            done.extend(solve_batch(
                backend,
                &images[j..j + batch.len()],
                batch,
                ui,
            )?);
            continue;
        }
        let (inputs, read) = batch.pop().expect("one image");
        if let Some(truth) = &inputs.truth {
            early.ready(j, Part::Truth(truth), inputs.back());
        }
        // A stack solves slice by slice, building its own 2-D problems.
        let stack = crate::stack::choose(l, &inputs, ui)?;
        let shares = match (&last, done.last()) {
            (Some(_), Some(b)) => {
                stack.is_none()
                    && b.inputs.traj == inputs.traj
                    && inputs.compressed.is_none()
                    && (inputs.coils == 1 || b.index.slice() == index.slice())
            }
            _ => false,
        };
        let mut out = if shares {
            let shared = last.as_mut().expect("checked");
            let t = Instant::now();
            let fhd = shared.rhs(backend, &inputs, ui)?;
            let built = &mut shared.built;
            built.set_image(backend, l, &inputs, fhd)?;
            let seconds = vec![("fhd", t.elapsed().as_secs_f64())];
            finish(
                backend,
                l,
                &inputs,
                built,
                shared.gridder.as_ref().map_or(Baseline::Here, Baseline::By),
                seconds,
                (early, j),
                ui,
            )?
        } else if let Some((stack, batch)) = &stack {
            last = None;
            crate::stack::reconstruct(backend, l, &inputs, stack, *batch, ui)?
        } else {
            // Without coil maps to estimate, the baseline needs nothing of
            // the problem: it is gridded first, and written (`early`)
            // while the problem is built and solved.
            let (gridder, baseline) = if crate::coils::maps_on_gridder(&inputs) {
                (None, Baseline::Here)
            } else {
                let t = Instant::now();
                let g = crate::gridder(backend, l, &inputs)?;
                let gridding = ui.stage("gridding", |_| {
                    g.image(&inputs.data, None).context("gridding")
                })?;
                early.ready(j, Part::Gridding(&gridding), inputs.back());
                let made = t.elapsed().as_secs_f64();
                // Kept (on the device) for the images that may share it.
                (
                    Some(g).filter(|_| count > 1),
                    Baseline::Made(gridding, made),
                )
            };
            let mut built = crate::build(backend, l, &inputs, ui)?;
            let seconds = std::mem::take(&mut built.seconds);
            let out = finish(
                backend,
                l,
                &inputs,
                &mut built,
                baseline,
                seconds,
                (early, j),
                ui,
            )?;
            last = Some(Shared {
                built,
                gridder,
                maps: None,
            });
            out
        };
        out.seconds.insert(0, (read_stage(l), read));
        done.push(image(*index, l, inputs, out, shares, 1));
    }
    Ok(done)
}

/// What making an image's inputs is called in its seconds: "synthesis" of
/// synthetic data, "read" of a scan's (with its coils prepared).
fn read_stage(l: &Loaded) -> &'static str {
    match l.source {
        Source::Scan(_) => "read",
        Source::Synthetic { .. } => "synthesis",
    }
}

/// An image's record, its outputs and truth back in the data's own units
/// ([`Inputs::unscale`]).
fn image(
    index: Index,
    l: &Loaded,
    mut inputs: Inputs,
    mut out: Outputs,
    shared: bool,
    batch: usize,
) -> Image {
    inputs.unscale(&mut out);
    Image {
        index,
        geometry: geometry(l),
        inputs,
        out,
        shared,
        batch,
    }
}

/// Image `j`'s inputs, and the seconds they took; `ui` is told which image
/// is under way.
fn read_image(images: &[(Index, Loaded)], j: usize, ui: &impl Ui) -> Result<(Inputs, f64)> {
    let (index, l) = &images[j];
    if images.len() > 1 {
        ui.log(&format!(
            "image {} of {}: {}",
            j + 1,
            images.len(),
            index.describe()
        ));
    }
    let t = Instant::now();
    let inputs = inputs(l, trajectory(l)?, ui)?;
    Ok((inputs, t.elapsed().as_secs_f64()))
}

/// Solves `images` (2-D, one trajectory, with their inputs and reading
/// times) as one batch: one plan and Q, one CG, each image's outputs.
fn solve_batch<B>(
    backend: &B,
    images: &[(Index, Loaded)],
    inputs: Vec<(Inputs, f64)>,
    ui: &impl Ui,
) -> Result<Vec<Image>>
where
    B: NufftBackend,
    B::Real: Stored,
{
    let (l, first) = (&images[0].1, &inputs[0].0);
    ui.log(&format!(
        "images {} together as one batch: one plan, Q and CG",
        images
            .iter()
            .map(|(i, _)| i.describe())
            .collect::<Vec<_>>()
            .join(", ")
    ));
    let shared = crate::build::plan_and_q(backend, l, &first.traj, ui)?;
    let data: Vec<&[Complex<f64>]> = inputs.iter().map(|(i, _)| i.data.as_slice()).collect();
    // one scan's images: its noise data hold for every one
    let solved = crate::batch::solve(backend, l, &shared, &data, first.sigma2, ui)?;
    let t = Instant::now();
    let g = crate::gridder(backend, l, first)?;
    let mut made = t.elapsed().as_secs_f64();
    let per = l.grid.len();
    let mut done = Vec::with_capacity(images.len());
    for (i, ((index, l), (inputs, read))) in images.iter().zip(inputs).enumerate() {
        let t = Instant::now();
        let gridding = g.image(&inputs.data, None).context("gridding")?;
        let mut seconds = vec![(read_stage(l), read)];
        if i == 0 {
            // The batch's shared stages go to its first image.
            seconds.extend(shared.seconds.iter().chain(&solved.seconds));
        }
        seconds.push(("gridding", made + t.elapsed().as_secs_f64()));
        made = 0.0;
        let at = i * per..(i + 1) * per;
        let out = Outputs {
            recon: crate::run::to_f64(&solved.x[at.clone()]),
            gridding,
            fhd: crate::run::to_f64(&solved.fhd[at]),
            q: (i == 0 && l.cfg.output.q).then(|| crate::run::to_f64(&shared.q)),
            info: solved.info.clone(),
            q_cache: shared.q_cache.clone(),
            q_file: shared.q_file.clone(),
            lambda_abs: solved.lambda_abs,
            lambda: solved.lambda.clone(),
            passes: vec![solved.info.iterations],
            stencil: recon_core::Stencil::uniform(l.grid.n),
            prior: None,
            seconds,
            device: backend.describe(),
            coil_devices: 1,
            maps: None,
        };
        done.push(image(*index, l, inputs, out, i > 0, images.len()));
    }
    Ok(done)
}

/// A built problem that the next images may share: with its single-coil
/// gridding plan (several coils: the built one) and, once an image needed
/// them, the built maps on the device.
struct Shared<'b, B: NufftBackend> {
    built: Built<'b, B>,
    gridder: Option<recon_gridding::Gridding<'b, B>>,
    maps: Option<Vec<B::Vector>>,
}

impl<B: NufftBackend> Shared<'_, B> {
    /// The right-hand side of another image on the built problem: F^H D,
    /// or `sum_c S_c^H F^H D_c` with the built maps (uploaded once).
    fn rhs(&mut self, backend: &B, inputs: &Inputs, ui: &impl Ui) -> Result<Vec<Complex<B::Real>>> {
        let built = &self.built;
        let Some(maps) = &built.maps else {
            return stage_fhd(&built.plan, &inputs.data, ui);
        };
        if self.maps.is_none() {
            self.maps = Some(
                maps.iter()
                    .map(|m| backend.upload(&from_f64::<B::Real>(m)))
                    .collect::<recon_core::Result<Vec<_>>>()?,
            );
        }
        let on_device = self.maps.as_ref().expect("uploaded");
        let refs: Vec<&B::Vector> = on_device.iter().collect();
        let grid = built.plan.grid();
        let mut sum = backend.zeros(grid.len())?;
        ui.stage("F^H D", |p| {
            built
                .plan
                .adjoint_coils_on_device(&mut sum, &inputs.data, &refs, p)
        })
        .context("computing F^H D")?;
        let mut fhd = vec![Complex::default(); grid.len()];
        backend.download(&mut fhd, &sum)?;
        Ok(fhd)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Silent;

    #[test]
    fn a_first_image_made_ahead_is_the_one_solved() {
        let (_out, mut l) = crate::config::shipped("test-small");
        l.cfg.q.cache = false;
        let images = split(l);
        let cpu = recon_core::CpuBackend::<f64>::new();
        let plain = reconstruct_series(&cpu, &images, &Silent).unwrap();
        // The inputs made ahead, their data doubled: the run must solve
        // these, not make its own again.
        let (mut first, seconds) = read_first(&images, &Silent).unwrap();
        first.data.iter_mut().for_each(|d| *d *= 2.0);
        let ahead = reconstruct_series_from(&cpu, &images, Some((first, seconds)), &AtEnd, &Silent)
            .unwrap();
        let (a, b) = (&ahead[0].out.recon, &plain[0].out.recon);
        let err: f64 = a.iter().zip(b).map(|(x, y)| (x - 2.0 * y).norm_sqr()).sum();
        let norm: f64 = b.iter().map(|y| (2.0 * y).norm_sqr()).sum();
        // The solve is linear in the data (lambda relative to peak Q, which
        // the data leave alone; CG's iterates scale with the right-hand
        // side and its stopping test is relative): twice the data, twice
        // the image, to rounding (f64).
        assert!((err / norm).sqrt() < 1e-9, "nrmse {}", (err / norm).sqrt());
    }
}
