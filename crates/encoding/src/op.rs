//! The encoding operator F as a [`LinearOp`]: images (one value per voxel)
//! to samples (one per trajectory point), so that it composes with the
//! operator layer's maps, stacks and sums (SENSE is the stack over coils of
//! `F S_c`). Its normal map is the Toeplitz product with Q where one is
//! given, as BART's normal replaces `A^H A`; after a diagonal (a coil's
//! map) the map rides along with the product's first read and last write
//! ([`LinearOp::normal_between`]: on the GPU the fused passes of SENSE), and
//! the sum over coils adds in place.
//!
//! Key design decision: the operator owns what it needs (the engine, the
//! grid, the trajectory, and the Toeplitz product) and borrows no plan, so
//! that one can be made for every GPU of a host. Its NUFFT is made on its
//! first forward or adjoint map, on the device that map runs on: an
//! operator used for its normal map alone (a solver's data term) never
//! makes one. With the exact engine, F and F^H are the exact sums, the
//! vectors going through the host.

use crate::{exact, radians, Engine, Plan};
use recon_cg::{Normal, Toeplitz};
use recon_core::{Complex, Error, Grid, Real, Result};
use recon_nufft::NufftBackend;
use recon_ops::LinearOp;
use std::sync::Arc;

/// `F x = phi . type1^H(x)`, `F^H y = type1(phi . y)` by the NUFFT, or the
/// same sums evaluated exactly.
pub struct Encoding<B: NufftBackend> {
    engine: Engine,
    grid: Grid,
    traj: Arc<[[f64; 3]]>,
    /// `phi(k_m)`, one per sample.
    phi: Arc<[f64]>,
    /// The NUFFT, once made, with phi on the device and a vector of one
    /// value per sample.
    nufft: Option<OnDevice<B>>,
    /// `F^H F` by its Toeplitz product, where Q was given.
    toeplitz: Option<Toeplitz<B>>,
}

struct OnDevice<B: NufftBackend> {
    nufft: B::Nufft,
    phi: B::Vector,
    work: B::Vector,
}

impl<B: NufftBackend> Encoding<B> {
    /// The operator of `plan`'s engine, grid and trajectory; with `q` (as
    /// recon-q computes it for this plan), its normal map is the Toeplitz
    /// product, made on `backend`, else the adjoint after the forward map.
    pub fn new(backend: &B, plan: &Plan<'_, B>, q: Option<&[Complex<B::Real>]>) -> Result<Self> {
        let toeplitz = q
            .map(|q| Toeplitz::new(backend, plan.grid(), q))
            .transpose()?;
        Self::of(plan, toeplitz)
    }

    /// The operator of `plan`'s engine, grid and trajectory (shared with
    /// the plan, not copied), its normal map `toeplitz` where given.
    pub fn of(plan: &Plan<'_, B>, toeplitz: Option<Toeplitz<B>>) -> Result<Self> {
        let (traj, phi) = plan.shared();
        Self::checked(plan.engine(), plan.grid(), traj, phi, toeplitz)
    }

    /// The operator of `engine` on `grid` and `traj`, its normal map
    /// `toeplitz` where given (made for this grid, on the device the
    /// operator runs on).
    pub fn with(
        engine: Engine,
        grid: &Grid,
        traj: &[[f64; 3]],
        toeplitz: Option<Toeplitz<B>>,
    ) -> Result<Self> {
        crate::check_plan_inputs::<B::Real>(engine, grid, traj)?;
        let phi = traj.iter().map(|k| grid.phi(*k)).collect();
        Self::checked(engine, grid, traj.into(), phi, toeplitz)
    }

    /// With the trajectory already checked (by a plan).
    fn checked(
        engine: Engine,
        grid: &Grid,
        traj: Arc<[[f64; 3]]>,
        phi: Arc<[f64]>,
        toeplitz: Option<Toeplitz<B>>,
    ) -> Result<Self> {
        if let Some(t) = &toeplitz {
            Error::check_len(
                "Toeplitz product (one value per voxel)",
                grid.len(),
                t.len(),
            )?;
        }
        Ok(Encoding {
            engine,
            grid: *grid,
            traj,
            phi,
            nufft: None,
            toeplitz,
        })
    }

    /// The NUFFT on `backend`, made on first use.
    fn on_device(&mut self, backend: &B) -> Result<Option<&mut OnDevice<B>>> {
        let Engine::Nufft { tolerance } = self.engine else {
            return Ok(None);
        };
        if self.nufft.is_none() {
            let phi: Vec<Complex<B::Real>> = self
                .phi
                .iter()
                .map(|&p| Complex::new(B::Real::of(p), B::Real::of(0.0)))
                .collect();
            let points = radians(&self.grid, &self.traj);
            self.nufft = Some(OnDevice {
                nufft: backend.nufft_plan(self.grid.n, tolerance, 1, &points)?,
                work: backend.zeros(phi.len())?,
                phi: backend.upload(&phi)?,
            });
        }
        Ok(self.nufft.as_mut())
    }

    /// Fails unless `images` has one value per voxel and `samples` one per
    /// sample.
    fn check(&self, backend: &B, images: &B::Vector, samples: &B::Vector) -> Result<()> {
        let [m, n] = self.shape();
        Error::check_len(
            "encoding image (one value per voxel)",
            n,
            backend.len(images),
        )?;
        Error::check_len(
            "encoding samples (one value per sample)",
            m,
            backend.len(samples),
        )
    }

    /// `out = phi . D`, on the host, in the backend's precision.
    fn weighted(&self, d: &[Complex<B::Real>]) -> Vec<Complex<B::Real>> {
        d.iter()
            .zip(self.phi.iter())
            .map(|(d, &p)| *d * B::Real::of(p))
            .collect()
    }
}

impl<B: NufftBackend> LinearOp<B> for Encoding<B> {
    fn shape(&self) -> [usize; 2] {
        [self.traj.len(), self.grid.len()]
    }

    fn forward(&mut self, backend: &B, out: &mut B::Vector, x: &B::Vector) -> Result<()> {
        self.check(backend, x, out)?;
        if let Some(d) = self.on_device(backend)? {
            // out = phi . type1^H(x)
            backend.nufft_type1_adjoint(&d.nufft, out, x)?;
            return backend.mul(out, &d.phi);
        }
        // The exact sums, through the host.
        let mut host = vec![Complex::default(); self.grid.len()];
        backend.download(&mut host, x)?;
        let mut samples = vec![Complex::default(); self.traj.len()];
        exact::forward(
            backend,
            &mut samples,
            &self.grid,
            &self.traj,
            &host,
            &mut |_, _| {},
        )?;
        *out = backend.upload(&self.weighted(&samples))?;
        Ok(())
    }

    fn adjoint(&mut self, backend: &B, out: &mut B::Vector, y: &B::Vector) -> Result<()> {
        self.check(backend, out, y)?;
        if let Some(d) = self.on_device(backend)? {
            // out = type1(phi . y)
            backend.copy(&mut d.work, y)?;
            backend.mul(&mut d.work, &d.phi)?;
            return backend.nufft_type1(&d.nufft, out, &d.work);
        }
        let mut host = vec![Complex::default(); self.traj.len()];
        backend.download(&mut host, y)?;
        let mu = self.weighted(&host);
        let mut image = vec![Complex::default(); self.grid.len()];
        let voxels = self.grid.voxels();
        exact::lattice_sum(backend, &mut image, voxels, &self.traj, &mu, &mut |_, _| {})?;
        *out = backend.upload(&image)?;
        Ok(())
    }

    fn normal(&mut self, backend: &B, out: &mut B::Vector, x: &B::Vector) -> Result<()> {
        let n = self.shape()[1];
        Error::check_len("encoding normal input", n, backend.len(x))?;
        Error::check_len("encoding normal output", n, backend.len(out))?;
        if let Some(t) = &mut self.toeplitz {
            // out = F^H F x by the Toeplitz product
            return t.apply(backend, out, x);
        }
        if let Some(d) = self.on_device(backend)? {
            // out = type1(phi . phi . type1^H(x))
            backend.nufft_type1_adjoint(&d.nufft, &mut d.work, x)?;
            backend.mul(&mut d.work, &d.phi)?;
            backend.mul(&mut d.work, &d.phi)?;
            return backend.nufft_type1(&d.nufft, out, &d.work);
        }
        // out = F^H (F x) by the exact sums
        let mut y = backend.zeros(self.traj.len())?;
        self.forward(backend, &mut y, x)?;
        self.adjoint(backend, out, &y)
    }

    fn normal_between(
        &mut self,
        backend: &B,
        out: &mut B::Vector,
        accumulate: bool,
        s: &B::Vector,
        x: &B::Vector,
        scratch: (&mut B::Vector, &mut B::Vector),
    ) -> Result<()> {
        let n = self.shape()[1];
        Error::check_len("encoding normal input", n, backend.len(x))?;
        Error::check_len("encoding normal output", n, backend.len(out))?;
        Error::check_len("coil map (one value per voxel)", n, backend.len(s))?;
        match &mut self.toeplitz {
            // out (+)= S^H T (S x), the map folded into T's passes
            Some(t) => t.apply_coil(backend, out, accumulate, s, x, scratch),
            // y = S x, F^H F y, out (+)= S^H (...)
            None => {
                recon_ops::normal_between_by_pieces(self, backend, out, accumulate, s, x, scratch)
            }
        }
    }
}
