//! The encoding operator F of one trajectory on one grid, as a plan.
//!
//! `F[m, n] = phi(k_m) exp(-i 2pi k_m . x_n)` maps voxel coefficients to
//! k-space samples (phi is the box voxel's transform, real). A [`Plan`] is
//! made once per grid and trajectory, as FINUFFT makes a plan and sets its
//! points once, and then computes, as often as asked:
//! - `Q[j] = sum_m |phi(k_m)|^2 exp(+i 2pi k_m . y_j)` on the `(2N)^3`
//!   displacement grid (`y_j = (j - N) FOV / N`, x fastest, displacement 0
//!   at index N per axis), which makes F^H F a Toeplitz product;
//! - the adjoint on the data, `F^H D[n] = sum_m phi(k_m) D_m exp(+i 2pi k_m . x_n)`;
//! - the forward model `D = F rho`;
//! - and, for the NUFFT engine, F itself as a linear operator on the
//!   device ([`Encoding`]), its normal map the Toeplitz product.
//!
//! Two engines sit behind it ([`Engine`]). The NUFFT engine (the default)
//! computes the sums by type 1 and type 2 non-uniform FFTs to a requested
//! tolerance, in O(N^3 log N + M w^3). The exact engine sums directly, in
//! O(N^3 M), through the backend's summation kernels (the book's ladder on
//! the GPU): it is the reference every fast path is tested against. The
//! NUFFT runs on the backend's device ([`NufftBackend`]: recon-nufft on the
//! CPU, recon-cuda's kernels on the GPU), in the backend's precision.

use recon_core::{Complex, Error, Grid, Progress, Real, Result};
pub use recon_nufft::{type1_coils_by_pieces, weighted, NufftBackend};

mod exact;
mod op;
mod sense;
mod stack;

pub use op::Encoding;
pub use sense::{SenseTerm, SHARE_FROM_VOXELS};
pub use stack::{batched_q, plane, Stack};

/// How the sums are computed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Engine {
    /// Non-uniform FFTs with relative L2 error below `tolerance`.
    Nufft { tolerance: f64 },
    /// Direct summation.
    Exact,
}

impl Engine {
    /// The NUFFT engine's tolerance when none is given.
    pub const DEFAULT_TOLERANCE: f64 = 1e-6;

    /// A one-line description, e.g. "nufft (tolerance 1e-6, kernel width 8)".
    pub fn describe(&self) -> String {
        match self {
            Engine::Exact => "exact summation".into(),
            Engine::Nufft { tolerance } => match recon_nufft::Kernel::for_tolerance(*tolerance) {
                Ok(k) => format!(
                    "nufft (tolerance {tolerance:e}, ES kernel width {}, beta {:.2}, upsampling 2; on the GPU at 1e-5 to 1e-3, 1.5 and a wider kernel)",
                    k.width, k.beta
                ),
                Err(_) => format!("nufft (tolerance {tolerance:e})"),
            },
        }
    }

    /// Everything that decides the engine's values, for cache keys: a Q
    /// computed by one engine (or tolerance, or kernel) is never served
    /// for another.
    pub fn id(&self) -> String {
        match self {
            Engine::Exact => format!("exact v{}", recon_core::ENGINE_VERSION),
            Engine::Nufft { tolerance } => {
                let k = recon_nufft::Kernel::for_tolerance(*tolerance);
                let (w, beta) = k.map_or((0, 0.0), |k| (k.width, k.beta));
                format!(
                    "nufft v{} tol {tolerance:e} es w {w} beta {beta:e} sigma 2 (gpu 1.5 at 1e-5 to 1e-3)",
                    recon_nufft::VERSION
                )
            }
        }
    }

    /// Checks the engine's settings for a precision of `real_bytes` bytes.
    pub fn check(&self, real_bytes: usize) -> Result<()> {
        if let Engine::Nufft { tolerance } = *self {
            recon_nufft::Kernel::for_tolerance(tolerance)?;
            if real_bytes == 4 && tolerance < 1e-6 {
                return Err(Error::Invalid {
                    what: "NUFFT tolerance",
                    reason: format!("{tolerance:e} is below what float32 reaches (1e-6)"),
                });
            }
        }
        Ok(())
    }
}

/// `Mu_m = conj(phi(k_m)) D_m = phi(k_m) D_m` (phi is real), in `T`: the
/// strengths of F^H D's sum.
pub fn mu<T: Real>(grid: &Grid, traj: &[[f64; 3]], data: &[Complex<f64>]) -> Vec<Complex<T>> {
    weighted(traj.iter().map(|k| grid.phi(*k)), data)
}

/// F for one grid and trajectory on one backend.
pub struct Plan<'b, B: NufftBackend> {
    backend: &'b B,
    engine: Engine,
    grid: Grid,
    /// Shared with the encoding operators made from the plan.
    traj: std::sync::Arc<[[f64; 3]]>,
    /// phi(k_m), real; shared as the trajectory.
    phi: std::sync::Arc<[f64]>,
    /// The NUFFT on the image grid, sign +, its points set, on the device.
    nufft: Option<B::Nufft>,
}

/// Q's plan ([`Plan::q_plan`]): the NUFFT engine's plan on the doubled
/// grid, or nothing for the exact engine.
pub struct QPlan<B: NufftBackend> {
    nufft: Option<B::Nufft>,
}

/// k in cycles/FOV to NUFFT points in radians for `grid`, `2 pi k_d / N_d`:
/// the voxel offsets `n - N/2` are then exactly the NUFFT's centred modes,
/// and the same points serve Q's doubled grid (`k / N = 2k / 2N`), whose
/// displacements `j - N` are its modes.
pub fn radians(grid: &Grid, traj: &[[f64; 3]]) -> Vec<[f64; 3]> {
    let s = grid.n.map(|n| std::f64::consts::TAU / n as f64);
    traj.iter()
        .map(|k| [k[0] * s[0], k[1] * s[1], k[2] * s[2]])
        .collect()
}

/// The engine's tolerance for the precision `T`, and a finite trajectory;
/// on a 2-D grid, every sample in the plane k_z = 0.
pub(crate) fn check_plan_inputs<T: Real>(
    engine: Engine,
    grid: &Grid,
    traj: &[[f64; 3]],
) -> Result<()> {
    engine.check(std::mem::size_of::<T>())?;
    if let Some(m) = traj.iter().position(|k| k.iter().any(|v| !v.is_finite())) {
        return Err(Error::Invalid {
            what: "trajectory",
            reason: format!("sample {m} is {:?}", traj[m]),
        });
    }
    if grid.is_2d() {
        if let Some(m) = traj.iter().position(|k| k[2] != 0.0) {
            return Err(Error::Invalid {
                what: "trajectory",
                reason: format!(
                    "a 2-D grid (matrix z = 1) is sampled at k_z = 0, but sample {m} has k_z = {}",
                    traj[m][2]
                ),
            });
        }
    }
    Ok(())
}

impl<'b, B: NufftBackend> Plan<'b, B> {
    /// Makes the plan: for the NUFFT engine, its kernel and FFT plans, and
    /// the points sorted once.
    pub fn new(backend: &'b B, engine: Engine, grid: &Grid, traj: &[[f64; 3]]) -> Result<Self> {
        check_plan_inputs::<B::Real>(engine, grid, traj)?;
        let nufft = match engine {
            Engine::Nufft { tolerance } => {
                Some(backend.nufft_plan(grid.n, tolerance, 1, &radians(grid, traj))?)
            }
            Engine::Exact => None,
        };
        Ok(Plan {
            backend,
            engine,
            grid: *grid,
            traj: traj.into(),
            phi: traj.iter().map(|k| grid.phi(*k)).collect(),
            nufft,
        })
    }

    pub fn engine(&self) -> Engine {
        self.engine
    }

    pub fn grid(&self) -> &Grid {
        &self.grid
    }

    pub fn traj(&self) -> &[[f64; 3]] {
        &self.traj
    }

    /// The trajectory and phi, shared (an operator made from the plan
    /// keeps them without a copy).
    pub fn shared(&self) -> (std::sync::Arc<[[f64; 3]]>, std::sync::Arc<[f64]>) {
        (self.traj.clone(), self.phi.clone())
    }

    /// The NUFFT plan on the image grid (None for the exact engine), and
    /// phi(k_m), the weights F^H D gives the data: what a caller needs to
    /// run the plan's type 1 itself (`recon bench-sense` times SENSE's
    /// F^H D both ways).
    pub fn nufft(&self) -> Option<(&B::Nufft, &[f64])> {
        self.nufft.as_ref().map(|p| (p, &self.phi[..]))
    }

    pub fn backend(&self) -> &'b B {
        self.backend
    }

    /// `out = Q` on the `(2N)^3` grid: [`Plan::q_plan`], then
    /// [`Plan::q_execute`].
    pub fn q(&self, out: &mut [Complex<B::Real>], progress: Progress<'_>) -> Result<()> {
        let qp = self.q_plan()?;
        self.q_execute(&qp, out, progress)
    }

    /// The make-plan half of Q: for the NUFFT engine, a plan on the doubled
    /// grid with the same points (`k / N = 2k / 2N`), its fine grid and FFT
    /// plan. Made only when Q is computed (a cached Q needs none), and freed
    /// with it.
    pub fn q_plan(&self) -> Result<QPlan<B>> {
        let nufft = match self.engine {
            Engine::Exact => None,
            Engine::Nufft { tolerance } => Some(self.backend.nufft_plan(
                self.grid.doubled(),
                tolerance,
                1,
                &radians(&self.grid, &self.traj),
            )?),
        };
        Ok(QPlan { nufft })
    }

    /// The execute half of Q, into `out` on the host.
    pub fn q_execute(
        &self,
        qp: &QPlan<B>,
        out: &mut [Complex<B::Real>],
        progress: Progress<'_>,
    ) -> Result<()> {
        let d = self.grid.doubled();
        Error::check_len("Q (2N)^3", d.iter().product(), out.len())?;
        // |phi(k_m)|^2: real, so Q is Hermitian-symmetric: Q(-y) = conj Q(y).
        let coef: Vec<Complex<B::Real>> = self
            .phi
            .iter()
            .map(|p| Complex::new(B::Real::of(p * p), B::Real::of(0.0)))
            .collect();
        match &qp.nufft {
            None => exact::lattice_sum(
                self.backend,
                out,
                self.grid.displacements(),
                &self.traj,
                &coef,
                progress,
            ),
            Some(p) => {
                progress(0, 1);
                let b = self.backend;
                self.on_device(out, &coef, |q, c| b.nufft_type1(p, q, c))?;
                progress(1, 1);
                Ok(())
            }
        }
    }

    /// `out = f(input)` for a device operation `f`, host data in and out.
    fn on_device(
        &self,
        out: &mut [Complex<B::Real>],
        input: &[Complex<B::Real>],
        f: impl FnOnce(&mut B::Vector, &B::Vector) -> Result<()>,
    ) -> Result<()> {
        let b = self.backend;
        let mut o = b.zeros(out.len())?;
        f(&mut o, &b.upload(input)?)?;
        b.download(out, &o)
    }

    /// `phi(k_m) D_m` from the plan's phi, in the backend's precision.
    fn mu(&self, data: &[Complex<f64>]) -> Result<Vec<Complex<B::Real>>> {
        Error::check_len(
            "k-space data (one value per trajectory point)",
            self.traj.len(),
            data.len(),
        )?;
        Ok(weighted(self.phi.iter().copied(), data))
    }

    /// `out = F^H D` on the image grid, on the host.
    pub fn adjoint(
        &self,
        out: &mut [Complex<B::Real>],
        data: &[Complex<f64>],
        progress: Progress<'_>,
    ) -> Result<()> {
        Error::check_len("F^H D (one value per voxel)", self.grid.len(), out.len())?;
        let mu = self.mu(data)?;
        match &self.nufft {
            None => exact::lattice_sum(
                self.backend,
                out,
                self.grid.voxels(),
                &self.traj,
                &mu,
                progress,
            ),
            Some(p) => {
                progress(0, 1);
                self.on_device(out, &mu, |o, m| self.backend.nufft_type1(p, o, m))?;
                progress(1, 1);
                Ok(())
            }
        }
    }

    /// `out = F^H D` on the image grid, left on the device for the solver:
    /// for the NUFFT only the data go up.
    pub fn adjoint_on_device(
        &self,
        out: &mut B::Vector,
        data: &[Complex<f64>],
        progress: Progress<'_>,
    ) -> Result<()> {
        let b = self.backend;
        Error::check_len("F^H D (one value per voxel)", self.grid.len(), b.len(out))?;
        match &self.nufft {
            None => {
                let mut host = vec![Complex::default(); self.grid.len()];
                self.adjoint(&mut host, data, progress)?;
                *out = b.upload(&host)?;
            }
            Some(p) => {
                let mu = b.upload(&self.mu(data)?)?;
                progress(0, 1);
                b.nufft_type1(p, out, &mu)?;
                progress(1, 1);
            }
        }
        Ok(())
    }

    /// `out = sum_c S_c^H F^H D_c` on the device for SENSE: `data` holds
    /// each coil's samples in turn (`[C, M]`) and `maps` one `S_c` per
    /// coil on the device. For the NUFFT, one type 1 batched over the
    /// coils through the one plan; for the exact engine, coil by coil.
    pub fn adjoint_coils_on_device(
        &self,
        out: &mut B::Vector,
        data: &[Complex<f64>],
        maps: &[&B::Vector],
        progress: Progress<'_>,
    ) -> Result<()> {
        let b = self.backend;
        Error::check_len("F^H D (one value per voxel)", self.grid.len(), b.len(out))?;
        if let Some(p) = &self.nufft {
            return b.nufft_type1_coils(p, out, &self.phi, data, maps, progress);
        }
        recon_nufft::check_type1_coils(b, out, &self.phi, data, maps)?;
        let m = self.traj.len();
        recon_nufft::sum_through_maps(b, out, maps, progress, |c, one| {
            self.adjoint_on_device(one, &data[c * m..(c + 1) * m], &mut |_, _| {})
        })
    }

    /// `out = F rho`, one value per sample.
    pub fn forward(
        &self,
        out: &mut [Complex<B::Real>],
        rho: &[Complex<B::Real>],
        progress: Progress<'_>,
    ) -> Result<()> {
        Error::check_len("image (one value per voxel)", self.grid.len(), rho.len())?;
        Error::check_len("k-space (one value per sample)", self.traj.len(), out.len())?;
        match &self.nufft {
            None => exact::forward(self.backend, out, &self.grid, &self.traj, rho, progress)?,
            Some(p) => {
                progress(0, 1);
                self.on_device(out, rho, |d, r| self.backend.nufft_type1_adjoint(p, d, r))?;
                progress(1, 1);
            }
        }
        for (d, p) in out.iter_mut().zip(self.phi.iter()) {
            *d = *d * B::Real::of(*p);
        }
        Ok(())
    }
}
