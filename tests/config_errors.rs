//! The `recon` binary's config errors: each bad value, table or
//! combination is refused with a message naming the key, and nothing is
//! written (tests/driver.rs runs the pipeline end to end).

use crate::common;

use common::{config_with, recon, repo};

/// Runs a broken config and checks the error names what it should and
/// nothing was written.
fn rejects(edit: impl Fn(String) -> String, expect: &[&str]) {
    let tmp = tempfile::tempdir().unwrap();
    let cfg = config_with(tmp.path(), edit);
    let out = recon(
        &["--config", cfg.to_str().unwrap()],
        &tmp.path().join("cache"),
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "accepted a bad config: {err}");
    for e in expect {
        assert!(err.contains(e), "error should mention {e:?}:\n{err}");
    }
    assert!(
        !tmp.path().join("out").exists(),
        "output written despite the error"
    );
    assert!(
        !tmp.path().join("cache").exists(),
        "cache written despite the error"
    );
}

#[test]
fn unknown_key_is_named_with_the_allowed_ones() {
    rejects(
        |t| t.replace("iterations = 30", "iteratons = 30"),
        &["iteratons", "iterations", "lambda"],
    );
}

#[test]
fn unknown_table_is_named() {
    rejects(|t| t + "\n[colour]\nred = 1\n", &["colour"]);
}

#[test]
fn wrong_type_is_named() {
    rejects(
        |t| t.replace("iterations = 30", "iterations = \"many\""),
        &["solver.iterations", "string"],
    );
}

#[test]
fn impossible_values_are_named_with_the_allowed_range() {
    rejects(
        |t| t.replace("matrix = 16", "matrix = 15"),
        &["grid.matrix", "even"],
    );
    rejects(
        |t| t.replace("lambda = 0.01", "lambda = -1.0"),
        &["solver.lambda"],
    );
    rejects(
        |t| t.replace("p = 0.25", "p = 1.5"),
        &["trajectory.p", "(0, 1)"],
    );
    rejects(
        |t| t.replace("fov_mm = 240.0", "fov_mm = [240.0, 0.0, 240.0]"),
        &["grid.fov_mm", "positive"],
    );
    rejects(|t| t + "\n[noise]\nsnr = 0.0\n", &["noise.snr", "positive"]);
}

#[test]
fn anatomical_settings_are_checked() {
    // test-small's phantom has no proton-density twin
    rejects(
        |t| t + "\n[regulariser]\nkind = \"anatomical\"\n",
        &["regulariser.kind", "phantom.anatomy"],
    );
    rejects(
        |t| t.replace("[trajectory]", "anatomy_matrix = 32\n\n[trajectory]"),
        &["phantom.anatomy_matrix", "give phantom.anatomy"],
    );
    rejects(
        |t| t + "\n[regulariser]\nedge_threshold = 0.0\n",
        &["regulariser.edge_threshold", "(0, 1]"],
    );
    rejects(
        |t| t + "\n[regulariser]\nedge_weight = 2.0\n",
        &["regulariser.edge_weight", "[0, 1]"],
    );
    rejects(
        |t| t + "\n[regulariser]\nkind = \"tv\"\n",
        &["regulariser.kind", "uniform", "anatomical"],
    );
    rejects(
        |t| {
            t.replace(
                "supersample = 3",
                &format!(
                    "supersample = 3\nanatomy = \"{}\"\nanatomy_matrix = 17",
                    repo().join("phantoms/shepp-logan.toml").display()
                ),
            )
        },
        &["phantom.anatomy_matrix", "even"],
    );
}

#[test]
fn prior_settings_are_checked() {
    let tv =
        |t: String| t.replace("lambda = 0.01", "") + "\n[prior]\nkind = \"tv\"\nlambda = 0.001\n";
    rejects(
        |t| t.replace("lambda = 0.01", "") + "\n[prior]\nkind = \"tv\"\nlambda = -1.0\n",
        &["prior.lambda", "zero or positive"],
    );
    rejects(
        |t| t.replace("lambda = 0.01", "") + "\n[prior]\nkind = \"tv\"\nlambda = nan\n",
        &["prior.lambda"],
    );
    // lambda in both places
    rejects(
        |t| t + "\n[prior]\nkind = \"tv\"\nlambda = 0.001\n",
        &["prior.lambda", "set twice"],
    );
    rejects(
        |t| t + "\n[prior]\nkind = \"wavelets\"\n",
        &["prior.kind", "quadratic", "tv", "dtv", "wavelet"],
    );
    rejects(
        |t| {
            t.replace("lambda = 0.01", "")
                + "\n[prior]\nkind = \"wavelet\"\nlambda = 0.001\nshifts = 0\n"
        },
        &["prior.shifts", "1..=64"],
    );
    // wavelets need an axis that halves into bands of 8
    rejects(
        |t| {
            t.replace("lambda = 0.01", "")
                .replace("matrix = 16", "matrix = 14")
                + "\n[prior]\nkind = \"wavelet\"\nlambda = 0.001\n"
        },
        &["prior.kind", "\"wavelet\"", "at least 16"],
    );
    // test-small's phantom has no proton-density twin
    rejects(
        |t| t.replace("lambda = 0.01", "") + "\n[prior]\nkind = \"dtv\"\n",
        &["prior.kind", "\"dtv\" needs a reference", "phantom.anatomy"],
    );
    rejects(|t| tv(t) + "eta = 0.0\n", &["prior.eta", "positive"]);
    // an algorithm that cannot handle the prior, either way
    rejects(
        |t| tv(t).replace("[solver]", "[solver]\nalgorithm = \"cg\""),
        &["solver.algorithm", "\"cg\"", "\"admm\" or \"pdhg\""],
    );
    rejects(
        |t| t.replace("[solver]", "[solver]\nalgorithm = \"pdhg\""),
        &["solver.algorithm", "quadratic prior is solved by \"cg\""],
    );
    rejects(
        |t| tv(t).replace("[solver]", "[solver]\nalgorithm = \"fista\""),
        &["solver.algorithm", "fista", "admm"],
    );
    rejects(
        |t| tv(t).replace("[solver]", "[solver]\ninner = 0"),
        &["solver.inner"],
    );
    rejects(
        |t| tv(t).replace("[solver]", "[solver]\nrho = -1.0"),
        &["solver.rho", "positive"],
    );
    rejects(
        |t| tv(t).replace("[solver]", "[solver]\nrelaxation = 2.0"),
        &["solver.relaxation", "[1, 2)"],
    );
    // the anatomical W belongs to the quadratic prior
    rejects(
        |t| tv(t) + "\n[regulariser]\nkind = \"anatomical\"\n",
        &["regulariser.kind", "prior.kind = \"dtv\""],
    );
}

#[test]
fn unknown_voxel_basis_lists_the_bases() {
    rejects(
        |t| t.replace("[engine]", "[engine]\nbasis = \"sinc\""),
        &["engine.basis", "sinc", "box", "delta"],
    );
}

#[test]
fn unknown_trajectory_kind_lists_the_kinds() {
    rejects(
        |t| t.replace("kind = \"tpi\"", "kind = \"rosette\""),
        &["rosette", "radial", "stack-of-spirals", "tpi", "cartesian"],
    );
}

#[test]
fn missing_phantom_file_is_named() {
    rejects(
        |t| t.replace("shepp-logan.toml", "no-such-phantom.toml"),
        &["phantom.file", "no-such-phantom.toml"],
    );
}

#[test]
fn malformed_toml_is_reported() {
    rejects(|t| t.replace("[solver]", "[solver"), &["config"]);
}
