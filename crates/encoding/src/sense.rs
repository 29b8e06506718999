//! SENSE's data term as the operator layer writes it: the stack over coils
//! of F after each coil's map, `E = [F S_1; ...; F S_C]`, its coils split
//! over the backend's shards (the GPUs of one host) by
//! [`recon_ops::Sharded`]. A solver uses its normal map,
//! `E^H E = sum_c S_c^H T S_c` with T the Toeplitz product: each part's F is
//! one [`Encoding`] shared by its coils (one FFT(Q) per device), and the
//! composition after each map picks the Toeplitz product with the map
//! folded into its passes. F^H D, `sum_c S_c^H F^H D_c`, is summed by each
//! part from the host's data through the batched type 1 of a plan of its
//! own ([`SenseTerm::rhs`]).

use crate::{Encoding, Engine, Plan};
use recon_cg::{DataTerm, Normal, Toeplitz};
use recon_core::{Complex, Error, Grid, Progress, Real, Result};
use recon_nufft::NufftBackend;
use recon_ops::{Compose, Diagonal, LinearOp, Sharded, Shared, Stack};
use std::ops::Range;
use std::sync::Arc;

/// Voxels from which the coils are shared among several devices by
/// default. Below, a coil's Toeplitz product is too short for the copies
/// and launches that sharing adds (`recon bench-sense --gpus`,
/// docs/benchmarks.md).
pub const SHARE_FROM_VOXELS: usize = 64 * 64 * 64;

/// `E^H E` of SENSE's stack over coils, split over devices.
pub struct SenseTerm<'a, B: NufftBackend + 'a> {
    op: Sharded<'a, B>,
    engine: Engine,
    grid: Grid,
    traj: Arc<[[f64; 3]]>,
    coils: usize,
    /// The largest `sum_c |S_c|^2` over the voxels.
    peak: f64,
    /// Per part: its coils, and their maps on its device (shared with the
    /// diagonals of its blocks).
    parts: Vec<(Range<usize>, Vec<Arc<B::Vector>>)>,
}

impl<'a, B: NufftBackend + 'a> SenseTerm<'a, B> {
    /// The stack over `maps` (one per coil, a value per voxel, at least
    /// one) of F (`plan`'s engine, grid and trajectory, shared with it)
    /// after each map, with F^H F the Toeplitz product `toeplitz` (made on
    /// `backend`, copied to the other parts' devices). The coils are shared among `parts` shards, in
    /// contiguous ranges of near-equal size; `None`: every shard where the
    /// grid has at least [`SHARE_FROM_VOXELS`] voxels, else one.
    pub fn new(
        backend: &B,
        plan: &Plan<'_, B>,
        toeplitz: Toeplitz<B>,
        maps: &[Vec<Complex<B::Real>>],
        parts: Option<usize>,
    ) -> Result<Self> {
        let (engine, grid) = (plan.engine(), *plan.grid());
        if maps.is_empty() {
            return Err(Error::Invalid {
                what: "coil maps",
                reason: "SENSE needs one map per coil, none given".into(),
            });
        }
        let n = grid.len();
        for m in maps {
            Error::check_len("coil map (one value per voxel)", n, m.len())?;
        }
        let peak = (0..n)
            .map(|i| maps.iter().map(|m| m[i].norm_sqr().f64()).sum::<f64>())
            .fold(0.0, f64::max);
        if !(peak.is_finite() && peak > 0.0) {
            return Err(Error::Invalid {
                what: "coil maps",
                reason: format!("the largest sum of |S_c|^2 over the coils is {peak}"),
            });
        }
        let coils = maps.len();
        if let Some(p) = parts.filter(|&p| p == 0 || p > backend.shards()) {
            return Err(Error::Invalid {
                what: "SENSE parts",
                reason: format!("{p} asked, the backend has {} shard(s)", backend.shards()),
            });
        }
        let parts = match parts {
            Some(p) => p,
            None if n >= SHARE_FROM_VOXELS => backend.shards(),
            None => 1,
        }
        .min(coils);
        let ranges: Vec<Range<usize>> = (0..parts)
            .map(|i| i * coils / parts..(i + 1) * coils / parts)
            .collect();
        // FFT(Q) on every part's device: the given product for the first,
        // copies of it for the others.
        let mut products = Vec::with_capacity(parts);
        for p in 1..parts {
            products.push(Some(toeplitz.copied(&backend.shard(p)?, backend)?));
        }
        products.insert(0, Some(toeplitz));
        let mut kept = Vec::with_capacity(parts);
        let op = Sharded::new(backend, parts, |b, p| {
            let t = products[p].take().expect("one product per part");
            // one F for the part's coils
            let f = Shared::new(Encoding::of(plan, Some(t))?);
            let mut maps_here = Vec::with_capacity(ranges[p].len());
            let mut blocks: Vec<Box<dyn LinearOp<B> + 'a>> = Vec::with_capacity(ranges[p].len());
            for c in ranges[p].clone() {
                let s = Arc::new(b.upload(&maps[c])?);
                maps_here.push(Arc::clone(&s));
                // F S_c
                blocks.push(Box::new(Compose::new(
                    b,
                    f.clone(),
                    Diagonal::shared(b, s)?,
                )?));
            }
            kept.push((ranges[p].clone(), maps_here));
            let stack: Box<dyn LinearOp<B> + 'a> = Box::new(Stack::new(b, blocks)?);
            Ok(stack)
        })?;
        Ok(SenseTerm {
            op,
            engine,
            grid,
            traj: plan.shared().0,
            coils,
            peak,
            parts: kept,
        })
    }

    /// Coils.
    pub fn coils(&self) -> usize {
        self.coils
    }

    /// `sum_c S_c^H F^H D_c` on `backend`'s device, from `data` (each
    /// coil's samples in turn, `[C, M]`, on the host): each part sums its
    /// coils by the batched type 1 of a plan on its own device (`plan`, the
    /// run's, for the first), side by side; `progress` counts the coils.
    pub fn rhs(
        &mut self,
        backend: &B,
        plan: &Plan<'_, B>,
        data: &[Complex<f64>],
        progress: Progress<'_>,
    ) -> Result<B::Vector> {
        let m = self.traj.len();
        Error::check_len(
            "SENSE's k-space data (one value per coil and sample)",
            self.coils * m,
            data.len(),
        )?;
        let mut out = backend.zeros(self.grid.len())?;
        let (engine, grid, traj, parts) = (self.engine, self.grid, &self.traj, &self.parts);
        let term = |p: usize, b: &B, sum: &mut B::Vector, tick: &dyn Fn(u64)| -> Result<()> {
            let (coils, maps) = &parts[p];
            let maps: Vec<&B::Vector> = maps.iter().map(|s| s.as_ref()).collect();
            let d = &data[coils.start * m..coils.end * m];
            let progress = &mut |_, _| tick(1);
            if p == 0 {
                return plan.adjoint_coils_on_device(sum, d, &maps, progress);
            }
            // a plan on this part's device, for this sum only
            let own = Plan::new(b, engine, &grid, traj)?;
            own.adjoint_coils_on_device(sum, d, &maps, progress)
        };
        self.op
            .sum_parts(backend, &mut out, self.coils as u64, term, progress)?;
        Ok(out)
    }
}

impl<'a, B: NufftBackend + 'a> Normal<B> for SenseTerm<'a, B> {
    fn len(&self) -> usize {
        self.grid.len()
    }

    fn apply(&mut self, backend: &B, out: &mut B::Vector, x: &B::Vector) -> Result<()> {
        // out = sum_c S_c^H T S_c x, each part's coils on its device
        self.op.normal(backend, out, x)
    }
}

/// E itself, `[C M, N]` (each coil's samples in turn), for callers that
/// apply E and E^H (the Python package); its normal map is the solver's.
impl<'a, B: NufftBackend + 'a> LinearOp<B> for SenseTerm<'a, B> {
    fn shape(&self) -> [usize; 2] {
        self.op.shape()
    }
    fn forward(&mut self, backend: &B, out: &mut B::Vector, x: &B::Vector) -> Result<()> {
        self.op.forward(backend, out, x)
    }
    fn adjoint(&mut self, backend: &B, out: &mut B::Vector, y: &B::Vector) -> Result<()> {
        self.op.adjoint(backend, out, y)
    }
    fn normal(&mut self, backend: &B, out: &mut B::Vector, x: &B::Vector) -> Result<()> {
        self.op.normal(backend, out, x)
    }
}

impl<'a, B: NufftBackend + 'a> DataTerm<B> for SenseTerm<'a, B> {
    fn map_peak(&self) -> f64 {
        self.peak
    }
    fn has_maps(&self) -> bool {
        true
    }
    fn devices(&self) -> usize {
        self.op.parts()
    }
}
