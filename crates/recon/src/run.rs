//! `recon run`: a reconstruction from its config (or scan file and flags)
//! to its committed outputs and the summary on one screen. The GPU opens
//! while the scan file is read and the first image's inputs are made; a
//! run of one image writes what is final of its outputs while it computes
//! ([`crate::early`]); the folder is swapped in whole at the end.

use crate::cli::RunArgs;
use crate::config::{self, Loaded};
use crate::pipeline::{self, Ui};
use crate::{
    early, leave_to_exit, load_and, note, on_backend, output, report, since_start, ui, Bars,
    SCAN_READ,
};
use anyhow::{Context, Result};
use recon_q::Stored;
use std::time::Instant;

/// Runs `recon run` (also `recon` with a scan file or a config).
pub(crate) fn run(args: RunArgs) -> Result<()> {
    // A GPU's driver and contexts start while the scan file is read.
    let warm = std::cell::RefCell::new(None);
    let mut l = load_run(&args, &|cfg| {
        *warm.borrow_mut() = recon_pipeline::warm_gpu(cfg, args.device);
    })?;
    // Before any computation: can the outputs be written?
    let outputs =
        recon_io::OutputDir::prepare(l.output_dir()?).context("preparing the output folder")?;
    // Everything so far (parsing, the config, the output folder)
    // is the run's set-up; then the device is opened.
    let read = *SCAN_READ.lock().unwrap_or_else(|e| e.into_inner());
    let setup = since_start() - read;
    // `auto` may take the CPU here, for a problem too small for a GPU.
    recon_pipeline::settle(&mut l, args.device, &note)?;
    let gpu = recon_pipeline::may_open_gpu(&l.cfg.engine, None);
    // The input's hash, for the provenance, while the run computes.
    let input = report::InputHash::start(&l);
    let (engine, cache) = (l.cfg.engine.clone(), config::cache_dir(&l.cfg));
    let open = || recon_pipeline::choose_backend(&engine, &cache, &note);
    // A scan of several images: one config per image, reconstructed in turn.
    let images = pipeline::split(l);
    // The first image's inputs (synthetic data made, or a scan's
    // prepared) while the GPU opens, where memory allows it; the
    // memory is checked in full once the backend is chosen.
    let warm = warm.take();
    let ahead = gpu && pipeline::inputs_before_device(&images[0].1);
    let (chosen, ahead, t) = std::thread::scope(|s| {
        if !ahead {
            let t = Instant::now();
            return (open(), None, t);
        }
        let opening = s.spawn(open);
        let inputs = pipeline::read_first(&images, &Bars);
        // `device`: the wait beyond the inputs.
        let t = Instant::now();
        let chosen = opening
            .join()
            .unwrap_or_else(|p| std::panic::resume_unwind(p));
        (chosen, Some(inputs), t)
    });
    let (chosen, ahead) = (chosen?, ahead.transpose()?);
    match warm {
        // The contexts' extra references, released.
        Some(w) if gpu => drop(w.join()),
        // A small scan that `auto` took to the CPU: the warm-up finishes
        // on its own thread, unwaited for.
        _ => {}
    }
    let device = t.elapsed().as_secs_f64();
    let mut opened = vec![("setup", setup), ("device", device)];
    if read > 0.0 {
        opened.push(("read", read));
    }
    let done = on_backend!(&chosen, b => run_pipeline(b, images, ahead, input, outputs, &opened));
    leave_to_exit(chosen);
    done
}

/// A run's config: the config file and the flags, or the flags alone;
/// `checked` sees the config before its scan file is read.
pub(crate) fn load_run(args: &RunArgs, checked: &dyn Fn(&config::Config)) -> Result<Loaded> {
    let settings = args.settings.settings(args.scan.as_deref());
    if args.config.is_none() && settings.is_empty() {
        anyhow::bail!(
            "nothing to reconstruct: give a scan file (`recon scan.h5 --out DIR`) or a config \
             (`recon --config configs/sodium.toml`)"
        );
    }
    load_and(
        args.config.as_deref(),
        &settings,
        args.out.as_deref(),
        checked,
    )
}

fn run_pipeline<B>(
    backend: &B,
    images: Vec<(recon_io::geometry::Index, Loaded)>,
    ahead: Option<(pipeline::Inputs, f64)>,
    input: report::InputHash,
    outputs: recon_io::OutputDir,
    opened: &[(&'static str, f64)],
) -> Result<()>
where
    B: recon_encoding::NufftBackend,
    B::Real: Stored,
{
    let ui = Bars;
    ui.log(&format!("device: {}", backend.describe()));
    let count = images.len();
    let l = &images[0].1;
    // Before anything large is made (but the first image's inputs, if made
    // while the GPU opened): do the device and the host hold it?
    let held = ahead.as_ref().map_or(0, |(i, _)| i.bytes());
    pipeline::check_memory_holding(backend, l, pipeline::Work::Reconstruct, held)?;
    if count > 1 {
        ui.log(&format!(
            "{count} images in `{}`: {}",
            l.data_name(),
            images
                .iter()
                .map(|(i, _)| i.describe())
                .collect::<Vec<_>>()
                .join("; ")
        ));
    }
    // The kernels the run will launch, compiled (or read from the cache)
    // side by side before the first stage needs one.
    let t = Instant::now();
    ui.stage("kernels", |_| backend.prepare(&pipeline::workload(l)))
        .context("preparing the device's kernels")?;
    let mut before = opened.to_vec();
    before.push(("kernels", t.elapsed().as_secs_f64()));
    let kernels = report::kernels();
    if let Some(why) = kernels.as_ref().and_then(|k| k.not_stored.as_ref()) {
        ui.log(&format!("warning: {why}; the run goes on"));
    }
    // A run of one image writes its truth, gridding and F^H D while it
    // computes; a series writes its files once every image is done.
    let (done, report) = std::thread::scope(|s| {
        let (done, early) = if count == 1 {
            let (index, geometry) = (images[0].0, pipeline::geometry(l));
            let (early, writer) = early::start(s, &outputs, l, index, geometry);
            let done = pipeline::reconstruct_series_from(backend, &images, ahead, &early, &ui);
            (done?, early.close(writer))
        } else {
            let done =
                pipeline::reconstruct_series_from(backend, &images, ahead, &pipeline::AtEnd, &ui);
            (done?, early::Pending::none())
        };
        let report = stage_outputs(l, &done, early, input, &outputs, before, kernels)?;
        anyhow::Ok((done, report))
    })?;
    let files = output::commit(outputs)?;
    summary(l, &done, &report, &files)?;
    leave_to_exit(done);
    leave_to_exit(images);
    Ok(())
}

/// Writes a run's outputs into the staging folder `outputs`, from its
/// images `done` (`early`: what was written of them while they were
/// computed); returns its report.
pub(crate) fn stage_outputs(
    l: &Loaded,
    done: &[pipeline::Image],
    early: early::Pending<'_>,
    input: report::InputHash,
    outputs: &recon_io::OutputDir,
    mut before: Vec<(&'static str, f64)>,
    kernels: Option<recon_cuda::KernelStats>,
) -> Result<report::Report> {
    let ui = Bars;
    let count = done.len();
    let first = &done[0];
    ui.log(&format!(
        "{} {} samples of `{}` on a {:?} grid{}",
        match l.source {
            config::Source::Synthetic { .. } => "synthesised",
            config::Source::Scan(_) => "read",
        },
        first.inputs.traj.len(),
        l.data_name(),
        l.grid.n,
        if count > 1 { " per image" } else { "" }
    ));
    let indices: Vec<_> = done.iter().map(|i| i.index).collect();
    let arrangement = crate::arrange::Arrangement::of(&indices);
    // The provenance first (`recon.h5` carries it); the report's figures
    // while the files are written.
    let t = Instant::now();
    let provenance = report::provenance(l, &first.out, input)?;
    let provenance_json = serde_json::to_string(&provenance)?;
    before.push(("report", t.elapsed().as_secs_f64()));
    let make_report = || report::report(l, done, &arrangement, &before, kernels, provenance);
    output::write(
        outputs,
        l,
        done,
        &arrangement,
        &provenance_json,
        early,
        make_report,
    )
}

/// The run's summary, on one screen.
fn summary(
    l: &Loaded,
    done: &[pipeline::Image],
    report: &report::Report,
    files: &[String],
) -> Result<()> {
    let count = done.len();
    if ui::verbosity() == ui::Verbosity::Verbose {
        // What follows (the summary, freeing memory, the process's exit)
        // is outside the report's total.
        eprintln!("outputs in place {:.3} s after the start", since_start());
    }

    // One-screen summary.
    println!(
        "recon: {} ({}; Q and F^H D by {})",
        l.path.display(),
        report.device,
        report.engine
    );
    println!(
        "  data {}, {} samples{}, matrix {:?}, FOV {:?} mm, noise sigma {}",
        report.data,
        report.samples,
        if count > 1 {
            format!(" in each of {count} images")
        } else {
            String::new()
        },
        report.matrix,
        report.fov_mm,
        report
            .noise_sigma
            .map_or("unknown (no noise data)".to_string(), |s| format!(
                "{s:.3e}"
            ))
    );
    let (unit, prior) = if report.prior_kind.sparse() {
        (
            "peak |F^H D|",
            format!("prior {}", report.prior_kind.name()),
        )
    } else {
        (
            "peak Q",
            format!("W {}", format!("{:?}", report.regulariser).to_lowercase()),
        )
    };
    println!(
        "  {}: {} iterations{}, relative residual {:.3e}, lambda {:.4} x {unit} = {:.3e} ({}), {prior}{}",
        report.algorithm.describe(),
        report.iterations,
        match report.passes.len() {
            0 | 1 => String::new(),
            _ => format!(" in {} passes ({:?})", report.passes.len(), report.passes),
        },
        report.relative_residual,
        report.lambda,
        report.lambda_abs,
        report.lambda_rule,
        if count > 1 { " (first image)" } else { "" }
    );
    println!("  Q cache: {}", report.q_cache);
    for (image, quality) in done.iter().zip(&report.quality) {
        if count > 1 {
            println!(
                "  {}: {} iterations, relative residual {:.3e}{}",
                image.index.describe(),
                image.out.info.iterations,
                image.out.info.relative_residual,
                match (image.batch, image.shared) {
                    (1, true) => ", plan and Q shared with the image before".to_string(),
                    (1, false) => String::new(),
                    (n, _) => format!(", solved with {} others in one batch", n - 1),
                }
            );
        }
        match quality {
            (Some(i), Some(g)) => {
                println!("                 PSNR (dB)   error (%)");
                println!(
                    "  iterative    {:>10.2}  {:>10.2}",
                    i.psnr_db, i.percent_error
                );
                println!(
                    "  gridding     {:>10.2}  {:>10.2}",
                    g.psnr_db, g.percent_error
                );
            }
            _ if count == 1 => println!("  no true image in the scan file: PSNR not computed"),
            _ => {}
        }
    }
    let secs: Vec<String> = report
        .seconds
        .iter()
        .map(|(k, v)| format!("{k} {v:.2}"))
        .collect();
    println!("  seconds: {}", secs.join(", "));
    println!(
        "  wrote {} in {}",
        files.join(", "),
        l.output_dir()?.display()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::run_hosted;

    /// This process's resident memory, bytes.
    fn resident() -> u64 {
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let kib: u64 = status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap();
        kib << 10
    }

    // The binary leaves its images to the process's exit; a host (the
    // Python package's batch, a scan per run) must get them back.
    #[test]
    fn a_hosted_run_gives_its_images_back() {
        let tmp = tempfile::tempdir().unwrap();
        let shipped = concat!(env!("CARGO_MANIFEST_DIR"), "/../../configs/test-small.toml");
        let text = std::fs::read_to_string(shipped).unwrap();
        // 64^3 in f64: each run's images (iterative, gridding, F^H D and
        // the truth) are 14 MiB.
        let cfg = tmp.path().join("test-small.toml");
        std::fs::write(
            &cfg,
            text.replace("matrix = 16", "matrix = 64").replace(
                "../phantoms/",
                &format!("{}/../../phantoms/", env!("CARGO_MANIFEST_DIR")),
            ),
        )
        .unwrap();
        let run = |i: usize| {
            let out = tmp.path().join(format!("out-{i}"));
            let args: Vec<String> = [
                "--config",
                cfg.to_str().unwrap(),
                "--out",
                out.to_str().unwrap(),
                "-q",
            ]
            .iter()
            .map(|s| s.to_string())
            .collect();
            run_hosted(&args).unwrap();
        };
        // Two runs first: the allocator's pools and the Q cache settle.
        run(0);
        run(1);
        let before = resident();
        for i in 2..8 {
            run(i);
        }
        let grown = resident().saturating_sub(before) as f64 / (1 << 20) as f64;
        // Six runs kept would be 84 MiB or more; given back, what the
        // allocator keeps of them is a run's worth at most.
        assert!(grown < 40.0, "{grown:.1} MiB more after six runs");
    }
}
