//! For tests: kernels of `kernels/*.cu` built with the host's C++ compiler
//! against `emulate/gpu.h` (a block's threads as std::threads) and run on
//! the CPU, so that their index logic is checked where no GPU is. Each
//! program prints lines of words ending in a relative error, which
//! [`check`] holds to a limit.

use std::path::Path;
use std::process::Command;

/// Builds `emulate/<program>` with `defines` (`-D` arguments) and runs it:
/// each printed line's words before its last, and its last as a number.
/// `None` (after saying so) where the host has no C++ compiler.
fn run(program: &str, defines: &[String]) -> Option<Vec<(String, f64)>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("emulate");
    let cxx = std::env::var("CXX").unwrap_or_else(|_| "c++".into());
    if Command::new(&cxx).arg("--version").output().is_err() {
        println!("skipped: no C++ compiler ({cxx}) to build the emulated kernels");
        return None;
    }
    // A folder of its own per build (tests run side by side), removed after.
    let out = std::env::temp_dir().join(format!(
        "recon-emulate-{}-{program}-{}",
        std::process::id(),
        defines.join("-").replace(['"', '/', '=', '.'], "_")
    ));
    std::fs::create_dir_all(&out).unwrap();
    let exe = out.join("emulation");
    let built = Command::new(&cxx)
        .args(["-std=c++20", "-O1", "-pthread"])
        .args(defines.iter().map(|d| format!("-D{d}")))
        .arg(dir.join(program))
        .arg("-o")
        .arg(&exe)
        .output()
        .unwrap();
    assert!(
        built.status.success(),
        "{program} {defines:?}: {}",
        String::from_utf8_lossy(&built.stderr)
    );
    let ran = Command::new(&exe).output().unwrap();
    std::fs::remove_dir_all(&out).ok();
    assert!(
        ran.status.success(),
        "{program} {defines:?}: the emulation failed"
    );
    let text = String::from_utf8(ran.stdout).unwrap();
    Some(
        text.lines()
            .map(|line| {
                let (what, err) = line.rsplit_once(' ').unwrap();
                (what.to_string(), err.parse().unwrap())
            })
            .collect(),
    )
}

/// Runs `emulate/<program>` with `defines` (see [`run`]) and asserts that
/// it printed `lines` lines, each error under `limit`; `label` names the
/// case in messages. Returns false, having said so, where the host has no
/// C++ compiler.
pub(crate) fn check(
    program: &str,
    defines: &[String],
    label: &str,
    lines: usize,
    limit: f64,
) -> bool {
    let Some(errors) = run(program, defines) else {
        return false;
    };
    for (what, err) in &errors {
        println!("{label}, {what}: {err:.2e}");
        assert!(*err < limit, "{label}, {what}: {err:e}");
    }
    assert_eq!(errors.len(), lines, "{label}: {errors:?}");
    true
}
