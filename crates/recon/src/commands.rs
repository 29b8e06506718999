//! The small commands: `recon check` (a run's checks without computing),
//! `recon batch` (the Python package's Dask batch), `recon q` (Q into the
//! cache) and `recon simulate` (synthetic data into a scan file).

use crate::cli::{self, CheckArgs};
use crate::config::{self, Loaded, Precision};
use crate::run::load_run;
use crate::{pipeline, Bars};
use anyhow::{Context, Result};
use recon_q::Stored;
use std::time::Instant;

/// `recon check`: everything a run checks before it computes.
pub(crate) fn check(args: &CheckArgs) -> Result<()> {
    let mut l = load_run(args, &|_| {})?;
    if let Some(d) = args.device {
        l.cfg.engine.device = d;
    }
    let samples = pipeline::samples(&l)?;
    // Where the run would compute: a small problem runs on the CPU under
    // `auto` (recon_pipeline::small_for_gpu).
    let gpu = recon_pipeline::may_open_gpu(&l.cfg.engine, None)
        && recon_pipeline::small_for_gpu(&l).is_none()
        && recon_cuda::probe().is_ok();
    let real_bytes = match l.cfg.engine.precision {
        Precision::F32 => 4,
        Precision::F64 => 8,
    };
    pipeline::check_host_memory(&l, pipeline::Work::Reconstruct, real_bytes, gpu)?;
    drop(recon_io::OutputDir::prepare(l.output_dir()?).context("the output folder")?);
    println!(
        "{}: OK: {} samples of `{}`, matrix {:?}, FOV {:?} mm; outputs to {}",
        l.path.display(),
        samples,
        l.data_name(),
        l.grid.n,
        l.grid.fov_mm,
        l.output_dir()?.display()
    );
    Ok(())
}

/// `recon batch`: the Python package's batch (`python -m recon.batch`),
/// the same code as `recon.batch.reconstruct_many`; its status is ours.
pub(crate) fn batch(args: &cli::BatchArgs) -> Result<()> {
    let python = args
        .python
        .clone()
        .or_else(|| std::env::var_os("RECON_PYTHON").map(Into::into))
        .unwrap_or_else(|| "python3".into());
    let found = std::process::Command::new(&python)
        .args(["-c", "import recon.batch, distributed"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status();
    if !found.is_ok_and(|s| s.success()) {
        anyhow::bail!(
            "recon batch runs through the Python package, which {} cannot import with Dask: \
             install them (`{0} -m pip install ./python 'dask[distributed]'` from recon's folder), \
             or name another Python with --python",
            python.display()
        );
    }
    let mut cmd = std::process::Command::new(&python);
    cmd.args(["-m", "recon.batch"]).arg(&args.manifest);
    if let Some(s) = &args.scheduler {
        cmd.args(["--scheduler", s]);
    }
    let status = cmd
        .status()
        .with_context(|| format!("running {} -m recon.batch", python.display()))?;
    match status.code() {
        Some(0) => Ok(()),
        Some(1) => anyhow::bail!("some scans failed (the summary above names them)"),
        _ => anyhow::bail!("the batch ended with {status}"),
    }
}

/// `recon q`: Q into the cache, and stop.
pub(crate) fn q_command<B>(backend: &B, l: &Loaded) -> Result<()>
where
    B: recon_encoding::NufftBackend,
    B::Real: Stored,
{
    pipeline::check_memory(backend, l, pipeline::Work::Q)?;
    let traj = pipeline::trajectory(l)?;
    let t = Instant::now();
    let plan = pipeline::plan(backend, l, &traj)?;
    let (status, file) = pipeline::q_only(&plan, l, &Bars)?;
    println!(
        "Q by {} for {} samples on {:?}: {} in {:.2} s ({})",
        plan.engine().describe(),
        traj.len(),
        l.grid.doubled(),
        status.word(),
        t.elapsed().as_secs_f64(),
        file.map(|f| f.display().to_string())
            .unwrap_or_else(|| "cache disabled".into())
    );
    Ok(())
}

/// `recon simulate`: synthetic data, truth and anatomy into a scan file.
pub(crate) fn simulate(l: &Loaded, out: &std::path::Path) -> Result<()> {
    if let config::Source::Scan(_) = l.source {
        anyhow::bail!("recon simulate writes synthetic data: the config must have [phantom] and [trajectory], not [scan]");
    }
    recon_io::check_writable_file(out).context("the scan file to write")?;
    pipeline::check_host_memory(l, pipeline::Work::Simulate, 8, false)?;
    let traj = pipeline::trajectory(l)?;
    let raw = pipeline::raw_inputs(l, traj, &Bars)?;
    // The truth as a run of this config reconstructs it (with coils,
    // weighted by the prepared maps).
    let prepared_maps = match raw.truth_by_maps {
        true => {
            let data = raw.data.clone();
            pipeline::prepare(
                l,
                data,
                raw.coils,
                raw.maps.clone(),
                raw.covariance.as_deref(),
            )?
            .maps
        }
        false => None,
    };
    let truth = pipeline::truth_seen(raw.truth, raw.truth_by_maps, prepared_maps.as_deref());
    let scan = recon_io::scan::Scan {
        grid: l.grid,
        traj: raw.traj,
        coils: raw.coils,
        data: raw.data,
        noise: raw.covariance.map(recon_io::scan::CoilNoise::Covariance),
        maps: raw.maps,
        truth,
        anatomy: raw.anatomy,
        geometry: None,
        parts: Vec::new(),
    };
    recon_io::scan::write_scan(out, &scan).context("writing the scan file")?;
    println!(
        "wrote {} (scan file version {}): {} samples from {} coil{}{}, matrix {:?}, FOV {:?} mm, truth{}",
        out.display(),
        scan.version(),
        scan.traj.len(),
        scan.coils,
        if scan.coils > 1 { "s" } else { "" },
        match (&scan.noise, &scan.maps) {
            (Some(_), Some(_)) => ", their noise covariance and maps",
            (Some(_), None) => ", their noise covariance",
            (None, Some(_)) => ", their maps",
            (None, None) => "",
        },
        scan.grid.n,
        scan.grid.fov_mm,
        if scan.anatomy.is_some() {
            " and anatomy"
        } else {
            ""
        }
    );
    Ok(())
}
