//! A seeded mutation fuzzer for every input format recon parses: scan files
//! and ISMRMRD files (HDF5), Parboil mri-q inputs, configs and phantom
//! TOML. A few hundred mutants per format (byte flips, truncation, zeroed
//! and random ranges, and format-aware changes of shapes, attributes,
//! counts and values), asserting no panic, no abort, no signal and no run
//! past a time limit: every input is either accepted or refused with an
//! error. It runs in CI in well under a minute; `fuzz/` holds cargo-fuzz
//! targets for longer runs (see the README).
//!
//! HDF5 files go through the `recon inspect` command, which reads them in a
//! child process: the HDF5 library itself may crash or hang on a damaged
//! file (recon then reports an error), and this harness checks that recon
//! never does. The text and binary formats are parsed in-process.

mod common;

use common::{recon_bin, repo, Rng};
use recon_core::{Complex, Grid, Volume};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Mutants per HDF5 format (each is one or two processes).
const HDF5_CASES: usize = 240;
/// Mutants per in-process format.
const TEXT_CASES: usize = 1500;

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        ((self.next_f64() * n as f64) as usize).min(n.saturating_sub(1))
    }
}

/// A byte-level mutation of `base`: flips, truncation, a zeroed or random
/// range, or a duplicated range, chosen by `rng`.
fn mutate_bytes(
    base: &[u8],
    rng: &mut Rng,
    focus: Option<std::ops::Range<usize>>,
) -> (Vec<u8>, String) {
    let mut b = base.to_vec();
    let len = b.len();
    let pick = |rng: &mut Rng| match &focus {
        Some(r) if rng.next_f64() < 0.7 => r.start + rng.below(r.len()),
        _ => rng.below(len),
    };
    match rng.below(5) {
        0 => {
            let n = 1 + rng.below(8);
            let mut at = Vec::new();
            for _ in 0..n {
                let i = pick(rng);
                b[i] ^= 1 << rng.below(8);
                at.push(i);
            }
            (b, format!("bit flips at {at:?}"))
        }
        1 => {
            let cut = rng.below(len);
            b.truncate(cut);
            (b, format!("truncated to {cut} bytes"))
        }
        2 => {
            let i = pick(rng);
            let n = (1 + rng.below(512)).min(len - i);
            b[i..i + n].fill(0);
            (b, format!("bytes {i}..{} zeroed", i + n))
        }
        3 => {
            let i = pick(rng);
            let n = (1 + rng.below(64)).min(len - i);
            for v in &mut b[i..i + n] {
                *v = rng.below(256) as u8;
            }
            (b, format!("bytes {i}..{} random", i + n))
        }
        _ => {
            let i = pick(rng);
            let n = (1 + rng.below(256)).min(len - i);
            let chunk = b[i..i + n].to_vec();
            let j = pick(rng);
            let m = n.min(len - j);
            b[j..j + m].copy_from_slice(&chunk[..m]);
            (b, format!("bytes {i}..{} copied to {j}", i + n))
        }
    }
}

/// What `recon inspect` did with a file.
#[derive(Debug, PartialEq)]
enum Outcome {
    Accepted,
    Refused,
    /// Refused because the HDF5 library crashed or hung in the reader process.
    Contained,
}

/// Runs `recon inspect` on `file`; panics (failing the test) on a panic,
/// a signal, an unexpected exit status or a run past the limit.
fn inspect(file: &Path, what: &str) -> Outcome {
    // RECON_FUZZ_KEEP=DIR keeps a copy of every case there, to reproduce one.
    if let Some(keep) = std::env::var_os("RECON_FUZZ_KEEP") {
        let name = what.replace(|c: char| !c.is_ascii_alphanumeric(), "_");
        let _ = std::fs::copy(file, Path::new(&keep).join(format!("{name}.h5")));
    }
    let mut child = Command::new(recon_bin())
        .arg("inspect")
        .arg(file)
        .env("HDF5_USE_FILE_LOCKING", "FALSE")
        .env("RECON_READ_TIMEOUT_S", "3")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut err, &mut s);
        s
    });
    // The reader's own limit is 3 s (a healthy read of these files takes
    // milliseconds; HDF5 loops forever on some); recon must end within 30.
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if start.elapsed() > Duration::from_secs(30) {
            let _ = child.kill();
            panic!("{what}: recon inspect ran past 30 s");
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    let err = reader.join().unwrap();
    assert!(!err.contains("panicked"), "{what}: recon panicked:\n{err}");
    match status.code() {
        Some(0) => Outcome::Accepted,
        Some(1) if err.contains("the reader crashed") || err.contains("did not finish within") => {
            Outcome::Contained
        }
        Some(1) => {
            assert!(err.starts_with("error: "), "{what}: {err}");
            // The reader's own panics would show as a failed reader.
            assert!(
                !err.contains("exit status Some(101)"),
                "{what}: the reader panicked:\n{err}"
            );
            Outcome::Refused
        }
        _ => panic!("{what}: recon inspect ended with {status:?}:\n{err}"),
    }
}

/// Runs `cases` (file, description) through `recon inspect` on two threads.
fn run_hdf5_cases(name: &str, cases: Vec<(PathBuf, String)>) {
    let cases = std::sync::Mutex::new(cases.into_iter());
    let counts = std::sync::Mutex::new([0usize; 3]);
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| loop {
                let next = cases.lock().unwrap().next();
                let Some((file, what)) = next else { break };
                let o = inspect(&file, &format!("{name}: {what}"));
                counts.lock().unwrap()[o as usize] += 1;
                let _ = std::fs::remove_file(&file);
            });
        }
    });
    let [a, r, c] = *counts.lock().unwrap();
    println!("{name}: {a} accepted, {r} refused with an error, {c} refused after HDF5 crashed or hung in the reader");
    assert!(
        r > 0,
        "{name}: no mutant was refused: the mutations do nothing"
    );
}

/// A small valid scan file with truth and anatomy.
fn base_scan(dir: &Path) -> PathBuf {
    let grid = Grid::new([8, 8, 8], [200.0; 3]).unwrap();
    let mut rng = Rng::new(11);
    let traj = common::random_traj(&grid, 200, &mut rng);
    let ag = Grid::new([4, 6, 8], [220.0, 210.0, 200.0]).unwrap();
    let scan = recon_io::scan::Scan {
        grid,
        data: rng.complex(200),
        traj,
        truth: Some((0..grid.len()).map(|i| i as f64).collect()),
        anatomy: Some(Volume::new(ag, (0..ag.len()).map(|i| i as f64).collect()).unwrap()),
    };
    let path = dir.join("base.h5");
    recon_io::scan::write_scan(&path, &scan).unwrap();
    // The base itself is accepted.
    assert_eq!(
        recon_io::scan::read_scan(&path, false).unwrap().traj.len(),
        200
    );
    path
}

/// Format-aware changes of a scan file: shapes, types, attributes, values.
fn structured_scan_mutants(dir: &Path, base: &Path) -> Vec<(PathBuf, String)> {
    use recon_io::hdf5;
    type Edit = Box<dyn Fn(&hdf5::File)>;
    let set_attr = |group: &'static str, name: &'static str, v: Vec<f64>| -> Edit {
        Box::new(move |f: &hdf5::File| {
            let g = f.group(group).unwrap();
            g.delete_attr(name).unwrap();
            g.new_attr::<f64>()
                .shape([v.len()])
                .create(name)
                .unwrap()
                .write_raw(&v)
                .unwrap();
        })
    };
    let set_imatrix = |v: Vec<i64>| -> Edit {
        Box::new(move |f: &hdf5::File| {
            let g = f.group("kspace").unwrap();
            g.delete_attr("matrix").unwrap();
            g.new_attr::<i64>()
                .shape([v.len()])
                .create("matrix")
                .unwrap()
                .write_raw(&v)
                .unwrap();
        })
    };
    let replace = |name: &'static str, shape: Vec<usize>, value: f32| -> Edit {
        Box::new(move |f: &hdf5::File| {
            f.unlink(name).unwrap();
            let n: usize = shape.iter().product();
            f.new_dataset::<f32>()
                .shape(shape.clone())
                .create(name)
                .unwrap()
                .write_raw(&vec![value; n])
                .unwrap();
        })
    };
    let edits: Vec<(&str, Edit)> = vec![
        ("matrix odd", set_imatrix(vec![7, 8, 8])),
        ("matrix negative", set_imatrix(vec![-8, 8, 8])),
        ("matrix huge", set_imatrix(vec![1 << 40, 1 << 40, 1 << 40])),
        ("matrix two values", set_imatrix(vec![8, 8])),
        (
            "matrix as floats",
            set_attr("kspace", "matrix", vec![8.5, 8.0, 8.0]),
        ),
        (
            "fov NaN",
            set_attr("kspace", "fov_mm", vec![f64::NAN, 200.0, 200.0]),
        ),
        (
            "fov negative",
            set_attr("kspace", "fov_mm", vec![-200.0, 200.0, 200.0]),
        ),
        ("fov zero", set_attr("kspace", "fov_mm", vec![0.0; 3])),
        (
            "fov four values",
            set_attr("kspace", "fov_mm", vec![200.0; 4]),
        ),
        (
            "trajectory 4 columns",
            replace("kspace/trajectory", vec![200, 4], 0.1),
        ),
        (
            "trajectory 1-D",
            replace("kspace/trajectory", vec![600], 0.1),
        ),
        (
            "trajectory empty",
            replace("kspace/trajectory", vec![0, 3], 0.1),
        ),
        (
            "trajectory shorter",
            replace("kspace/trajectory", vec![199, 3], 0.1),
        ),
        (
            "trajectory beyond Nyquist",
            replace("kspace/trajectory", vec![200, 3], 9.0),
        ),
        (
            "trajectory NaN",
            replace("kspace/trajectory", vec![200, 3], f32::NAN),
        ),
        (
            "data infinite",
            replace("kspace/data", vec![200, 2], f32::INFINITY),
        ),
        ("data 3 columns", replace("kspace/data", vec![200, 3], 1.0)),
        (
            "truth wrong shape",
            replace("reference/truth", vec![8, 8, 6], 1.0),
        ),
        (
            "truth NaN",
            replace("reference/truth", vec![8, 8, 8], f32::NAN),
        ),
        (
            "anatomy odd",
            replace("reference/anatomy", vec![3, 6, 8], 1.0),
        ),
        ("anatomy 2-D", replace("reference/anatomy", vec![8, 8], 1.0)),
        (
            "anatomy huge",
            replace("reference/anatomy", vec![2, 2, 4096], 1.0),
        ),
        (
            "data as float64",
            Box::new(|f: &hdf5::File| {
                f.unlink("kspace/data").unwrap();
                f.new_dataset::<f64>()
                    .shape([200, 2])
                    .create("kspace/data")
                    .unwrap()
                    .write_raw(&[1.0f64; 400])
                    .unwrap();
            }),
        ),
        (
            "no data",
            Box::new(|f: &hdf5::File| f.unlink("kspace/data").unwrap()),
        ),
        (
            "no kspace",
            Box::new(|f: &hdf5::File| f.unlink("kspace").unwrap()),
        ),
        (
            "trajectory declared 2^36 rows",
            Box::new(|f: &hdf5::File| {
                f.unlink("kspace/trajectory").unwrap();
                f.new_dataset::<f32>()
                    .chunk([1024, 3])
                    .shape([1usize << 36, 3])
                    .create("kspace/trajectory")
                    .unwrap();
            }),
        ),
        (
            "both declared 2^36 rows",
            Box::new(|f: &hdf5::File| {
                for (name, w) in [("kspace/trajectory", 3), ("kspace/data", 2)] {
                    f.unlink(name).unwrap();
                    f.new_dataset::<f32>()
                        .chunk([1024, w])
                        .shape([1usize << 36, w])
                        .create(name)
                        .unwrap();
                }
            }),
        ),
    ];
    edits
        .into_iter()
        .enumerate()
        .map(|(i, (what, edit))| {
            let p = dir.join(format!("structured-{i}.h5"));
            std::fs::copy(base, &p).unwrap();
            let f = hdf5::File::open_rw(&p).unwrap();
            edit(&f);
            f.close().unwrap();
            (p, what.to_string())
        })
        .collect()
}

#[test]
fn fuzz_scan_files() {
    let tmp = tempfile::tempdir().unwrap();
    let base = base_scan(tmp.path());
    assert_eq!(inspect(&base, "base scan file"), Outcome::Accepted);
    let bytes = std::fs::read(&base).unwrap();
    let mut rng = Rng::new(2026);
    let mut cases = structured_scan_mutants(tmp.path(), &base);
    for i in cases.len()..HDF5_CASES {
        let (b, what) = mutate_bytes(&bytes, &mut rng, None);
        let p = tmp.path().join(format!("m{i}.h5"));
        std::fs::write(&p, b).unwrap();
        cases.push((p, format!("case {i}: {what}")));
    }
    run_hdf5_cases("scan files", cases);
}

#[test]
fn fuzz_ismrmrd_files() {
    let tmp = tempfile::tempdir().unwrap();
    let fixture = repo().join("tests/fixtures/test-small.ismrmrd.h5");
    assert_eq!(inspect(&fixture, "the ISMRMRD fixture"), Outcome::Accepted);
    let bytes = std::fs::read(&fixture).unwrap();
    // Aim most mutations at the XML header (matrix, FOV) and the
    // acquisitions' heap at the end of the file.
    let xml = bytes
        .windows(14)
        .position(|w| w == b"<ismrmrdHeader")
        .expect("the fixture holds its XML header");
    let mut rng = Rng::new(2027);
    let mut cases = Vec::new();
    for i in 0..HDF5_CASES {
        let focus = if i % 2 == 0 {
            xml..(xml + 2048).min(bytes.len())
        } else {
            bytes.len() / 2..bytes.len()
        };
        let (b, what) = mutate_bytes(&bytes, &mut rng, Some(focus));
        let p = tmp.path().join(format!("m{i}.h5"));
        std::fs::write(&p, b).unwrap();
        cases.push((p, format!("case {i}: {what}")));
    }
    // Matrix sizes in the XML: digits replaced, so the header stays XML.
    let digits: Vec<usize> = (xml..(xml + 4096).min(bytes.len()))
        .filter(|&i| bytes[i].is_ascii_digit())
        .collect();
    for (j, v) in [b'0', b'9', b'-', b'.', b'e', b' '].iter().enumerate() {
        for k in 0..6 {
            let mut b = bytes.clone();
            let at = digits[(j * 7 + k * 13) % digits.len()];
            b[at] = *v;
            let p = tmp.path().join(format!("xml{j}-{k}.h5"));
            std::fs::write(&p, b).unwrap();
            cases.push((p, format!("XML byte {at} set to {:?}", *v as char)));
        }
    }
    run_hdf5_cases("ISMRMRD files", cases);
}

/// Counts the in-process cases accepted and refused; a panic fails the
/// test, naming the case.
#[derive(Default)]
struct Tally {
    accepted: usize,
    refused: usize,
}

impl Tally {
    /// Runs one case: `f` returns the parser's result, and `check` what an
    /// accepted input must satisfy.
    fn case<T, E: std::fmt::Display>(
        &mut self,
        what: impl Fn() -> String,
        f: impl FnOnce() -> Result<T, E>,
        check: impl FnOnce(T),
    ) {
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| match f() {
            Ok(v) => {
                check(v);
                true
            }
            Err(e) => {
                assert!(!e.to_string().is_empty());
                false
            }
        }));
        match r {
            Ok(true) => self.accepted += 1,
            Ok(false) => self.refused += 1,
            Err(_) => panic!("{} panicked", what()),
        }
    }

    fn report(&self, name: &str) {
        println!(
            "{name}: {} accepted, {} refused",
            self.accepted, self.refused
        );
        assert!(
            self.accepted > 0 && self.refused > 0,
            "{name}: the mutations should give both"
        );
    }
}

/// A small valid Parboil mri-q input.
fn parboil_input(rng: &mut Rng, num_k: usize, num_x: usize) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(&(num_k as i32).to_le_bytes());
    b.extend_from_slice(&(num_x as i32).to_le_bytes());
    for _ in 0..(5 * num_k + 3 * num_x) {
        b.extend_from_slice(&(rng.sym() as f32).to_le_bytes());
    }
    b
}

#[test]
fn fuzz_parboil_inputs() {
    let mut rng = Rng::new(7);
    let base = parboil_input(&mut rng, 40, 16);
    recon_parboil::parse_input(&base, "base", None).unwrap();
    let cpu = recon_core::CpuBackend::<f64>::new();
    let mut tally = Tally::default();
    for i in 0..TEXT_CASES {
        let (mut b, what) = mutate_bytes(&base, &mut rng, Some(0..8));
        if i % 5 == 0 && b.len() >= 8 {
            // Counts and values chosen to overflow, mislead or be NaN.
            let v = [
                i32::MAX,
                i32::MIN,
                -1,
                0,
                1,
                41,
                1 << 28,
                f32::NAN.to_bits() as i32,
                f32::INFINITY.to_bits() as i32,
            ][rng.below(9)];
            let at = 4 * rng.below(b.len() / 4);
            b[at..at + 4].copy_from_slice(&v.to_le_bytes());
        }
        let samples = [None, Some(0), Some(1), Some(usize::MAX)][rng.below(4)];
        tally.case(
            || format!("Parboil case {i} ({what}, samples {samples:?})"),
            || recon_parboil::parse_input(&b, "fuzz", samples),
            |input| {
                let q = recon_parboil::compute_q(&cpu, &input, &mut |_, _| {}).unwrap();
                // The parser's checks keep Q finite.
                assert!(q
                    .iter()
                    .all(|c: &Complex<f64>| c.re.is_finite() && c.im.is_finite()));
                let out = recon_parboil::output_bytes(&q);
                recon_parboil::parse_output(&out, "out").unwrap();
            },
        );
        // Output files too.
        let _ = recon_parboil::parse_output(&b, "fuzz output");
    }
    tally.report("Parboil inputs");
}

/// Line-aware mutations of a TOML text: values replaced by odd tokens,
/// lines deleted or repeated, keys misspelt, characters flipped, cut short.
fn mutate_toml(base: &str, rng: &mut Rng) -> String {
    const TOKENS: [&str; 22] = [
        "0",
        "-1",
        "1",
        "3",
        "1e308",
        "-1e308",
        "1e-320",
        "nan",
        "inf",
        "-inf",
        "18446744073709551615",
        "9223372036854775807",
        "4194304",
        "\"x\"",
        "[]",
        "[1, 2]",
        "[0, 0, 0]",
        "[1e300, 1e300, 1e300]",
        "true",
        "{}",
        "\"\"",
        "[[1]]",
    ];
    let mut lines: Vec<String> = base.lines().map(str::to_string).collect();
    for _ in 0..1 + rng.below(3) {
        if lines.is_empty() {
            break;
        }
        let i = rng.below(lines.len());
        match rng.below(6) {
            0 | 1 => {
                if let Some(eq) = lines[i].find('=') {
                    let t = TOKENS[rng.below(TOKENS.len())];
                    lines[i] = format!("{}= {t}", &lines[i][..eq]);
                }
            }
            2 => {
                lines.remove(i);
            }
            3 => {
                let l = lines[i].clone();
                lines.insert(i, l);
            }
            4 => {
                if let Some(eq) = lines[i].find('=') {
                    let mut key: Vec<char> = lines[i][..eq].chars().collect();
                    if !key.is_empty() {
                        let j = rng.below(key.len());
                        key[j] = (b'a' + rng.below(26) as u8) as char;
                    }
                    lines[i] =
                        format!("{}{}", key.into_iter().collect::<String>(), &lines[i][eq..]);
                }
            }
            _ => {
                let mut b = lines[i].clone().into_bytes();
                if !b.is_empty() {
                    let j = rng.below(b.len());
                    b[j] = b" =[]\"#.,-{}\n"[rng.below(12)];
                }
                lines[i] = String::from_utf8_lossy(&b).into_owned();
            }
        }
    }
    let mut text = lines.join("\n");
    if rng.below(10) == 0 {
        let cut = rng.below(text.len() + 1);
        text = String::from_utf8_lossy(&text.as_bytes()[..cut]).into_owned();
    }
    text
}

#[test]
fn fuzz_configs() {
    let tmp = tempfile::tempdir().unwrap();
    let mut rng = Rng::new(99);
    let mut tally = Tally::default();
    for name in ["test-small", "sodium", "shepp-logan"] {
        let base = std::fs::read_to_string(repo().join(format!("configs/{name}.toml")))
            .unwrap()
            .replace(
                "../phantoms/",
                &format!("{}/", repo().join("phantoms").display()),
            );
        for i in 0..TEXT_CASES / 3 {
            let text = mutate_toml(&base, &mut rng);
            let path = tmp.path().join(format!("{name}-{i}.toml"));
            std::fs::write(&path, &text).unwrap();
            tally.case(
                || format!("config {name} case {i}:\n{text}"),
                || {
                    recon::config::Config::parse(&text)?.validate()?;
                    // load: also the phantoms the config names.
                    recon::config::load(&path, None)
                },
                |_| {},
            );
        }
    }
    tally.report("configs");
}

#[test]
fn fuzz_phantoms() {
    let mut rng = Rng::new(5);
    let grid = Grid::new([4, 4, 4], [240.0; 3]).unwrap();
    let mut tally = Tally::default();
    for name in ["shepp-logan", "sodium-brain", "sodium-brain-pd"] {
        let base = std::fs::read_to_string(repo().join(format!("phantoms/{name}.toml"))).unwrap();
        for i in 0..TEXT_CASES / 3 {
            let text = mutate_toml(&base, &mut rng);
            tally.case(
                || format!("phantom {name} case {i}:\n{text}"),
                || recon_synth::Phantom::parse(&text, "fuzz"),
                |p| {
                    // Accepted phantoms give finite data and truth.
                    let d = p.kspace(&grid, &[[0.0; 3], [1.5, -2.0, 0.5], [2.0, 2.0, -2.0]]);
                    assert!(
                        d.iter().all(|c| c.re.is_finite() && c.im.is_finite()),
                        "{d:?}"
                    );
                    assert!(p.rasterise(&grid, 1).iter().all(|v| v.is_finite()));
                },
            );
        }
    }
    tally.report("phantoms");
}
