//! The files of a run, written atomically: `recon.h5`, the NIfTI images
//! (their writer in `output/nifti.rs`), BART's cfl, the pictures and
//! `report.json` (made in report.rs). What a run of one image wrote while
//! it computed (`early.rs`) is finished here, not written again.

use crate::arrange::Arrangement;
use crate::config::Loaded;
use crate::pipeline::Image;
use crate::report::Report;
use anyhow::{Context as _, Result};
use rayon::prelude::*;
use recon_core::Complex;
use recon_io::hdf5;
use recon_io::Context;
use std::path::Path;

mod nifti;

pub(crate) use nifti::{description, nifti_name, write_nifti, Voxels};

fn to_c32(v: &[Complex<f64>]) -> Vec<Complex<f32>> {
    v.par_iter().map(c32).collect()
}

/// A complex value as `recon.h5` and `recon.cfl` store it.
pub(crate) fn c32(c: &Complex<f64>) -> Complex<f32> {
    Complex::new(c.re as f32, c.im as f32)
}

/// A complex value as a complex NIfTI image stores it (`output.complex`).
pub(crate) fn pair(c: &Complex<f64>) -> [f32; 2] {
    [c.re as f32, c.im as f32]
}

/// A complex value as a NIfTI image of magnitudes stores it.
pub(crate) fn magnitude(c: &Complex<f64>) -> f32 {
    c.norm() as f32
}

/// `f` of the images' values of `pick`, image after image, converted in
/// parallel straight into the one array (no copy of the values first).
fn convert<T: Sync, U: Send>(
    images: &[Image],
    pick: impl Fn(&Image) -> &[T],
    f: impl Fn(&T) -> U + Sync + Send,
) -> Vec<U> {
    let mut out = Vec::with_capacity(images.iter().map(|i| pick(i).len()).sum());
    for i in images {
        out.par_extend(pick(i).par_iter().map(&f));
    }
    out
}

fn recon_of(i: &Image) -> &[Complex<f64>] {
    &i.out.recon
}

fn gridding_of(i: &Image) -> &[Complex<f64>] {
    &i.out.gridding
}

fn fhd_of(i: &Image) -> &[Complex<f64>] {
    &i.out.fhd
}

fn truth_of(i: &Image) -> &[f64] {
    i.inputs
        .truth
        .as_deref()
        .expect("checked: every image has its truth")
}

/// The shape of an image dataset of `recon.h5`: `[series..., Nz, Ny, Nx]`.
pub(crate) fn image_shape(l: &Loaded, arrangement: &Arrangement) -> Vec<usize> {
    let n = l.grid.n;
    let mut shape = arrangement.shape();
    shape.extend([n[2], n[1], n[0]]);
    shape
}

/// `recon.h5` begun while the run computed ([`crate::early`]): the open
/// file and the datasets written into it.
pub(crate) type Begun = (hdf5::File, Vec<&'static str>);

/// Writes `recon.h5` (layout in the README) to `path`: each image array
/// `[series..., Nz, Ny, Nx]`, the series' axes (none for one image)
/// outermost, each with a dataset `/series/<axis>` of its counter's values.
/// A file `begun` while the run computed is finished: its datasets are
/// not written again.
fn write_h5(
    path: &Path,
    l: &Loaded,
    images: &[Image],
    arrangement: &Arrangement,
    provenance: &str,
    begun: Option<Begun>,
) -> Result<(), recon_io::IoError> {
    let n = l.grid.n;
    let series = arrangement.shape();
    let with = |inner: &[usize]| -> Vec<usize> { series.iter().chain(inner).copied().collect() };
    let shape = image_shape(l, arrangement);
    let first = &images[0];
    let (file, done) = match begun {
        Some(b) => b,
        None => (hdf5::File::create(path).at(path, "create")?, Vec::new()),
    };
    let to_write = |name: &str| !done.contains(&name);
    let complex = |name: &str, pick: fn(&Image) -> &[Complex<f64>]| {
        if !to_write(name) {
            return Ok(());
        }
        let all = convert(images, pick, c32);
        recon_io::write_dataset(path, &file, name, &shape, &all, false).map(|_| ())
    };
    complex("recon", recon_of)?;
    complex("gridding", gridding_of)?;
    complex("fhd", fhd_of)?;
    let f32s = |v: &[f64]| -> Vec<f32> { v.par_iter().map(|x| *x as f32).collect() };
    if images.iter().all(|i| i.inputs.truth.is_some()) && to_write("truth") {
        let all = convert(images, truth_of, |x| *x as f32);
        recon_io::write_dataset(path, &file, "truth", &shape, &all, false)?;
    }
    if let Some(a) = &first.inputs.anatomy_on_grid {
        // The reference as the prior saw it: averaged onto the grid.
        let one = [n[2], n[1], n[0]];
        recon_io::write_dataset(path, &file, "anatomy", &one, &f32s(a), false)?;
    }
    if let Some(maps) = &first.out.maps {
        // The maps SENSE used, [series..., C, Nz, Ny, Nx], to inspect and to reuse.
        if images.iter().all(|i| i.out.maps.is_some()) {
            let all: Vec<Complex<f64>> = images
                .iter()
                .flat_map(|i| i.out.maps.as_ref().expect("checked").concat())
                .collect();
            let shape = with(&[maps.len(), n[2], n[1], n[0]]);
            recon_io::write_dataset(path, &file, "coil_maps", &shape, &to_c32(&all), false)?;
        }
    }
    // W as a weighted stencil (recon_core::Stencil), the first image's:
    // edge weights [3 (x, y, z), Nz, Ny, Nx] and, with a support term, the
    // diagonal.
    let s = &first.out.stencil;
    let one = [n[2], n[1], n[0]];
    if s.w.is_some() || s.diag.is_some() {
        let g = file
            .create_group("regulariser")
            .at(path, "create /regulariser")?;
        if let Some(w) = &s.w {
            let all: Vec<f32> = w.iter().flat_map(|v| f32s(v)).collect();
            recon_io::write_dataset(
                path,
                &g,
                "edge_weights",
                &[3, n[2], n[1], n[0]],
                &all,
                false,
            )?;
        }
        if let Some(d) = &s.diag {
            recon_io::write_dataset(path, &g, "diagonal", &one, &f32s(d), false)?;
        }
    }
    if let Some(q) = &first.out.q {
        let d = l.grid.doubled();
        recon_io::write_dataset(path, &file, "q", &[d[2], d[1], d[0]], &to_c32(q), false)?;
    }
    let mut axes: Vec<&str> = arrangement.axes.iter().map(|(_, name, _)| *name).collect();
    if !axes.is_empty() {
        let g = file.create_group("series").at(path, "create /series")?;
        for (_, name, values) in &arrangement.axes {
            let v: Vec<i64> = values.iter().map(|v| *v as i64).collect();
            recon_io::write_dataset(path, &g, name, &[v.len()], &v, false)?;
        }
    }
    axes.extend(["z", "y", "x (x fastest)"]);
    recon_io::set_attr(path, &file, "fov_mm", &l.grid.fov_mm)?;
    recon_io::set_attr(path, &file, "matrix", &n.map(|v| v as u64))?;
    recon_io::set_attr(path, &file, "voxel_mm", &l.grid.voxel_mm())?;
    recon_io::set_str_attr(path, &file, "axes", &axes.join(", "))?;
    recon_io::set_str_attr(path, &file, "provenance", provenance)?;
    file.close().at(path, "close")
}

/// Writes every output into the staged folder, side by side, for
/// [`commit`] to swap in whole, so an error or an interrupt leaves either
/// the earlier outputs or the new ones, never a mix and never a
/// half-written file. What was written while the run computed (`early`)
/// is finished, not written again. The report is made by `report`
/// meanwhile (its figures are sums over the images, which the files'
/// writing leaves cores and memory bandwidth for) and written last, with
/// the outputs' seconds. Returns the report.
pub fn write(
    dir: &recon_io::OutputDir,
    l: &Loaded,
    images: &[Image],
    arrangement: &Arrangement,
    provenance: &str,
    early: crate::early::Pending<'_>,
    report: impl FnOnce() -> Report + Send,
) -> Result<Report> {
    let start = std::time::Instant::now();
    // What the run wrote while it computed: `recon.h5` is finished once
    // its writer is done (the other files are written meanwhile).
    let sent = early.sent.clone();
    let early = std::sync::Mutex::new(early);
    let written = std::sync::Mutex::new(None);
    let geometries: Vec<_> = images.iter().map(|i| i.geometry).collect();
    let nii = |values: Vec<f32>, frames: usize| {
        Voxels::Real(crate::arrange::nifti(
            &l.grid,
            arrangement,
            &geometries,
            values,
            frames,
        ))
    };
    // output.complex: the images as complex values, else magnitudes.
    let image = |pick: fn(&Image) -> &[Complex<f64>]| match l.cfg.output.complex {
        true => Voxels::Complex(crate::arrange::nifti(
            &l.grid,
            arrangement,
            &geometries,
            convert(images, pick, pair),
            1,
        )),
        false => nii(convert(images, pick, magnitude), 1),
    };
    // Each output: its name, and what writes it (its values made there).
    let mut outputs: Vec<recon_io::Staging<anyhow::Error>> = Vec::new();
    outputs.push((
        "recon.h5".into(),
        Box::new(|tmp| {
            let w = early.lock().unwrap_or_else(|e| e.into_inner()).wait();
            let mut done = written.lock().unwrap_or_else(|e| e.into_inner());
            *done = Some((w.files, w.h5_seconds));
            if let Some(e) = w.error {
                return Err(e);
            }
            write_h5(tmp, l, images, arrangement, provenance, w.h5).context("writing recon.h5")
        }),
    ));
    // output.compress: gzip, as .nii.gz
    let gz = l.cfg.output.compress;
    // The NIfTI images: stem, and what makes their voxels.
    type MakeVoxels<'a> = Box<dyn Fn() -> Voxels + Send + Sync + 'a>;
    let mut niftis: Vec<(&str, MakeVoxels)> = vec![
        ("recon", Box::new(|| image(recon_of))),
        ("gridding", Box::new(|| image(gridding_of))),
    ];
    if images.iter().all(|i| i.inputs.truth.is_some()) {
        niftis.push((
            "truth",
            Box::new(|| nii(convert(images, truth_of, |v| *v as f32), 1)),
        ));
    }
    let maps_everywhere = images.iter().all(|i| i.out.maps.is_some());
    if let (true, true, Some(maps)) = (
        l.cfg.output.maps_nifti,
        maps_everywhere,
        &images[0].out.maps,
    ) {
        let coils = maps.len();
        niftis.push((
            "maps",
            Box::new(move || {
                let all: Vec<f32> = images
                    .iter()
                    .flat_map(|i| i.out.maps.as_ref().expect("checked").iter())
                    .flat_map(|m| m.par_iter().map(magnitude).collect::<Vec<_>>())
                    .collect();
                nii(all, coils)
            }),
        ));
    }
    for (stem, voxels) in niftis {
        if sent.contains(&stem) {
            continue;
        }
        let name = nifti_name(l, stem);
        let (what, context) = (description(l, stem), format!("writing {name}"));
        outputs.push((
            name,
            Box::new(move |tmp| write_nifti(tmp, &voxels(), what, gz).context(context.clone())),
        ));
    }
    if l.cfg.output.cfl {
        // BART's order is x fastest, as recon's; images along dimension 13.
        let n = l.grid.n;
        let mut dims = vec![n[0], n[1], n[2]];
        if images.len() > 1 {
            dims.resize(13, 1);
            dims.push(images.len());
        }
        outputs.push((
            "recon.cfl".into(),
            Box::new(|tmp| {
                let values = convert(images, recon_of, c32);
                recon_io::write_bytes(tmp, &recon_import::cfl::bytes(&values))
                    .context("writing recon.cfl")
            }),
        ));
        outputs.push((
            "recon.hdr".into(),
            Box::new(move |tmp| {
                write_text(tmp, &recon_import::cfl::header(&dims)).context("writing recon.hdr")
            }),
        ));
    }
    let first = &images[0];
    outputs.push((
        "montage.png".into(),
        Box::new(|tmp| {
            crate::pictures::montage(
                tmp,
                &l.grid,
                first.geometry.as_ref(),
                first.inputs.truth.as_deref(),
                &first.out.recon,
                &first.out.gridding,
            )
            .context("writing montage.png")
        }),
    ));
    outputs.push((
        "residual.png".into(),
        Box::new(|tmp| {
            crate::pictures::residual_plot(tmp, &first.out.info.residuals)
                .context("writing residual.png")
        }),
    ));
    let names: Vec<String> = outputs.iter().map(|(name, _)| name.clone()).collect();
    let (seconds, report) = std::thread::scope(|s| {
        let report = s.spawn(report);
        let seconds = dir.stage_all(outputs);
        let report = report
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        (seconds, report)
    });
    let (seconds, mut report) = (seconds?, report);
    // report.json last, with the outputs' seconds and the run's total.
    report
        .seconds
        .insert("outputs".into(), start.elapsed().as_secs_f64());
    let (early_files, h5_seconds) = written
        .into_inner()
        .unwrap_or_else(|e| e.into_inner())
        .unwrap_or_default();
    report.output_seconds = names.into_iter().zip(seconds).chain(early_files).collect();
    if let Some(h5) = report.output_seconds.get_mut("recon.h5") {
        // with its datasets written while the run computed
        *h5 += h5_seconds;
    }
    crate::report::close_seconds(&mut report.seconds);
    let json = serde_json::to_string_pretty(&report)? + "\n";
    dir.stage("report.json", |tmp| write_text(tmp, &json))
        .context("writing report.json")?;
    Ok(report)
}

/// Moves the staged outputs into place ([`recon_io::OutputDir::commit`]);
/// returns the files' names.
pub fn commit(dir: recon_io::OutputDir) -> Result<Vec<String>> {
    pause_before_commit();
    dir.commit().context("moving the outputs into place")
}

/// Writes a text file.
pub fn write_text(path: &Path, text: &str) -> Result<(), recon_io::IoError> {
    recon_io::write_bytes(path, text.as_bytes())
}

/// For the interrupt tests: a window in which every output is staged.
pub fn pause_before_commit() {
    if let Some(ms) = std::env::var_os("RECON_PAUSE_BEFORE_COMMIT_MS") {
        let ms: u64 = ms.to_string_lossy().parse().unwrap_or(0);
        eprintln!("outputs staged; committing in {ms} ms");
        std::thread::sleep(std::time::Duration::from_millis(ms));
    }
}
