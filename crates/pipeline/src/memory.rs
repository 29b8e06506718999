//! The memory a command needs, checked before anything large is made:
//! on the device first (the smaller memory), then on the host.

use crate::config::{self, Loaded, Source};
use crate::Result;
use recon_core::Backend;

/// What a command computes, for the memory estimate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Work {
    /// Synthetic data only (`recon simulate`).
    Simulate,
    /// Q only (`recon q`).
    Q,
    /// The whole reconstruction.
    Reconstruct,
}

/// The number of samples of a run, known before the trajectory is made.
pub fn samples(l: &Loaded) -> Result<usize> {
    Ok(match &l.source {
        Source::Synthetic { trajectory, .. } => trajectory.len(&l.grid)?,
        Source::Scan(s) => s.traj.len(),
    })
}

/// Image vectors the run's solver holds beyond CG's five: the sparse
/// priors' (recon_core::memory::sparse_vectors), none for the quadratic.
pub fn extra_vectors(l: &Loaded) -> u64 {
    use config::PriorKind as P;
    use recon_core::memory::{sparse_vectors, SparseOperator as K};
    match l.cfg.prior.kind {
        P::Quadratic => 0,
        P::Tv => sparse_vectors(K::Gradient),
        P::Dtv => sparse_vectors(K::Directional),
        P::Wavelet => sparse_vectors(K::Wavelets(l.cfg.prior.shifts)),
    }
}

/// The number of receive coils of a run (before any compression).
pub fn coils(l: &Loaded) -> usize {
    match &l.source {
        Source::Synthetic { .. } => l.cfg.coils.as_ref().map_or(1, |c| c.count),
        Source::Scan(s) => s.coils,
    }
}

/// Checks the host memory a command needs against what is available,
/// before anything large is made; the error gives the estimate and the
/// largest cubic matrix that would fit.
pub fn check_host_memory(l: &Loaded, work: Work, real_bytes: u64, on_gpu: bool) -> Result<()> {
    host_memory(l, work, real_bytes, on_gpu, 0)
}

/// [`check_host_memory`], `held` of the bytes it needs already allocated.
fn host_memory(l: &Loaded, work: Work, real_bytes: u64, on_gpu: bool, held: u64) -> Result<()> {
    use recon_core::memory::{self, gib};
    let samples = samples(l)?;
    let anatomy_voxels = match &l.source {
        Source::Synthetic {
            anatomy: Some(_), ..
        } => {
            let m = l
                .cfg
                .phantom
                .as_ref()
                .and_then(|p| p.anatomy_matrix)
                .map_or(l.grid.n, |m| m.0);
            memory::voxels(m).unwrap_or(u64::MAX)
        }
        Source::Scan(s) => s.anatomy.as_ref().map_or(0, |a| a.grid.len() as u64),
        _ => 0,
    };
    let run = |n: [usize; 3]| memory::HostRun {
        q: work != Work::Simulate,
        solve: work == Work::Reconstruct,
        real_bytes,
        on_gpu,
        // A reference finer than the grid by the same factor at any size.
        anatomy_voxels: match memory::voxels(l.grid.n) {
            Some(v) if v > 0 => {
                anatomy_voxels.saturating_mul(memory::voxels(n).unwrap_or(u64::MAX)) / v
            }
            _ => 0,
        },
        gridding_oversampling: if work == Work::Reconstruct {
            l.cfg.gridding.oversampling
        } else {
            0.0
        },
        output_q: l.cfg.output.q,
        nufft: l.cfg.engine.kind == config::EngineKind::Nufft,
        coils: coils(l) as u64,
        extra_vectors: extra_vectors(l),
    };
    // Each worker thread's first allocation maps its allocator arena (64
    // MiB of address space, which `ulimit -v` counts): made now, it is
    // measured alike by `recon check` and by the run.
    rayon::broadcast(|_| std::hint::black_box(vec![0u8; 64]));
    let Some(limit) = memory::host_limit() else {
        return Ok(());
    };
    let free = limit.bytes.saturating_add(held);
    let need = memory::host_bytes(l.grid.n, samples, &run(l.grid.n));
    let (stage, bytes) = need.unwrap_or(("the run", u64::MAX));
    if bytes <= free {
        return Ok(());
    }
    let fits = match memory::largest_cubic(free, |n| {
        memory::host_bytes([n; 3], samples, &run([n; 3])).map(|(_, b)| b)
    }) {
        Some(n) => format!("the largest cubic matrix that fits is {n}"),
        None => format!("not even a small matrix fits with {samples} samples"),
    };
    crate::bail!(
        "not enough memory: {stage} for matrix {:?} and {samples} samples needs about {} GiB \
         of host memory, but {:.2} GiB is available under {}; {fits}",
        l.grid.n,
        if bytes == u64::MAX {
            "more than 2^64 bytes".to_string()
        } else {
            format!("{:.2}", gib(bytes))
        },
        gib(free),
        limit.what
    );
}

/// Whether a run's inputs may be made before its GPU is open (and its
/// device memory checked): the host holds the run as on a GPU (the least
/// host memory any backend takes), and the GPU's peak is at most
/// [`SMALL_ON_DEVICE`], so that a GPU too full for it refuses the run after
/// small inputs were made (a synthesis of seconds at most), not after
/// minutes of them. Else the device is checked first, as [`check_memory`]
/// does.
pub fn inputs_before_device(l: &Loaded) -> bool {
    use recon_core::memory;
    let Ok(samples) = samples(l) else {
        return false;
    };
    let nufft = l.cfg.engine.kind == config::EngineKind::Nufft;
    let small = memory::peak_bytes(l.grid.n, samples, nufft, coils(l), extra_vectors(l))
        .is_some_and(|(_, bytes)| bytes <= SMALL_ON_DEVICE);
    let f32_bytes = std::mem::size_of::<f32>() as u64;
    small && check_host_memory(l, Work::Reconstruct, f32_bytes, true).is_ok()
}

/// The GPU memory below which a run's inputs are made while its GPU opens
/// ([`inputs_before_device`]): 4 GiB, above the book's 128^3 problem
/// (2.3 GB) and far below 256^3 with a million samples (18 GB).
const SMALL_ON_DEVICE: u64 = 4 << 30;

/// Checks the memory a command needs on `backend` (and on the host),
/// before anything is allocated; the error says what would fit.
pub fn check_memory<B: Backend>(backend: &B, l: &Loaded, work: Work) -> Result<()> {
    check_memory_holding(backend, l, work, 0)
}

/// [`check_memory`] once part of the run's host memory, `held` bytes (its
/// inputs, made while the GPU opened), is already allocated: those bytes
/// count as available to it, since the need includes them.
pub fn check_memory_holding<B: Backend>(
    backend: &B,
    l: &Loaded,
    work: Work,
    held: u64,
) -> Result<()> {
    // The device first: it is the smaller memory, and its message names
    // the largest matrix the GPU holds.
    let gpu_free = backend.memory_available();
    if let Some(free) = gpu_free {
        let nufft = l.cfg.engine.kind == config::EngineKind::Nufft;
        check_device_memory(
            &backend.describe(),
            free,
            l.grid.n,
            samples(l)?,
            nufft,
            coils(l),
            extra_vectors(l),
        )?;
    }
    host_memory(
        l,
        work,
        std::mem::size_of::<B::Real>() as u64,
        gpu_free.is_some(),
        held,
    )
}

/// The device side of [`check_memory`], for the exact engine or the NUFFT.
pub fn check_device_memory(
    device: &str,
    free: u64,
    n: [usize; 3],
    samples: usize,
    nufft: bool,
    coils: usize,
    extra: u64,
) -> Result<()> {
    use recon_core::memory::{self, gib};
    let (stage, need) =
        memory::peak_bytes(n, samples, nufft, coils, extra).unwrap_or(("the run", u64::MAX));
    if need > free {
        let fits = match memory::largest_cubic(free, |n| {
            memory::peak_bytes([n; 3], samples, nufft, coils, extra).map(|(_, b)| b)
        }) {
            Some(n) => format!("the largest cubic matrix that fits is {n}"),
            None => "not even a small matrix fits: free some GPU memory".to_string(),
        };
        crate::bail!(
            "not enough GPU memory: {stage} for matrix {n:?} and {samples} samples needs {:.2} GiB, \
             but {device} has {:.2} GiB free; {fits}",
            gib(need),
            gib(free)
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inputs_are_made_before_the_device_only_for_small_problems() {
        let (_out, mut l) = crate::config::shipped("sodium");
        // 48^3 with 119,800 samples: megabytes on the GPU.
        assert!(inputs_before_device(&l));
        // The constant's examples: the book's 128^3 problem (2.3 GB) is
        // under it, 256^3 with a million samples (18 GB) is not.
        let at = |n: usize, m: usize| {
            recon_core::memory::peak_bytes([n; 3], m, true, 1, 0)
                .unwrap()
                .1
        };
        assert!(at(128, 284_592) <= SMALL_ON_DEVICE);
        assert!(at(256, 1_000_000) > SMALL_ON_DEVICE);
        // 1024^3 needs tens of GiB on the GPU: the device is checked first.
        l.grid.n = [1024; 3];
        assert!(!inputs_before_device(&l));
    }
}
