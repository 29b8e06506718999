//! Records the commit recon is built from (`RECON_COMMIT`, with `+changes`
//! when tracked files differ from it; "unknown" outside a git checkout),
//! for the provenance every run writes.

fn main() {
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    let commit = match git(&["rev-parse", "HEAD"]) {
        Some(c) => {
            // --no-optional-locks: status must not refresh .git/index, which
            // would make the next build (the Python extension's) run this
            // script and compile the crate again.
            let dirty = git(&[
                "--no-optional-locks",
                "status",
                "--porcelain",
                "--untracked-files=no",
            ])
            .is_some_and(|s| !s.is_empty());
            format!("{c}{}", if dirty { "+changes" } else { "" })
        }
        None => "unknown".to_string(),
    };
    println!("cargo:rustc-env=RECON_COMMIT={commit}");
    for f in ["HEAD", "index"] {
        println!("cargo:rerun-if-changed=../../.git/{f}");
    }
}
