//! Helpers shared by the test files: small problems with fixed seeds.
#![allow(dead_code)]

use recon_core::{Complex, Grid};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The repository root (`RECON_REPO` on the GPU machine, where the build's
/// paths do not exist).
pub fn repo() -> PathBuf {
    std::env::var_os("RECON_REPO")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../.."))
}

/// The `recon` binary (`RECON_BIN` on the GPU machine).
pub fn recon_bin() -> PathBuf {
    std::env::var_os("RECON_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_recon")))
}

/// Runs `recon` with its Q cache in `cache`.
///
/// HDF5 opens files without close-on-exec, so a `recon` started by one test
/// inherits the descriptors (and flock locks) of files another test has open
/// at that moment, and a third process then finds them "locked". Processes
/// started by tests therefore run without HDF5 file locking.
pub fn recon(args: &[&str], cache: &Path) -> Output {
    Command::new(recon_bin())
        .args(args)
        .env("HDF5_USE_FILE_LOCKING", "FALSE")
        .env("RECON_CACHE_DIR", cache)
        .output()
        .expect("run recon")
}

/// Turns HDF5's file locking off in this test process too (see [`recon`]):
/// a file it writes and then opens may be locked by a child process of
/// another test that inherited the descriptor in between. Call it before
/// the test's first HDF5 call.
pub fn no_hdf5_locking() {
    // HDF5 reads the variable at each file open; every test sets the same value.
    std::env::set_var("HDF5_USE_FILE_LOCKING", "FALSE");
}

/// A tiny deterministic pseudo-random stream (SplitMix64), so tests need no RNG crate.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }
    pub fn next_f64(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
    }
    /// Uniform in [-1, 1).
    pub fn sym(&mut self) -> f64 {
        2.0 * self.next_f64() - 1.0
    }
    /// Uniform in 0 .. n.
    pub fn below(&mut self, n: usize) -> usize {
        ((self.next_f64() * n as f64) as usize).min(n.saturating_sub(1))
    }
    pub fn complex(&mut self, n: usize) -> Vec<Complex<f64>> {
        (0..n)
            .map(|_| Complex::new(self.sym(), self.sym()))
            .collect()
    }
}

/// Random k-space samples inside Nyquist.
pub fn random_traj(grid: &Grid, m: usize, rng: &mut Rng) -> Vec<[f64; 3]> {
    (0..m)
        .map(|_| [0, 1, 2].map(|d| rng.sym() * grid.n[d] as f64 / 2.0))
        .collect()
}

/// The GPU backend, or `None` after printing why the test is skipped: a
/// GPU test without a GPU says so and checks nothing.
pub fn gpu(options: recon_cuda::Options) -> Option<recon_cuda::CudaBackend> {
    match recon_cuda::probe() {
        Err(why) => {
            println!("skipped: no usable GPU ({why})");
            None
        }
        Ok(_) => Some(recon_cuda::CudaBackend::new(options).expect("open the GPU")),
    }
}

/// float32 values widened to float64.
pub fn up(v: &[Complex<f32>]) -> Vec<Complex<f64>> {
    v.iter()
        .map(|c| Complex::new(c.re as f64, c.im as f64))
        .collect()
}

/// float64 values rounded to float32.
pub fn down(v: &[Complex<f64>]) -> Vec<Complex<f32>> {
    v.iter()
        .map(|c| Complex::new(c.re as f32, c.im as f32))
        .collect()
}

/// Complex inner product `<a, b> = sum conj(a) b`.
pub fn inner(a: &[Complex<f64>], b: &[Complex<f64>]) -> Complex<f64> {
    a.iter().zip(b).map(|(x, y)| x.conj() * y).sum()
}

/// The explicit encoding matrix F (M x N), row-major, from its definition.
pub fn explicit_f(grid: &Grid, traj: &[[f64; 3]]) -> Vec<Complex<f64>> {
    let vox = grid.voxels();
    let mut f = Vec::with_capacity(traj.len() * grid.len());
    for k in traj {
        let phi = grid.phi(*k);
        for n in 0..grid.len() {
            let x = vox.point(n);
            let t = k[0] * x[0] + k[1] * x[1] + k[2] * x[2];
            f.push(Complex::from_polar(phi, -std::f64::consts::TAU * t));
        }
    }
    f
}

pub fn no_progress() -> impl FnMut(u64, u64) {
    |_, _| {}
}

/// The anatomical-prior fixture (tests/fixtures/prior-robustness*.toml) on
/// an `n^3` grid over 240 mm: noisy TPI data (SNR 30), the sodium truth, and
/// the proton-density reference rasterised at twice the resolution, as a
/// proton scan would be, then averaged onto the grid.
pub struct PriorFixture {
    pub grid: Grid,
    pub traj: Vec<[f64; 3]>,
    pub data: Vec<Complex<f64>>,
    pub truth: Vec<f64>,
    pub reference: Vec<f64>,
}

/// See [`PriorFixture`]; `tpi` is (cones, projections, samples).
pub fn prior_fixture(n: usize, tpi: [usize; 3], seed: u64) -> PriorFixture {
    let grid = Grid::new([n; 3], [240.0; 3]).unwrap();
    let [cones, projections, samples] = tpi;
    let traj = recon_synth::Trajectory::Tpi {
        cones,
        projections,
        samples,
        p: 0.3,
        kmax: 1.0,
    }
    .generate(&grid)
    .unwrap();
    let na = fixture_phantom("prior-robustness.toml");
    let mut data = na.kspace(&grid, &traj);
    recon_synth::add_noise(&mut data, recon_synth::Noise { snr: 30.0, seed });
    PriorFixture {
        reference: reference_on_grid(&grid, &fixture_phantom("prior-robustness-pd.toml")),
        truth: na.rasterise(&grid, 4),
        grid,
        traj,
        data,
    }
}

/// A phantom of tests/fixtures.
pub fn fixture_phantom(name: &str) -> recon_synth::Phantom {
    recon_synth::Phantom::load(&repo().join("tests/fixtures").join(name)).unwrap()
}

/// `pd` rasterised at twice `grid`'s resolution and averaged onto it.
pub fn reference_on_grid(grid: &Grid, pd: &recon_synth::Phantom) -> Vec<f64> {
    let fine = Grid::new(grid.n.map(|n| 2 * n), grid.fov_mm).unwrap();
    let v = recon_core::Volume::new(fine, pd.rasterise(&fine, 2)).unwrap();
    let mut out = vec![0.0; grid.len()];
    recon_prior::resample(&mut out, grid, &v).unwrap();
    out
}

/// Every file under `dir`, recursively (hidden ones too).
pub fn files_under(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd {
            let p = e.unwrap().path();
            if p.is_dir() {
                out.extend(files_under(&p));
            } else {
                out.push(p.display().to_string());
            }
        }
    }
    out
}

/// Starts recon, waits until stderr shows `when`, runs `act` with its
/// process id, and returns its exit status, its id and all it printed on
/// stderr.
pub fn act_when(
    args: &[&str],
    cache: &Path,
    env: &[(&str, &str)],
    when: &str,
    act: impl FnOnce(u32),
) -> (std::process::ExitStatus, u32, String) {
    use std::io::{BufRead, BufReader};
    let mut child = Command::new(recon_bin())
        .args(args)
        .env("HDF5_USE_FILE_LOCKING", "FALSE") // see common::recon
        .env("RECON_CACHE_DIR", cache)
        .envs(env.iter().copied())
        .stderr(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Read stderr to the end in a thread (a closed pipe would make recon's
    // next message fail), signalling when `when` appears.
    let stderr = BufReader::new(child.stderr.take().unwrap());
    let (tx, rx) = std::sync::mpsc::channel();
    let when = when.to_string();
    let reader = std::thread::spawn(move || {
        let mut all = String::new();
        for line in stderr.lines() {
            let line = line.unwrap();
            if line.contains(&when) {
                let _ = tx.send(());
            }
            all.push_str(&line);
            all.push('\n');
        }
        all
    });
    rx.recv_timeout(std::time::Duration::from_secs(60))
        .expect("recon never reached the point to act");
    act(child.id());
    let status = child.wait().unwrap();
    (status, child.id(), reader.join().unwrap())
}

/// Starts recon, waits until stderr shows `when`, sends `signal` (INT,
/// TERM, HUP), and returns the exit status.
pub fn interrupt(
    args: &[&str],
    cache: &Path,
    env: &[(&str, &str)],
    when: &str,
    signal: &str,
) -> std::process::ExitStatus {
    act_when(args, cache, env, when, |pid| {
        let kill = Command::new("kill")
            .args([&format!("-{signal}"), &pid.to_string()])
            .status()
            .unwrap();
        assert!(kill.success());
    })
    .0
}

/// The small test config (`configs/test-small.toml`) with `edit` applied,
/// written to `dir/config.toml`; its output folder is `dir/out`.
pub fn config_with(dir: &Path, edit: impl Fn(String) -> String) -> PathBuf {
    let text = std::fs::read_to_string(repo().join("configs/test-small.toml")).unwrap();
    let phantom = repo().join("phantoms/shepp-logan.toml");
    let text = text
        .replace(
            "../phantoms/shepp-logan.toml",
            &phantom.display().to_string().replace('\\', "/"),
        )
        .replace("../out/test-small", "out");
    let path = dir.join("config.toml");
    std::fs::write(&path, edit(text)).unwrap();
    path
}

/// Fails if `dir` holds a temporary `.partial-*` file or folder.
pub fn assert_no_partials(dir: &Path) {
    let names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        !names.iter().any(|n| n.starts_with(".partial-")),
        "{names:?}"
    );
}

/// A config reconstructing scan `file` (5 CG iterations), with output
/// folder `dir/out`.
pub fn scan_run_config(dir: &Path, file: &Path, extra: &str) -> PathBuf {
    let path = dir.join("scan.toml");
    std::fs::write(
        &path,
        format!(
            "[scan]\nfile = \"{}\"\n{extra}\n[solver]\niterations = 5\n[output]\ndir = \"out\"\n",
            file.display()
        ),
    )
    .unwrap();
    path
}

/// A process's stderr as text.
pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Fails with exit status 1 (an error, not a panic or a signal), saying
/// each of `expect`.
pub fn fails_with(o: &Output, expect: &[&str]) {
    let err = stderr(o);
    assert_eq!(o.status.code(), Some(1), "{:?}: {err}", o.status);
    assert!(!err.contains("panicked"), "{err}");
    for e in expect {
        assert!(err.contains(e), "error should mention {e:?}:\n{err}");
    }
}

/// A byte-level mutation of `base`: flips, truncation, a zeroed or random
/// range, or a duplicated range, chosen by `rng`.
pub fn mutate_bytes(
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

/// SENSE's solver problem on `b`: the data term recon-encoding's
/// `SenseTerm` over `maps` (the exact engine's F, so no NUFFT is made), F^H
/// D given on the host, the coils shared among `parts` devices (`None`: as
/// the grid merits).
#[allow(dead_code)]
pub fn sense_problem<'b, B: recon_encoding::NufftBackend>(
    b: &'b B,
    grid: &Grid,
    traj: &[[f64; 3]],
    q: &[Complex<B::Real>],
    fhd: &[Complex<B::Real>],
    maps: &[Vec<Complex<B::Real>>],
    parts: Option<usize>,
) -> recon_core::Result<recon_cg::Problem<'b, B>> {
    let t = recon_cg::Toeplitz::new(b, grid, q)?;
    let s = recon_encoding::SenseTerm::new(b, &exact(b, grid, traj), t, maps, parts)?;
    let peak = recon_cg::q_peak(grid, q)?;
    recon_cg::Problem::on_device(b, grid, peak, Box::new(s), b.upload(fhd)?)
}

/// The exact engine's plan: the reference every fast path is tested against.
pub fn exact<'b, B: recon_encoding::NufftBackend>(
    b: &'b B,
    grid: &Grid,
    traj: &[[f64; 3]],
) -> recon_encoding::Plan<'b, B> {
    recon_encoding::Plan::new(b, recon_encoding::Engine::Exact, grid, traj).unwrap()
}

/// Q by exact summation on `b`.
pub fn q<B: recon_encoding::NufftBackend>(
    b: &B,
    grid: &Grid,
    traj: &[[f64; 3]],
) -> Vec<Complex<B::Real>> {
    recon_q::compute(&exact(b, grid, traj), &mut no_progress()).unwrap()
}

/// F^H D by exact summation on `b`.
pub fn fhd<B: recon_encoding::NufftBackend>(
    b: &B,
    grid: &Grid,
    traj: &[[f64; 3]],
    data: &[Complex<f64>],
) -> Vec<Complex<B::Real>> {
    let mut out = vec![Complex::default(); grid.len()];
    exact(b, grid, traj)
        .adjoint(&mut out, data, &mut no_progress())
        .unwrap();
    out
}

/// F rho by exact summation on `b`.
pub fn forward<B: recon_encoding::NufftBackend>(
    b: &B,
    grid: &Grid,
    traj: &[[f64; 3]],
    rho: &[Complex<B::Real>],
) -> Vec<Complex<B::Real>> {
    let mut out = vec![Complex::default(); traj.len()];
    exact(b, grid, traj)
        .forward(&mut out, rho, &mut no_progress())
        .unwrap();
    out
}

/// `(F^H F + lambda W^H W) x = F^H D` by CG from Q and F^H D, lambda
/// relative to Q's peak.
#[allow(clippy::type_complexity)]
pub fn cg<B: recon_encoding::NufftBackend>(
    b: &B,
    grid: &Grid,
    q: &[Complex<B::Real>],
    fhd: &[Complex<B::Real>],
    w: &recon_core::Stencil,
    lambda: f64,
    params: &recon_cg::Params,
) -> (Vec<Complex<B::Real>>, recon_cg::Info) {
    recon_cg::Problem::new(b, grid, q, fhd)
        .unwrap()
        .solve(b, w, lambda, params, &mut |_, _| {})
        .unwrap()
}

/// Processes still reading `file` in a `recon read-input` child (orphans,
/// once their recon has ended).
pub fn readers_of(file: &Path) -> Vec<u32> {
    let want = file.as_os_str().to_string_lossy().into_owned();
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    procs
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let Ok(cmd) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
                return false;
            };
            let args: Vec<String> = cmd
                .split(|b| *b == 0)
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect();
            args.iter().any(|a| a == "read-input") && args.iter().any(|a| *a == want)
        })
        .collect()
}

/// Writes a text attribute `name` = `text` on `g` (a wrong type where a
/// number belongs, for the readers' tests).
pub fn text_attr(g: &recon_io::hdf5::Group, name: &str, text: &str) {
    let v: recon_io::hdf5::types::VarLenUnicode = text.parse().unwrap();
    g.new_attr::<recon_io::hdf5::types::VarLenUnicode>()
        .create(name)
        .unwrap()
        .write_scalar(&v)
        .unwrap();
}

/// A small Toeplitz problem of the sparse priors: Q and F^H D of random
/// samples and data on `grid`, Q's peak (ADMM's scale) and lambda at
/// `lambda_rel` of the peak of |F^H D|.
pub struct SparseProblem {
    pub grid: Grid,
    pub q: Vec<Complex<f64>>,
    pub b: Vec<Complex<f64>>,
    pub scale: f64,
    pub lambda: f64,
}

pub fn sparse_problem(grid: Grid, samples: usize, lambda_rel: f64, seed: u64) -> SparseProblem {
    let be = recon_core::CpuBackend::<f64>::new();
    let mut rng = Rng::new(seed);
    let traj = random_traj(&grid, samples, &mut rng);
    let y = rng.complex(traj.len());
    let q = q(&be, &grid, &traj);
    let b = fhd(&be, &grid, &traj, &y);
    SparseProblem {
        scale: recon_cg::q_peak(&grid, &q).unwrap(),
        lambda: lambda_rel * b.iter().map(|v| v.norm()).fold(0.0, f64::max),
        grid,
        q,
        b,
    }
}

/// How [`SparseProblem::solve`] solves.
#[derive(Clone, Copy, Debug)]
pub struct SparseCase<'a> {
    pub pdhg: bool,
    /// ADMM preconditioned by the circulant.
    pub preconditioned: bool,
    /// Directional TV with this reference and eta 0.1; else TV.
    pub reference: Option<&'a [f64]>,
}

impl SparseProblem {
    /// x from 0 on backend `be` (its precision), and what the solver did.
    pub fn solve<B: recon_core::Backend + 'static>(
        &self,
        be: &B,
        case: SparseCase<'_>,
        params: &recon_cg::SparseParams,
    ) -> (Vec<Complex<B::Real>>, recon_cg::Info) {
        use recon_core::Real;
        use recon_ops::{Compose, Directional, Gradient, LinearOp};
        let n = self.grid.n;
        let cast = |v: &[Complex<f64>]| -> Vec<Complex<B::Real>> {
            v.iter()
                .map(|c| Complex::new(B::Real::of(c.re), B::Real::of(c.im)))
                .collect()
        };
        let mut t = recon_cg::Toeplitz::new(be, &self.grid, &cast(&self.q)).unwrap();
        let mut op: Box<dyn LinearOp<B>> = match case.reference {
            Some(r) => Box::new(
                Compose::new(
                    be,
                    Directional::from_reference(be, n, r, 0.1).unwrap(),
                    Gradient::new(be, n).unwrap(),
                )
                .unwrap(),
            ),
            None => Box::new(Gradient::new(be, n).unwrap()),
        };
        let prior = recon_cg::Sparse {
            op: op.as_mut(),
            norm: &mut recon_ops::GroupNorm { components: 3 },
            lambda: self.lambda,
            gram: recon_cg::Gram::Laplacian,
        };
        let b = be.upload(&cast(&self.b)).unwrap();
        let mut x = be.zeros(self.grid.len()).unwrap();
        let info = if case.pdhg {
            recon_cg::pdhg(be, &mut t, prior, &mut x, &b, params, &mut |_, _| {}).unwrap()
        } else {
            let mut m = case.preconditioned.then(|| {
                let eig = recon_cg::toeplitz_eigenvalues(&self.grid, &self.q).unwrap();
                recon_cg::Circulant::new(be, n, &eig, 1.0).unwrap()
            });
            let pre = m.as_mut();
            recon_cg::admm(
                be,
                &mut t,
                prior,
                &mut x,
                &b,
                self.scale,
                pre,
                params,
                &mut |_, _| {},
            )
            .unwrap()
        };
        let mut out = vec![Complex::default(); self.grid.len()];
        be.download(&mut out, &x).unwrap();
        (out, info)
    }
}

/// `A = I` on the CPU in float64: the data term of denoising.
pub struct Eye(pub usize);

impl recon_cg::Normal<recon_core::CpuBackend<f64>> for Eye {
    fn len(&self) -> usize {
        self.0
    }
    fn apply(
        &mut self,
        be: &recon_core::CpuBackend<f64>,
        out: &mut Vec<Complex<f64>>,
        x: &Vec<Complex<f64>>,
    ) -> recon_core::Result<()> {
        use recon_core::Backend;
        be.copy(out, x)
    }
}
