//! The README's own-data example, run as written: its Python block writes a
//! scan file with h5py, its command reconstructs it. The example cannot rot
//! without this test failing.

use crate::common;

use common::*;

/// The fenced block of `lang` inside the README's own-data example.
fn block(readme: &str, lang: &str) -> String {
    let start = readme
        .find("<!-- own-data example")
        .expect("the README marks its own-data example");
    let end = readme[start..]
        .find("<!-- end of the own-data example -->")
        .expect("the example's end marker")
        + start;
    let example = &readme[start..end];
    let fence = format!("```{lang}\n");
    let from = example
        .find(&fence)
        .unwrap_or_else(|| panic!("a {lang} block"))
        + fence.len();
    let to = example[from..].find("```").expect("the block's end") + from;
    example[from..to].to_string()
}

#[test]
fn the_readmes_own_data_example_runs_as_written() {
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let (python, command) = (block(&readme, "python"), block(&readme, "sh"));
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("example.py"), &python).unwrap();
    let o = std::process::Command::new("python3")
        .arg("example.py")
        .current_dir(tmp.path())
        .output()
        .expect("run python3");
    assert!(
        o.status.success(),
        "the README's Python example: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    // The command as written, with the binary under test for
    // target/release/recon.
    let words: Vec<&str> = command.split_whitespace().collect();
    assert_eq!(words[0], "target/release/recon", "{command}");
    let o = std::process::Command::new(recon_bin())
        .args(&words[1..])
        .current_dir(tmp.path())
        .env("HDF5_USE_FILE_LOCKING", "FALSE")
        .env("RECON_CACHE_DIR", tmp.path().join("cache"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{command}: {}", stderr(&o));
    let out = tmp.path().join("out");
    for f in ["recon.h5", "recon.nii", "montage.png", "report.json"] {
        assert!(out.join(f).exists(), "{f}");
    }
    // No noise data: the noise level is unknown, not 0.
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(stdout.contains("noise sigma unknown"), "{stdout}");
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
    assert!(r["noise_sigma"].is_null(), "{}", r["noise_sigma"]);
    // The blob's image: brightest at the centre of the 64 x 64 grid.
    let image = recon_h5_magnitudes(tmp.path(), "recon");
    assert_eq!(image.len(), 64 * 64);
    let peak = (0..image.len())
        .max_by(|&a, &b| image[a].total_cmp(&image[b]))
        .unwrap();
    let (x, y) = (peak % 64, peak / 64);
    assert!(
        (31..=33).contains(&x) && (31..=33).contains(&y),
        "peak at ({x}, {y})"
    );
}
