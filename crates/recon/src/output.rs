//! The files of a run: `recon.h5` and `report.json`, written atomically.

use crate::arrange::{Arrangement, Nifti};
use crate::config::Loaded;
use crate::pipeline::{Image, Quality};
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
    /// null when the scan says nothing of its noise.
    pub noise_sigma: Option<f64>,
    /// The prior: "quadratic", "tv" or "dtv"; and the algorithm.
    pub prior_kind: crate::config::PriorKind,
    pub algorithm: crate::config::Algorithm,
    /// Relative (to the peak of Q for the quadratic prior, of |F^H D| for
    /// the sparse ones) and absolute, as the solve used them ...
    pub lambda: f64,
    pub lambda_abs: f64,
    /// ... and how it was chosen: "given", or the discrepancy principle
    /// with its noise level (lambda = "auto") ...
    pub lambda_rule: String,
    /// ... its candidates (relative lambda, misfit over the noise's
    /// energy), and why it missed the target, where it did.
    pub lambda_tried: Vec<(f64, f64)>,
    pub lambda_unmet: Option<String>,
    /// The quadratic prior's W: "uniform" or "anatomical".
    pub regulariser: crate::config::RegulariserKind,
    /// What the anatomical prior found (anatomical W only).
    pub prior: Option<recon_prior::Info>,
    /// PSNR and errors: null when there is no truth.
    pub psnr_db: Option<f64>,
    pub percent_error: Option<f64>,
    pub gridding_psnr_db: Option<f64>,
    pub gridding_percent_error: Option<f64>,
    /// Every solver pass's iterations together, and each pass's (the
    /// anatomical W runs two, CG restarting from 0) ...
    pub iterations: usize,
    pub passes: Vec<usize>,
    /// ... the last pass's relative residual, and every iteration's,
    /// pass after pass.
    pub relative_residual: f64,
    pub residuals: Vec<f64>,
    pub q_cache: String,
    pub q_cache_file: Option<PathBuf>,
    pub seconds: BTreeMap<String, f64>,
    /// A scan of several images: each one's figures (the fields above are
    /// the first image's, `seconds` the whole run's). Absent for one image.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub images: Option<Vec<ImageReport>>,
    pub provenance: Provenance,
}

/// What a study needs to reproduce a run: in `report.json` and as
/// `recon.h5`'s attribute `provenance` (the same JSON).
#[derive(Debug, Serialize)]
pub struct Provenance {
    pub recon_version: &'static str,
    /// The commit recon was built from (`+changes`: with uncommitted
    /// changes to tracked files; "unknown" outside a git checkout).
    pub commit: &'static str,
    pub command_line: Vec<String>,
    /// The input file and its SHA-256 (synthetic data: none).
    pub input: Option<InputFile>,
    pub device: String,
    pub lambda_rule: String,
    /// Every config key as the run resolved it, defaults included.
    pub settings: serde_json::Value,
}

#[derive(Debug, Serialize)]
pub struct InputFile {
    pub path: PathBuf,
    pub bytes: u64,
    pub sha256: String,
}

/// The SHA-256 of a file, read in blocks.
fn sha256(path: &Path) -> std::io::Result<(u64, String)> {
    use sha2::Digest;
    use std::io::Read;
    let mut f = std::fs::File::open(path)?;
    let mut h = sha2::Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut bytes = 0u64;
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        bytes += n as u64;
        h.update(&buf[..n]);
    }
    Ok((bytes, hex::encode(h.finalize())))
}

/// The run's provenance.
pub fn provenance(l: &Loaded, out: &crate::pipeline::Outputs) -> Result<Provenance> {
    let input = match &l.cfg.scan {
        Some(scan) => {
            let (bytes, sha256) =
                sha256(&scan.file).with_context(|| format!("hashing {}", scan.file.display()))?;
            Some(InputFile {
                path: scan.file.clone(),
                bytes,
                sha256,
            })
        }
        None => None,
    };
    Ok(Provenance {
        recon_version: env!("CARGO_PKG_VERSION"),
        commit: env!("RECON_COMMIT"),
        command_line: std::env::args().collect(),
        input,
        device: out.device.clone(),
        lambda_rule: out.lambda.rule.clone(),
        settings: serde_json::to_value(&l.cfg)?,
    })
}

/// One image of a scan of several, in `report.json`.
#[derive(Debug, Serialize)]
pub struct ImageReport {
    /// Its counters (those that vary over the run's images).
    pub index: BTreeMap<String, u16>,
    /// Whether it reused the image before's plan and Q (and coil maps).
    pub shared: bool,
    /// The images solved together in its batch, itself included (1:
    /// alone); the batch's shared stages are timed on its first image.
    pub batch: usize,
    pub iterations: usize,
    pub relative_residual: f64,
    pub lambda: f64,
    pub lambda_abs: f64,
    pub psnr_db: Option<f64>,
    pub gridding_psnr_db: Option<f64>,
    pub seconds: BTreeMap<String, f64>,
}

fn seconds(s: &[(&'static str, f64)]) -> BTreeMap<String, f64> {
    let mut m = BTreeMap::new();
    for (k, v) in s {
        *m.entry(k.to_string()).or_insert(0.0) += v;
    }
    m
}

/// The figures of one image against its truth: iterative and gridding.
pub fn quality(image: &Image) -> (Option<Quality>, Option<Quality>) {
    let truth = image.inputs.truth.as_deref();
    (
        crate::pipeline::quality(&image.out.recon, truth),
        crate::pipeline::quality(&image.out.gridding, truth),
    )
}

/// `report.json` of a run of `images` (in index order), `total_s` long.
pub fn report(
    l: &Loaded,
    images: &[Image],
    arrangement: &Arrangement,
    total_s: f64,
) -> Result<Report> {
    let first = &images[0];
    let (inputs, out) = (&first.inputs, &first.out);
    let (iterative, gridding) = quality(first);
    let all: Vec<(&'static str, f64)> = images.iter().flat_map(|i| i.out.seconds.clone()).collect();
    let mut seconds = seconds(&all);
    seconds.insert("total".into(), total_s);
    let per_image = (images.len() > 1).then(|| {
        images
            .iter()
            .map(|i| {
                let (it, g) = quality(i);
                ImageReport {
                    index: arrangement
                        .axes
                        .iter()
                        .map(|(d, name, _)| (name.to_string(), i.index.0[*d]))
                        .collect(),
                    shared: i.shared,
                    batch: i.batch,
                    iterations: i.out.info.iterations,
                    relative_residual: i.out.info.relative_residual,
                    lambda: i.out.lambda.lambda,
                    lambda_abs: i.out.lambda_abs,
                    psnr_db: it.map(|q| q.psnr_db),
                    gridding_psnr_db: g.map(|q| q.psnr_db),
                    seconds: self::seconds(&i.out.seconds),
                }
            })
            .collect()
    });
    Ok(Report {
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
        lambda: out.lambda.lambda,
        lambda_abs: out.lambda_abs,
        lambda_rule: out.lambda.rule.clone(),
        lambda_tried: out.lambda.tried.clone(),
        lambda_unmet: out.lambda.unmet.clone(),
        regulariser: l.cfg.regulariser.kind,
        prior: out.prior.clone(),
        psnr_db: iterative.as_ref().map(|q| q.psnr_db),
        percent_error: iterative.as_ref().map(|q| q.percent_error),
        gridding_psnr_db: gridding.as_ref().map(|q| q.psnr_db),
        gridding_percent_error: gridding.as_ref().map(|q| q.percent_error),
        iterations: out.info.iterations,
        passes: out.passes.clone(),
        relative_residual: out.info.relative_residual,
        residuals: out.info.residuals.clone(),
        q_cache: out.q_cache.word().to_string(),
        q_cache_file: out.q_file.clone(),
        seconds,
        images: per_image,
        provenance: provenance(l, out)?,
    })
}

fn to_c32(v: &[Complex<f64>]) -> Vec<Complex<f32>> {
    v.iter()
        .map(|c| Complex::new(c.re as f32, c.im as f32))
        .collect()
}

/// The images' values of `pick`, image after image.
fn gather<T: Copy>(images: &[Image], pick: impl Fn(&Image) -> &[T]) -> Vec<T> {
    images
        .iter()
        .flat_map(|i| pick(i).iter().copied())
        .collect()
}

/// Writes `recon.h5` (layout in the README) to `path`: each image array
/// `[series..., Nz, Ny, Nx]`, the series' axes (none for one image)
/// outermost, each with a dataset `/series/<axis>` of its counter's values.
fn write_h5(
    path: &Path,
    l: &Loaded,
    images: &[Image],
    arrangement: &Arrangement,
    provenance: &str,
) -> Result<(), recon_io::IoError> {
    let n = l.grid.n;
    let series = arrangement.shape();
    let with = |inner: &[usize]| -> Vec<usize> { series.iter().chain(inner).copied().collect() };
    let shape = with(&[n[2], n[1], n[0]]);
    let first = &images[0];
    let file = hdf5::File::create(path).at(path, "create")?;
    let complex = |name: &str, pick: &dyn Fn(&Image) -> &[Complex<f64>]| {
        let all = gather(images, pick);
        recon_io::write_dataset(path, &file, name, &shape, &to_c32(&all), false).map(|_| ())
    };
    complex("recon", &|i| &i.out.recon)?;
    complex("gridding", &|i| &i.out.gridding)?;
    complex("fhd", &|i| &i.out.fhd)?;
    let f32s = |v: &[f64]| -> Vec<f32> { v.iter().map(|x| *x as f32).collect() };
    if images.iter().all(|i| i.inputs.truth.is_some()) {
        let all = gather(images, |i| i.inputs.truth.as_deref().expect("checked"));
        recon_io::write_dataset(path, &file, "truth", &shape, &f32s(&all), false)?;
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

/// The unit quaternion (b, c, d) and qfac of NIfTI's qform for the
/// rotation part of `affine` (its columns divided by their lengths), as
/// nifti1_io's `nifti_mat44_to_quatern` computes them.
fn quaternion(affine: &[[f64; 4]; 3]) -> ([f64; 3], f64) {
    let mut r = [[0.0; 3]; 3];
    for c in 0..3 {
        let len = (0..3)
            .map(|i| affine[i][c] * affine[i][c])
            .sum::<f64>()
            .sqrt();
        for i in 0..3 {
            r[i][c] = affine[i][c] / len;
        }
    }
    let det = r[0][0] * (r[1][1] * r[2][2] - r[1][2] * r[2][1])
        - r[0][1] * (r[1][0] * r[2][2] - r[1][2] * r[2][0])
        + r[0][2] * (r[1][0] * r[2][1] - r[1][1] * r[2][0]);
    // A left-handed frame: qfac = -1, the third column negated.
    let qfac = if det < 0.0 { -1.0 } else { 1.0 };
    for row in &mut r {
        row[2] *= qfac;
    }
    let (xx, yy, zz) = (r[0][0], r[1][1], r[2][2]);
    let (a, b, c, d) = if xx + yy + zz + 1.0 > 0.5 {
        let a = 0.5 * (xx + yy + zz + 1.0).sqrt();
        let f = 0.25 / a;
        (
            a,
            f * (r[2][1] - r[1][2]),
            f * (r[0][2] - r[2][0]),
            f * (r[1][0] - r[0][1]),
        )
    } else if 1.0 + xx - (yy + zz) > 1.0 {
        let b = 0.5 * (1.0 + xx - (yy + zz)).sqrt();
        let f = 0.25 / b;
        (
            f * (r[2][1] - r[1][2]),
            b,
            f * (r[0][1] + r[1][0]),
            f * (r[0][2] + r[2][0]),
        )
    } else if 1.0 + yy - (xx + zz) > 1.0 {
        let c = 0.5 * (1.0 + yy - (xx + zz)).sqrt();
        let f = 0.25 / c;
        (
            f * (r[0][2] - r[2][0]),
            f * (r[0][1] + r[1][0]),
            c,
            f * (r[1][2] + r[2][1]),
        )
    } else {
        let d = 0.5 * (1.0 + zz - (xx + yy)).sqrt();
        let f = 0.25 / d;
        (
            f * (r[1][0] - r[0][1]),
            f * (r[0][2] + r[2][0]),
            f * (r[1][2] + r[2][1]),
            d,
        )
    };
    // q and -q are one rotation: NIfTI stores the one with a >= 0.
    let sign = if a < 0.0 { -1.0 } else { 1.0 };
    ([sign * b, sign * c, sign * d], qfac)
}

/// Writes magnitudes as NIfTI-1 (`.nii`): float32, 3 to 7 dimensions (x
/// fastest), voxel size in mm, and the image's voxel-to-scanner transform
/// (RAS) in both qform and sform.
fn write_nifti(path: &Path, image: &Nifti, what: &str) -> Result<(), recon_io::IoError> {
    let v = image.voxel_mm.map(|x| x as f32);
    let a = &image.affine;
    let (q, qfac) = quaternion(a);
    let row = |r: usize| [0, 1, 2, 3].map(|c| a[r][c] as f32);
    let header = nifti::NiftiHeader {
        pixdim: [qfac as f32, v[0], v[1], v[2], 1.0, 1.0, 1.0, 1.0],
        xyzt_units: 2, // NIFTI_UNITS_MM
        qform_code: 1, // scanner anatomical
        sform_code: 1,
        quatern_b: q[0] as f32,
        quatern_c: q[1] as f32,
        quatern_d: q[2] as f32,
        quatern_x: a[0][3] as f32,
        quatern_y: a[1][3] as f32,
        quatern_z: a[2][3] as f32,
        srow_x: row(0),
        srow_y: row(1),
        srow_z: row(2),
        descrip: format!("recon: {what}").into_bytes(),
        ..nifti::NiftiHeader::default()
    };
    // x fastest: a Fortran-order array of dims [x, y, z, ...].
    use ndarray::ShapeBuilder;
    let array = ndarray::ArrayViewD::from_shape(image.dims.clone().f(), &image.values)
        .expect("one value per voxel");
    nifti::writer::WriterOptions::new(path)
        .reference_header(&header)
        .write_nifti(&array)
        .map_err(|e| recon_io::IoError::Encode {
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
    images: &[Image],
    arrangement: &Arrangement,
    report: &Report,
) -> Result<Vec<String>> {
    let json = serde_json::to_string_pretty(report)? + "\n";
    let provenance = serde_json::to_string(&report.provenance)?;
    dir.stage("recon.h5", |tmp| {
        write_h5(tmp, l, images, arrangement, &provenance)
    })
    .context("writing recon.h5")?;
    let geometries: Vec<_> = images.iter().map(|i| i.geometry).collect();
    let nii = |values: Vec<f32>, frames: usize| {
        crate::arrange::nifti(&l.grid, arrangement, &geometries, &values, frames)
    };
    let mut files = vec![
        (
            "recon.nii",
            nii(magnitude(&gather(images, |i| &i.out.recon)), 1),
            "|iterative reconstruction|",
        ),
        (
            "gridding.nii",
            nii(magnitude(&gather(images, |i| &i.out.gridding)), 1),
            "|gridding|",
        ),
    ];
    if images.iter().all(|i| i.inputs.truth.is_some()) {
        let t = gather(images, |i| i.inputs.truth.as_deref().expect("checked"));
        files.push((
            "truth.nii",
            nii(t.iter().map(|v| *v as f32).collect(), 1),
            "true image",
        ));
    }
    let maps_everywhere = images.iter().all(|i| i.out.maps.is_some());
    if let (true, true, Some(maps)) = (
        l.cfg.output.maps_nifti,
        maps_everywhere,
        &images[0].out.maps,
    ) {
        let all: Vec<Complex<f64>> = images
            .iter()
            .flat_map(|i| i.out.maps.as_ref().expect("checked").concat())
            .collect();
        files.push(("maps.nii", nii(magnitude(&all), maps.len()), "|coil maps|"));
    }
    for (name, image, what) in &files {
        dir.stage(name, |tmp| write_nifti(tmp, image, what))
            .with_context(|| format!("writing {name}"))?;
    }
    if l.cfg.output.cfl {
        // BART's order is x fastest, as recon's; images along dimension 13.
        let n = l.grid.n;
        let mut dims = vec![n[0], n[1], n[2]];
        if images.len() > 1 {
            dims.resize(13, 1);
            dims.push(images.len());
        }
        let values = to_c32(&gather(images, |i| &i.out.recon));
        let write = |tmp: &Path, data: &[u8]| {
            std::fs::write(tmp, data).map_err(|e| recon_io::IoError::Io {
                path: tmp.display().to_string(),
                op: "write",
                source: e,
            })
        };
        dir.stage("recon.cfl", |tmp| {
            write(tmp, &recon_import::cfl::bytes(&values))
        })
        .context("writing recon.cfl")?;
        dir.stage("recon.hdr", |tmp| {
            write(tmp, recon_import::cfl::header(&dims).as_bytes())
        })
        .context("writing recon.hdr")?;
    }
    let first = &images[0];
    dir.stage("montage.png", |tmp| {
        crate::pictures::montage(
            tmp,
            &l.grid,
            first.inputs.truth.as_deref(),
            &first.out.recon,
            &first.out.gridding,
        )
    })
    .context("writing montage.png")?;
    dir.stage("residual.png", |tmp| {
        crate::pictures::residual_plot(tmp, &first.out.info.residuals)
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
