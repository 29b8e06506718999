//! `recon validate`'s outputs: the markdown report, and the files written
//! into the output folder (tables, bar chart, residual and lambda plots,
//! the priors montage).

use super::{SweepPoint, Swept, Validation, EXTEND};
use crate::config::Loaded;
use crate::pipeline::Inputs;
use anyhow::Result;
use recon_core::Complex;
use std::fmt::Write as _;

pub(super) fn markdown(v: &Validation) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "# Validation: {}\n", v.config);
    let _ = writeln!(
        s,
        "Data `{}`, matrix {:?}, {} samples, lambda {} (relative to the peak of Q; the engine rows), {} CG iterations.\n",
        v.data, v.matrix, v.samples, v.lambda, v.iterations
    );
    if !v.rows.is_empty() {
        let _ = writeln!(s, "| data | method | PSNR (dB) | error (%) | rel. diff. to float64 | Q (s) | F^H D (s) | CG (s) | gridding (s) | device |");
        let _ = writeln!(
            s,
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
        );
        for r in &v.rows {
            let t = |k: &str| {
                if r.method == "gridding" {
                    "-".to_string()
                } else {
                    r.seconds.get(k).map_or("-".into(), |v| format!("{v:.3}"))
                }
            };
            let _ = writeln!(
                s,
                "| {} | {} | {:.3} | {:.2} | {} | {} | {} | {} | {} | {} |",
                r.data,
                r.method,
                r.psnr_db,
                r.percent_error,
                r.relative_difference_to_f64
                    .map_or("-".into(), |d| format!("{d:.2e}")),
                t("q"),
                t("fhd"),
                t("cg"),
                r.seconds
                    .get("gridding")
                    .map_or("-".into(), |v| format!("{v:.3}")),
                r.device
            );
        }
    }
    let _ = writeln!(s, "\n## Checks\n");
    for c in &v.checks {
        if let Some(why) = &c.not_run {
            let _ = writeln!(s, "- {}: NOT RUN ({why})", c.what);
            continue;
        }
        match (&c.bound, c.passed) {
            (Some(b), Some(p)) => {
                let verdict = if p { "PASS" } else { "FAIL" };
                let _ = writeln!(s, "- {}: {:.3} dB ({b}): {verdict}", c.what, c.value);
            }
            _ => {
                let _ = writeln!(s, "- {}: {:.3} dB", c.what, c.value);
            }
        }
    }
    if let (Some(pts), Some(best)) = (&v.lambda_sweep, v.best_lambda) {
        let _ = writeln!(s, "\n## Lambda sweep (noisy data)\n\n| lambda | PSNR (dB) | error (%) |\n| --- | --- | --- |");
        for p in pts {
            let _ = writeln!(
                s,
                "| {:.3e} | {:.3} | {:.2} |",
                p.lambda, p.psnr_db, p.percent_error
            );
        }
        let _ = writeln!(s, "\nBest lambda: {best:.3e}.");
        if v.best_lambda_at_range_edge == Some(true) {
            let _ = writeln!(
                s,
                "\nThe best lambda is at an end of the range even after extending it by {EXTEND} points: \
                 the true best lies beyond; widen --lambda-min or --lambda-max."
            );
        }
    }
    if let Some(a) = &v.auto_lambda {
        let _ = writeln!(
            s,
            "\n## Lambda without the truth (noisy data)\n\n{}: lambda \"auto\" chose {:.3e}, \
             PSNR {:.3} dB ({}); the best of the sweep is {:.3e}, PSNR {:.3} dB.",
            a.prior, a.lambda, a.psnr_db, a.rule, a.best_lambda, a.best_psnr_db
        );
        if let Some((lambda, psnr)) = a.gcv {
            let _ = writeln!(s, "lambda \"gcv\" chose {lambda:.3e}, PSNR {psnr:.3} dB.");
        }
    }
    if let Some(p) = &v.priors {
        let _ = writeln!(
            s,
            "\n## The priors ({} data)\n\n\
             Anatomical W: edges where the reference's gradient magnitude exceeds {} of its largest \
             weigh {} (1 elsewhere); {} of {} edges ({:.1}%){}{}. Each method at its own best lambda of the sweep \
             below (the quadratic W's lambda relative to the peak of Q, total variation's to the peak of \
             |F^H D|); gridding has no lambda. Montage: priors.png.\n",
            p.data,
            p.edge_threshold,
            p.edge_weight,
            p.prior.boundary_edges,
            p.prior.edges,
            100.0 * p.prior.boundary_edges as f64 / p.prior.edges as f64,
            match p.support_threshold {
                Some(t) => format!(
                    "; support mask below {t} of the reference's peak ({} voxels outside)",
                    p.prior.outside_support
                ),
                None => String::new(),
            },
            match p.data_threshold {
                Some(k) => format!(
                    "; a second pass also relaxes edges where the first pass's image changes by more than {k} noise deviations"
                ),
                None => String::new(),
            }
        );
        let _ = writeln!(
            s,
            "| method | best lambda | PSNR (dB) | error (%) |\n| --- | --- | --- | --- |"
        );
        for r in &p.rows {
            let lambda = match r.best_lambda {
                Some(l) if r.at_range_edge => format!("{l:.3e} (edge of the range)"),
                Some(l) => format!("{l:.3e}"),
                None => "-".into(),
            };
            let _ = writeln!(
                s,
                "| {} | {} | {:.3} | {:.2} |",
                r.method, lambda, r.psnr_db, r.percent_error
            );
        }
        let names: Vec<&str> = p.sweeps.iter().map(|(n, _)| n.as_str()).collect();
        let _ = writeln!(
            s,
            "\n| lambda | {} |\n| --- |{}",
            names
                .iter()
                .map(|n| format!("{n} PSNR (dB)"))
                .collect::<Vec<_>>()
                .join(" | "),
            " --- |".repeat(names.len())
        );
        // Sweeps extended at different ends hold different lambdas: one
        // row per lambda of any sweep.
        let same = |a: f64, b: f64| (a / b - 1.0).abs() < 1e-9;
        let mut lambdas: Vec<f64> = p
            .sweeps
            .iter()
            .flat_map(|(_, pts)| pts.iter().map(|q| q.lambda))
            .collect();
        lambdas.sort_by(f64::total_cmp);
        lambdas.dedup_by(|a, b| same(*a, *b));
        for lambda in lambdas {
            let cells: Vec<String> = p
                .sweeps
                .iter()
                .map(|(_, pts)| {
                    pts.iter()
                        .find(|q| same(q.lambda, lambda))
                        .map_or("-".into(), |q| format!("{:.3}", q.psnr_db))
                })
                .collect();
            let _ = writeln!(s, "| {lambda:.3e} | {} |", cells.join(" | "));
        }
    }
    s
}

pub(super) fn write(
    mut dir: recon_io::OutputDir,
    l: &Loaded,
    v: &Validation,
    inputs: &Inputs,
    swept: &[Swept],
    prior_gridding: Option<&[Complex<f64>]>,
) -> Result<Vec<String>> {
    use crate::output::write_text;
    dir.stage("validation.md", |tmp| write_text(tmp, &markdown(v)))?;
    let json = serde_json::to_string_pretty(v)? + "\n";
    dir.stage("validation.json", |tmp| write_text(tmp, &json))?;
    if !v.rows.is_empty() {
        let bars: Vec<(String, f64)> = v
            .rows
            .iter()
            .map(|r| (format!("{}: {}", r.data, r.method), r.psnr_db))
            .collect();
        dir.stage("psnr.png", |tmp| {
            crate::pictures::bar_chart(tmp, "PSNR by method", &bars, "dB")
        })?;
        let curves: Vec<(String, Vec<f64>)> = v
            .rows
            .iter()
            .filter(|r| r.method != "gridding")
            .map(|r| {
                (
                    format!(
                        "{} {}",
                        if r.data == "noiseless" {
                            "clean"
                        } else {
                            "noisy"
                        },
                        r.method.split(' ').take(2).collect::<Vec<_>>().join(" ")
                    ),
                    r.residuals.clone(),
                )
            })
            .collect();
        dir.stage("residuals.png", |tmp| {
            crate::pictures::residual_curves(tmp, &curves)
        })?;
    }
    // PSNR against log10(lambda), one curve per named sweep.
    let lambda_plot = |dir: &mut recon_io::OutputDir,
                       name: &str,
                       title: &str,
                       sweeps: &[(String, &[SweepPoint])]| {
        let series: Vec<crate::pictures::Series> = sweeps
            .iter()
            .map(|(n, pts)| crate::pictures::Series {
                name: n.clone(),
                points: pts.iter().map(|p| (p.lambda.log10(), p.psnr_db)).collect(),
            })
            .collect();
        dir.stage(name, |tmp| {
            crate::pictures::line_plot(
                tmp,
                title,
                "lambda (relative to peak Q)",
                &series,
                &|x| format!("1e{x:.1}"),
                &|y| format!("{y:.1}"),
            )
        })
    };
    if let Some(pts) = &v.lambda_sweep {
        lambda_plot(
            &mut dir,
            "lambda.png",
            "PSNR against lambda (noisy data)",
            &[("PSNR".into(), pts)],
        )?;
    }
    if let Some(g) = prior_gridding {
        priors_montage(&mut dir, l, inputs, swept, g)?;
        let sweeps: Vec<(String, &[SweepPoint])> = swept
            .iter()
            .map(|s| (s.name.clone(), &s.points[..]))
            .collect();
        lambda_plot(
            &mut dir,
            "priors-lambda.png",
            "PSNR against lambda, by W (noisy data)",
            &sweeps,
        )?;
    }
    crate::output::pause_before_commit();
    Ok(dir.commit()?)
}

/// Truth, reference, gridding and each W at its best lambda, with errors.
fn priors_montage(
    dir: &mut recon_io::OutputDir,
    l: &Loaded,
    inputs: &Inputs,
    swept: &[Swept],
    gridding: &[Complex<f64>],
) -> Result<()> {
    use crate::pictures::{magnitude, Column, Scale, Values};
    let truth = inputs.truth.as_deref().expect("checked");
    let g = magnitude(gridding);
    let mut cols = vec![Column::new("truth", Values::Real(truth), Scale::Image)];
    if let Some(a) = &inputs.anatomy_on_grid {
        cols.push(Column::new("reference", Values::Real(a), Scale::Own));
    }
    cols.push(Column::new("gridding", Values::Real(&g), Scale::Image));
    let images: Vec<(String, Vec<f64>)> = swept
        .iter()
        .map(|s| (s.name.clone(), magnitude(&s.best_image)))
        .collect();
    for (name, img) in &images {
        cols.push(Column::new(name, Values::Real(img), Scale::Image));
    }
    cols.push(Column::error("|err| gridding", &g, truth));
    for (name, img) in &images {
        cols.push(Column::error(
            &format!("|err| {}", name.trim_end_matches(" W")),
            img,
            truth,
        ));
    }
    dir.stage("priors.png", |tmp| {
        crate::pictures::montage_columns(tmp, &l.grid, None, &cols)
    })?;
    Ok(())
}
