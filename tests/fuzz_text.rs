//! A seeded mutation fuzzer for the formats recon parses in-process:
//! Parboil mri-q inputs, configs, command-line settings and phantom TOML,
//! 1500 mutants each
//! (byte-level mutations, and line-aware TOML mutations: odd values,
//! deleted and repeated lines, misspelt keys, flipped characters),
//! asserting no panic and that accepted inputs give finite results.
//! fuzz_hdf5.rs and fuzz_ismrmrd.rs cover the HDF5 formats.

use crate::common;

use common::{mutate_bytes, repo, Rng};
use recon_core::{Complex, Grid};

/// Mutants per format.
const TEXT_CASES: usize = 1500;

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
    // Each engine's keys spelled out, so that mutations reach them.
    for (name, engine) in [
        ("test-small", "kind = \"nufft\"\ntolerance = 1e-6\n"),
        ("sodium", ""),
        (
            "shepp-logan",
            "kind = \"exact\"\nvariant = 5\nper_thread = 4\nblock = 256\n",
        ),
    ] {
        let base = std::fs::read_to_string(repo().join(format!("configs/{name}.toml")))
            .unwrap()
            .replace(
                "../phantoms/",
                &format!("{}/", repo().join("phantoms").display()),
            )
            .replace("[engine]\n", &format!("[engine]\n{engine}"));
        for i in 0..TEXT_CASES / 3 {
            let text = mutate_toml(&base, &mut rng);
            let path = tmp.path().join(format!("{name}-{i}.toml"));
            std::fs::write(&path, &text).unwrap();
            tally.case(
                || format!("config {name} case {i}:\n{text}"),
                || {
                    recon::config::Config::parse(&text)?.validate()?;
                    // load: also the phantoms the config names.
                    recon::load_config(&path, None)
                },
                |_| {},
            );
        }
    }
    tally.report("configs");
}

#[test]
fn fuzz_scan_selections() {
    // A config choosing images of the multi-slice, multi-contrast ISMRMRD
    // fixture (read once, in-process), mutated: its selection keys checked
    // against the file's images, and the scan narrowed to them.
    common::no_hdf5_locking();
    let fixture = repo().join("tests/fixtures/multislice-2contrasts.ismrmrd.h5");
    let scan =
        recon_io::ismrmrd::read_ismrmrd(&fixture, recon_io::ismrmrd::Units::Normalized, false)
            .unwrap();
    let base = format!(
        "[scan]\nfile = \"{}\"\nslices = [0, 2]\ncontrasts = [1]\nphases = [0]\nrepetitions = [0]\nsets = [0]\n\n\
         [solver]\niterations = 5\nlambda = 0.01\n\n[output]\ndir = \"out\"\n",
        fixture.display()
    );
    let mut rng = Rng::new(100);
    let mut tally = Tally::default();
    for i in 0..TEXT_CASES / 3 {
        let text = mutate_toml(&base, &mut rng);
        tally.case(
            || format!("selection case {i}:\n{text}"),
            || {
                let cfg = recon::config::Config::parse(&text)?;
                cfg.validate()?;
                let kind = recon_pipeline::Kind::Ismrmrd;
                let with = cfg.scan.is_some().then(|| (kind, scan.clone()));
                recon::config::with_scan(std::path::Path::new("fuzz.toml"), cfg, with)
            },
            |l| {
                if let recon::config::Source::Scan(s) = &l.source {
                    assert!(s.images() >= 1 && s.images() <= 6);
                }
            },
        );
    }
    tally.report("scan selections");
}

#[test]
fn fuzz_nifti_references() {
    // A small valid NIfTI reference (`prior.reference`), mutated: most
    // mutations aimed at its 348-byte header (dims, datatype, offsets,
    // codes, transforms). Read in-process: refused or accepted with finite
    // values and an invertible transform, never a panic.
    use ndarray::ShapeBuilder;
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().join("base.nii");
    let values: Vec<f32> = (0..6 * 5 * 4).map(|v| v as f32 * 0.5).collect();
    let header = nifti::NiftiHeader {
        pixdim: [-1.0, 2.0, 2.0, 3.0, 1.0, 1.0, 1.0, 1.0],
        xyzt_units: 2,
        qform_code: 1,
        sform_code: 1,
        quatern_c: 0.3,
        srow_x: [2.0, 0.0, 0.0, -6.0],
        srow_y: [0.0, 2.0, 0.0, -5.0],
        srow_z: [0.0, 0.0, 3.0, -6.0],
        ..nifti::NiftiHeader::default()
    };
    let array = ndarray::ArrayView3::from_shape((6, 5, 4).f(), &values).unwrap();
    nifti::writer::WriterOptions::new(&base)
        .reference_header(&header)
        .write_nifti(&array)
        .unwrap();
    let bytes = std::fs::read(&base).unwrap();
    recon_io::nifti::read_nifti(&base).unwrap();
    let mut rng = Rng::new(348);
    let mut tally = Tally::default();
    for i in 0..TEXT_CASES / 3 {
        let (b, what) = mutate_bytes(&bytes, &mut rng, Some(0..348));
        let path = tmp.path().join(format!("m{i}.nii"));
        std::fs::write(&path, &b).unwrap();
        tally.case(
            || format!("NIfTI case {i}: {what}"),
            || recon_io::nifti::read_nifti(&path),
            |r| {
                assert!(r.values.iter().all(|v| v.is_finite()));
                assert!(r.inverse().is_some());
            },
        );
    }
    tally.report("NIfTI references");
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

#[test]
fn fuzz_command_line_settings() {
    // `--set section.key=value` pairs (as the flags make them too) laid
    // over a config: real keys, misspelt and cut ones, odd values, and
    // pairs without `=`; composed, parsed and checked in-process.
    const KEYS: [&str; 14] = [
        "solver.lambda",
        "solver.iterations",
        "solver.stack",
        "prior.kind",
        "engine.threads",
        "engine.device",
        "engine.precision",
        "sense.maps",
        "scan.slices",
        "output.dir",
        "grid.matrix",
        "solver",
        "solver.lambda.x",
        ".lambda",
    ];
    const VALUES: [&str; 14] = [
        "0.1", "-1", "nan", "1e308", "60", "0", "tv", "\"cuda\"", "espirit", "[0, 2]", "[", "true",
        "", "x=y",
    ];
    let base = std::fs::read_to_string(repo().join("configs/test-small.toml"))
        .unwrap()
        .replace(
            "../phantoms/",
            &format!("{}/", repo().join("phantoms").display()),
        );
    let mut rng = Rng::new(101);
    let mut tally = Tally::default();
    for i in 0..TEXT_CASES / 3 {
        let mut set = Vec::new();
        for _ in 0..1 + rng.below(3) {
            let mut key = KEYS[rng.below(KEYS.len())].to_string();
            if rng.below(5) == 0 {
                // A character dropped or doubled.
                let at = rng.below(key.len());
                match rng.below(2) {
                    0 => drop(key.remove(at)),
                    _ => key.insert(at, key.as_bytes()[at] as char),
                }
            }
            let value = VALUES[rng.below(VALUES.len())];
            set.push(match rng.below(8) {
                0 => key,
                _ => format!("{key}={value}"),
            });
        }
        let settings = recon::config::Settings { scan: None, set };
        tally.case(
            || format!("settings case {i}: {:?}", settings.set),
            || -> recon_pipeline::Result<()> {
                let text = settings.compose(&base)?;
                recon::config::Config::parse_without_lines(&text)?.validate()
            },
            |_| {},
        );
    }
    tally.report("command-line settings");
}
