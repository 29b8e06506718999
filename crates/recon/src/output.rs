//! The files of a run: `recon.h5` and `report.json`, written atomically.

use crate::config::Loaded;
use crate::pipeline::{Inputs, Outputs, Quality};
use anyhow::{Context as _, Result};
use recon_core::Complex;
use recon_io::hdf5;
use recon_io::Context;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// `report.json`.
#[derive(Debug, Serialize)]
pub struct Report {
    pub config: String,
    /// The phantom's name, or the scan file.
    pub data: String,
    /// The trajectory's parameters (synthetic data only).
    pub trajectory: Option<recon_synth::Trajectory>,
    /// Whether a true image was available for PSNR.
    pub truth: bool,
    /// Receive coils (virtual ones after compression); with more than one,
    /// SENSE with maps from `maps`.
    pub coils: usize,
    pub maps: Option<crate::config::MapsSource>,
    /// Whether the coils' noise was whitened ...
    pub prewhitened: bool,
    /// ... and the coils compressed: from how many, keeping what fraction
    /// of the data's energy.
    pub compressed_from: Option<usize>,
    pub energy_kept: Option<f64>,
    pub device: String,
    /// GPUs that shared the coils' terms (1 unless several coils on a grid
    /// of 64^3 voxels or more, on a host with several GPUs).
    pub coil_devices: usize,
    /// How Q and F^H D were computed, e.g. "nufft (tolerance 1e-6, ...)".
    pub engine: String,
    pub precision: String,
    pub matrix: [usize; 3],
    pub fov_mm: [f64; 3],
    /// The image model's voxel basis: "box-sinc" or "delta".
    pub basis: String,
    pub samples: usize,
    pub noise_sigma: f64,
    /// The prior: "quadratic", "tv" or "dtv"; and the algorithm.
    pub prior_kind: crate::config::PriorKind,
    pub algorithm: crate::config::Algorithm,
    /// Relative (to the peak of Q for the quadratic prior, of |F^H D| for
    /// the sparse ones) and absolute.
    pub lambda: f64,
    pub lambda_abs: f64,
    /// The quadratic prior's W: "uniform" or "anatomical".
    pub regulariser: crate::config::RegulariserKind,
    /// What the anatomical prior found (anatomical W only).
    pub prior: Option<recon_prior::Info>,
    /// PSNR and errors: null when there is no truth.
    pub psnr_db: Option<f64>,
    pub percent_error: Option<f64>,
    pub gridding_psnr_db: Option<f64>,
    pub gridding_percent_error: Option<f64>,
    pub iterations: usize,
    pub relative_residual: f64,
    pub residuals: Vec<f64>,
    pub q_cache: String,
    pub q_cache_file: Option<PathBuf>,
    pub seconds: BTreeMap<String, f64>,
}

pub fn report(
    l: &Loaded,
    inputs: &Inputs,
    out: &Outputs,
    iterative: Option<&Quality>,
    gridding: Option<&Quality>,
    total_s: f64,
) -> Report {
    let mut seconds: BTreeMap<String, f64> = out
        .seconds
        .iter()
        .map(|(k, v)| (k.to_string(), *v))
        .collect();
    seconds.insert("total".into(), total_s);
    Report {
        config: l.path.display().to_string(),
        data: l.data_name(),
        trajectory: l.cfg.trajectory.clone(),
        truth: inputs.truth.is_some(),
        coils: inputs.coils,
        maps: (inputs.coils > 1 || inputs.true_maps.is_some()).then_some(l.cfg.sense.maps),
        prewhitened: inputs.whitened,
        compressed_from: inputs.compressed.map(|c| c.0),
        energy_kept: inputs.compressed.map(|c| c.1),
        device: out.device.clone(),
        coil_devices: out.coil_devices,
        engine: l.cfg.engine.engine().describe(),
        precision: format!("{:?}", l.cfg.engine.precision).to_lowercase(),
        matrix: l.grid.n,
        fov_mm: l.grid.fov_mm,
        basis: l.grid.basis.id().to_string(),
        samples: inputs.traj.len(),
        noise_sigma: inputs.noise_sigma,
        prior_kind: l.cfg.prior.kind,
        algorithm: l.cfg.algorithm(),
        lambda: l.cfg.lambda(),
        lambda_abs: out.lambda_abs,
        regulariser: l.cfg.regulariser.kind,
        prior: out.prior.clone(),
        psnr_db: iterative.map(|q| q.psnr_db),
        percent_error: iterative.map(|q| q.percent_error),
        gridding_psnr_db: gridding.map(|q| q.psnr_db),
        gridding_percent_error: gridding.map(|q| q.percent_error),
        iterations: out.info.iterations,
        relative_residual: out.info.relative_residual,
        residuals: out.info.residuals.clone(),
        q_cache: out.q_cache.word().to_string(),
        q_cache_file: out.q_file.clone(),
        seconds,
    }
}

fn to_c32(v: &[Complex<f64>]) -> Vec<Complex<f32>> {
    v.iter()
        .map(|c| Complex::new(c.re as f32, c.im as f32))
        .collect()
}

/// Writes `recon.h5` (layout in the README) to `path`.
fn write_h5(
    path: &Path,
    l: &Loaded,
    inputs: &Inputs,
    out: &Outputs,
) -> Result<(), recon_io::IoError> {
    let n = l.grid.n;
    let shape = [n[2], n[1], n[0]];
    let file = hdf5::File::create(path).at(path, "create")?;
    recon_io::write_dataset(path, &file, "recon", &shape, &to_c32(&out.recon), false)?;
    recon_io::write_dataset(
        path,
        &file,
        "gridding",
        &shape,
        &to_c32(&out.gridding),
        false,
    )?;
    recon_io::write_dataset(path, &file, "fhd", &shape, &to_c32(&out.fhd), false)?;
    let f32s = |v: &[f64]| -> Vec<f32> { v.iter().map(|x| *x as f32).collect() };
    if let Some(t) = &inputs.truth {
        recon_io::write_dataset(path, &file, "truth", &shape, &f32s(t), false)?;
    }
    if let Some(a) = &inputs.anatomy_on_grid {
        // The reference as the prior saw it: averaged onto the grid.
        recon_io::write_dataset(path, &file, "anatomy", &shape, &f32s(a), false)?;
    }
    if let Some(maps) = &out.maps {
        // The maps SENSE used, [C, Nz, Ny, Nx], to inspect and to reuse.
        let all: Vec<Complex<f64>> = maps.concat();
        recon_io::write_dataset(
            path,
            &file,
            "coil_maps",
            &[maps.len(), n[2], n[1], n[0]],
            &to_c32(&all),
            false,
        )?;
    }
    // W as a weighted stencil (recon_core::Stencil): edge weights
    // [3 (x, y, z), Nz, Ny, Nx] and, with a support term, the diagonal.
    let s = &out.stencil;
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
            recon_io::write_dataset(path, &g, "diagonal", &shape, &f32s(d), false)?;
        }
    }
    if let Some(q) = &out.q {
        let d = l.grid.doubled();
        recon_io::write_dataset(path, &file, "q", &[d[2], d[1], d[0]], &to_c32(q), false)?;
    }
    recon_io::set_attr(path, &file, "fov_mm", &l.grid.fov_mm)?;
    recon_io::set_attr(path, &file, "matrix", &n.map(|v| v as u64))?;
    recon_io::set_attr(path, &file, "voxel_mm", &l.grid.voxel_mm())?;
    recon_io::set_str_attr(path, &file, "axes", "z, y, x (x fastest)")?;
    file.close().at(path, "close")
}

/// Writes magnitudes as NIfTI-1 (`.nii`): float32, one volume, or several
/// (a 4-D file, one volume per frame, `values` frame after frame), voxel
/// size in mm, and the same voxel-to-scanner transform in qform and sform:
/// image axes x, y, z along scanner +x, +y, +z (RAS), voxel centres
/// `(i - N/2) * voxel` (0 along a 2-D grid's z).
fn write_nifti(
    path: &Path,
    grid: &recon_core::Grid,
    values: &[f32],
    what: &str,
) -> Result<(), recon_io::IoError> {
    let n = grid.n;
    let v = grid.voxel_mm().map(|x| x as f32);
    // A 2-D grid's one plane is centred on z = 0.
    let origin = [0, 1, 2].map(|d| {
        if n[d] == 1 {
            0.0
        } else {
            -(n[d] as f32 / 2.0) * v[d]
        }
    });
    let header = nifti::NiftiHeader {
        pixdim: [1.0, v[0], v[1], v[2], 1.0, 1.0, 1.0, 1.0],
        xyzt_units: 2, // NIFTI_UNITS_MM
        qform_code: 1, // scanner anatomical
        sform_code: 1,
        quatern_b: 0.0,
        quatern_c: 0.0,
        quatern_d: 0.0,
        quatern_x: origin[0],
        quatern_y: origin[1],
        quatern_z: origin[2],
        srow_x: [v[0], 0.0, 0.0, origin[0]],
        srow_y: [0.0, v[1], 0.0, origin[1]],
        srow_z: [0.0, 0.0, v[2], origin[2]],
        descrip: format!("recon: {what}").into_bytes(),
        ..nifti::NiftiHeader::default()
    };
    // Our arrays are [frames, Nz, Ny, Nx], x fastest; the writer takes
    // [x, y, z(, frame)].
    let frames = values.len() / grid.len();
    let options = nifti::writer::WriterOptions::new(path).reference_header(&header);
    let written = if frames == 1 {
        let image = ndarray::ArrayView3::from_shape((n[2], n[1], n[0]), values)
            .expect("one value per voxel")
            .reversed_axes();
        options.write_nifti(&image)
    } else {
        let image = ndarray::ArrayView4::from_shape((frames, n[2], n[1], n[0]), values)
            .expect("one value per voxel and frame")
            .reversed_axes();
        options.write_nifti(&image)
    };
    written.map_err(|e| recon_io::IoError::Encode {
        path: path.display().to_string(),
        format: "NIfTI",
        message: e.to_string(),
    })
}

fn magnitude(v: &[Complex<f64>]) -> Vec<f32> {
    v.iter().map(|c| c.norm() as f32).collect()
}

/// Writes every output into the staged folder and swaps it in whole, so an
/// error or an interrupt leaves either the earlier outputs or the new ones,
/// never a mix and never a half-written file. Returns the files' names.
pub fn write(
    mut dir: recon_io::OutputDir,
    l: &Loaded,
    inputs: &Inputs,
    out: &Outputs,
    report: &Report,
) -> Result<Vec<String>> {
    let json = serde_json::to_string_pretty(report)? + "\n";
    dir.stage("recon.h5", |tmp| write_h5(tmp, l, inputs, out))
        .context("writing recon.h5")?;
    let mut images = vec![
        (
            "recon.nii",
            magnitude(&out.recon),
            "|iterative reconstruction|",
        ),
        ("gridding.nii", magnitude(&out.gridding), "|gridding|"),
    ];
    if let Some(t) = &inputs.truth {
        images.push((
            "truth.nii",
            t.iter().map(|v| *v as f32).collect(),
            "true image",
        ));
    }
    if let (true, Some(maps)) = (l.cfg.output.maps_nifti, &out.maps) {
        images.push(("maps.nii", magnitude(&maps.concat()), "|coil maps|"));
    }
    for (name, values, what) in images {
        dir.stage(name, |tmp| write_nifti(tmp, &l.grid, &values, what))
            .with_context(|| format!("writing {name}"))?;
    }
    dir.stage("montage.png", |tmp| {
        crate::pictures::montage(
            tmp,
            &l.grid,
            inputs.truth.as_deref(),
            &out.recon,
            &out.gridding,
        )
    })
    .context("writing montage.png")?;
    dir.stage("residual.png", |tmp| {
        crate::pictures::residual_plot(tmp, &out.info.residuals)
    })
    .context("writing residual.png")?;
    dir.stage("report.json", |tmp| write_text(tmp, &json))
        .context("writing report.json")?;
    pause_before_commit();
    dir.commit().context("moving the outputs into place")
}

/// Writes a text file.
pub fn write_text(path: &Path, text: &str) -> Result<(), recon_io::IoError> {
    std::fs::write(path, text.as_bytes()).map_err(|source| recon_io::IoError::Io {
        path: path.display().to_string(),
        op: "write",
        source,
    })
}

/// For the interrupt tests: a window in which every output is staged.
pub fn pause_before_commit() {
    if let Some(ms) = std::env::var_os("RECON_PAUSE_BEFORE_COMMIT_MS") {
        let ms: u64 = ms.to_string_lossy().parse().unwrap_or(0);
        eprintln!("outputs staged; committing in {ms} ms");
        std::thread::sleep(std::time::Duration::from_millis(ms));
    }
}
