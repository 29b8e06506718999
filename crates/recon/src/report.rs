//! `report.json`: a run's settings, figures and timings, and its
//! provenance (what a study needs to reproduce it).

use crate::arrange::Arrangement;
use crate::config::Loaded;
use crate::pipeline::{Image, Quality};
use anyhow::{Context as _, Result};
use recon_cuda::KernelStats;
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
    /// Each stage's seconds, every second of the process's wall time
    /// (`total`) in one of them: `setup` (parsing, the config, the output
    /// folder), `device` (opening the GPUs), `kernels` (compiling or
    /// reading their kernels), `read` or `synthesis`, the builder's stages,
    /// `cg`, `gridding`, `report` (the input's hash and the provenance,
    /// which `recon.h5` carries), `outputs` (writing the files; the rest of
    /// this report is made meanwhile), and `other`, what none of them
    /// timed.
    pub seconds: BTreeMap<String, f64>,
    /// Each output file's seconds, written and synced (those written
    /// while the run computed too: they are not in `outputs`).
    pub output_seconds: BTreeMap<String, f64>,
    /// The GPU kernels this run compiled or read from the cache (a GPU run
    /// only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kernels: Option<KernelStats>,
    /// A scan of several images: each one's figures (the fields above are
    /// the first image's, `seconds` the whole run's). Absent for one image.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub images: Option<Vec<ImageReport>>,
    pub provenance: Provenance,
    /// Each image's PSNR and error, iterative and gridding (`None`
    /// without a truth): for the run's summary, computed once.
    #[serde(skip)]
    pub quality: Vec<(Option<Quality>, Option<Quality>)>,
}

/// This process's kernels so far; `None` when it loaded none (the CPU).
pub fn kernels() -> Option<KernelStats> {
    let s = recon_cuda::kernel_stats();
    (!s.compiled.is_empty() || !s.cached.is_empty()).then_some(s)
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

/// The scan file's size and SHA-256, hashed on a thread of its own while
/// the run computes: a second read of a large file costs the run nothing
/// it waits for (0.8 s for a 256^3 scan on the GPU machine, in turn).
pub struct InputHash(
    Option<(
        PathBuf,
        std::thread::JoinHandle<std::io::Result<(u64, String)>>,
    )>,
);

impl InputHash {
    /// Starts hashing `l`'s scan file (synthetic data: nothing to hash).
    pub fn start(l: &Loaded) -> Self {
        InputHash(l.cfg.scan.as_ref().map(|scan| {
            let path = scan.file.clone();
            let p = path.clone();
            (path, std::thread::spawn(move || sha256(&p)))
        }))
    }

    /// The hash, once the thread is done.
    fn finish(self) -> Result<Option<InputFile>> {
        let Some((path, thread)) = self.0 else {
            return Ok(None);
        };
        let (bytes, sha256) = thread
            .join()
            .map_err(|_| anyhow::anyhow!("hashing {} failed", path.display()))?
            .with_context(|| format!("hashing {}", path.display()))?;
        Ok(Some(InputFile {
            path,
            bytes,
            sha256,
        }))
    }
}

/// The run's provenance, with its input file hashed by `input`.
pub fn provenance(
    l: &Loaded,
    out: &crate::pipeline::Outputs,
    input: InputHash,
) -> Result<Provenance> {
    Ok(Provenance {
        recon_version: env!("CARGO_PKG_VERSION"),
        commit: env!("RECON_COMMIT"),
        command_line: std::env::args().collect(),
        input: input.finish()?,
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

/// Sets `total` to the process's wall time so far, and `other` to what no
/// stage timed.
pub fn close_seconds(seconds: &mut BTreeMap<String, f64>) {
    seconds.remove("other");
    seconds.remove("total");
    let timed: f64 = seconds.values().sum();
    let total = crate::since_start();
    seconds.insert("other".into(), (total - timed).max(0.0));
    seconds.insert("total".into(), total);
}

fn seconds(s: &[(&'static str, f64)]) -> BTreeMap<String, f64> {
    let mut m = BTreeMap::new();
    for (k, v) in s {
        *m.entry(k.to_string()).or_insert(0.0) += v;
    }
    m
}

/// The figures of one image against its truth: iterative and gridding.
fn quality(image: &Image) -> (Option<Quality>, Option<Quality>) {
    let truth = image.inputs.truth.as_deref();
    (
        crate::pipeline::quality(&image.out.recon, truth),
        crate::pipeline::quality(&image.out.gridding, truth),
    )
}

/// `report.json` of a run of `images` (in index order), with the seconds
/// of the stages `before` its images (set-up, device, kernels), its GPU
/// `kernels` and its `input` file's hash. Its `total` and `outputs` seconds are set when the
/// outputs are written ([`crate::output::write`]).
pub fn report(
    l: &Loaded,
    images: &[Image],
    arrangement: &Arrangement,
    before: &[(&'static str, f64)],
    kernels: Option<KernelStats>,
    provenance: Provenance,
) -> Report {
    let first = &images[0];
    let (inputs, out) = (&first.inputs, &first.out);
    let qualities: Vec<_> = images.iter().map(quality).collect();
    let (iterative, gridding) = &qualities[0];
    let all: Vec<(&'static str, f64)> = before
        .iter()
        .copied()
        .chain(images.iter().flat_map(|i| i.out.seconds.clone()))
        .collect();
    let seconds = seconds(&all);
    let per_image = (images.len() > 1).then(|| {
        images
            .iter()
            .zip(&qualities)
            .map(|(i, (it, g))| ImageReport {
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
                psnr_db: it.as_ref().map(|q| q.psnr_db),
                gridding_psnr_db: g.as_ref().map(|q| q.psnr_db),
                seconds: self::seconds(&i.out.seconds),
            })
            .collect()
    });
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
        output_seconds: BTreeMap::new(),
        kernels,
        images: per_image,
        provenance,
        quality: qualities,
    }
}
