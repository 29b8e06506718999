//! Memory a reconstruction needs, estimated before allocating: on the GPU
//! (each stage's peak) and on the host (the whole run's peak). Every size
//! product is checked: a product that overflows is reported as `None`, never
//! wrapped. What the host allows, and which limit binds, is in [`limits`].

mod limits;
pub use limits::{
    available_host_bytes, host_limit, machine_limits, process_limits, smallest, HostLimit,
};

/// Bytes of device memory each stage holds at its peak, in float32, for an
/// `n` grid and `samples` k-space samples (`None` if it overflows), with the
/// exact engine or (`nufft`) the NUFFT on the device. The NUFFT's Q plan
/// holds its fine grid, the doubled grid upsampled by 2 (64 image grids),
/// and as much again for cuFFT's work area, and frees both after Q; the
/// image plan's fine grid (the doubled grid) and its sorted points stay for
/// the run.
///
/// With `coils` > 1 (SENSE), the coils' maps are on the device from F^H D
/// on (one image vector each), F^H D adds each coil's into a sum (one more
/// vector), and CG holds two more for `S_c x` and its product. `extra`:
/// image vectors the solver holds beyond CG's five ([`sparse_vectors`]).
pub fn stage_bytes(
    n: [usize; 3],
    samples: usize,
    nufft: bool,
    coils: usize,
    extra: u64,
) -> Option<[(&'static str, u64); 3]> {
    let vox = voxels(n)?;
    let maps = if coils > 1 {
        8u64.checked_mul(vox)?.checked_mul(coils as u64)?
    } else {
        0
    };
    let sense = |extra: u64| -> Option<u64> {
        if coils > 1 {
            maps.checked_add(8u64.checked_mul(vox)?.checked_mul(extra)?)
        } else {
            Some(0)
        }
    };
    let big = vox.checked_mul(8)?; // the (2N)^3 grid
    let c = 8u64; // one complex float32
    let m = samples as u64;
    // One sample: k (3) and a complex coefficient.
    let s = m.checked_mul(20)?;
    // A NUFFT plan: points in float64 and sorting scratch while it is made
    // (32), then sorted cells, offsets and order (28), and strengths (8).
    let points = m.checked_mul(68)?;
    let kept = m.checked_mul(28)?;
    let (q, fhd, plan) = if nufft {
        let fine = big.checked_mul(8)?;
        (
            c.checked_mul(fine)?
                .checked_mul(2)?
                .checked_add(c.checked_mul(big)?)?
                .checked_add(points)?,
            c.checked_mul(big)?
                .checked_mul(2)?
                .checked_add(c.checked_mul(vox)?)?
                .checked_add(points)?,
            c.checked_mul(big)?.checked_add(kept)?,
        )
    } else {
        (
            c.checked_mul(big)?.checked_add(s)?,
            c.checked_mul(vox)?.checked_add(s)?,
            0,
        )
    };
    Some([
        ("Q", q),
        ("F^H D", fhd.checked_add(sense(1)?)?),
        (
            "CG",
            // Five image vectors; FFT(Q), the work grid and cuFFT's 3-D
            // work area (made for FFT(Q) and the product where the grid has
            // no line kernels; on the GPU's line path, nothing): 3 grids.
            c.checked_mul(5u64.checked_add(extra)?.checked_mul(vox)?)?
                .checked_add(c.checked_mul(3)?.checked_mul(big)?)?
                .checked_add(12u64.checked_mul(vox)?)?
                .checked_add(plan)?
                .checked_add(sense(2)?)?,
        ),
    ])
}

/// The operator `K` of a sparse prior, for [`sparse_vectors`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SparseOperator {
    /// Total variation's gradient (fields of three components).
    Gradient,
    /// Directional total variation's weighted gradient.
    Directional,
    /// The wavelet prior's stack of this many shifted transforms.
    Wavelets(usize),
}

/// Image vectors the sparse priors' solvers hold beyond CG's five, on
/// whichever device solves: ADMM's split and dual fields (five of three
/// components), its right-hand sides and residual (four), preconditioned
/// CG's work (three), the gradient's field (three) and the preconditioner
/// (three: its inverse, and the two sets of eigenvalues it is made from),
/// about as many as PDHG's two iterates with their products;
/// directional TV adds its reference field and the composition's two
/// fields (nine). The wavelet prior's fields hold one image per shift
/// (five fields), and its stack a block output per shift and two scratch images,
/// with the solvers' own nine.
pub fn sparse_vectors(op: SparseOperator) -> u64 {
    match op {
        SparseOperator::Gradient => 26,
        SparseOperator::Directional => 35,
        SparseOperator::Wavelets(shifts) => 7 * shifts as u64 + 12,
    }
}

/// The largest stage's device need (`None` if it overflows).
pub fn peak_bytes(
    n: [usize; 3],
    samples: usize,
    nufft: bool,
    coils: usize,
    extra: u64,
) -> Option<(&'static str, u64)> {
    stage_bytes(n, samples, nufft, coils, extra)?
        .into_iter()
        .max_by_key(|(_, b)| *b)
}

/// The largest even cubic matrix (4 to [`crate::MAX_N`]) for which `need`
/// is at most `free` bytes.
pub fn largest_cubic(free: u64, need: impl Fn(usize) -> Option<u64>) -> Option<usize> {
    (2..=crate::MAX_N / 2)
        .rev()
        .map(|h| 2 * h)
        .find(|&n| need(n).is_some_and(|b| b <= free))
}

/// `Nx Ny Nz` as u64, checked.
pub fn voxels(n: [usize; 3]) -> Option<u64> {
    (n[0] as u64)
        .checked_mul(n[1] as u64)?
        .checked_mul(n[2] as u64)
}

/// What a run keeps on the host besides the grid and the samples.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HostRun {
    /// Q is computed or loaded (`recon q`, a reconstruction).
    pub q: bool,
    /// F^H D, CG, the results and gridding (a reconstruction).
    pub solve: bool,
    /// Bytes of one real number of the backend (4 or 8).
    pub real_bytes: u64,
    /// The solver's work arrays live on a GPU, not on the host.
    pub on_gpu: bool,
    /// Voxels of an anatomical reference on its own grid (0: none).
    pub anatomy_voxels: u64,
    /// Gridding baseline's oversampling factor (0: no gridding).
    pub gridding_oversampling: f64,
    /// Q is kept in float64 for the output file.
    pub output_q: bool,
    /// The NUFFT engine: on the CPU (not `on_gpu`) its fine grid, the
    /// doubled grid upsampled by 2 (64 times the image grid) for Q, and its
    /// sorted points are on the host.
    pub nufft: bool,
    /// Receive coils (1: one coil, no SENSE).
    pub coils: u64,
    /// Image vectors the solver holds beyond CG's five ([`sparse_vectors`]).
    pub extra_vectors: u64,
}

/// Bytes of host memory a reconstruction needs at its peak, and the stage
/// at which it peaks (`None` if it overflows). Counted: the inputs
/// (trajectory and data in float64, truth, reference), Q and F^H D in the
/// backend's precision, the solver's arrays on the CPU (FFT(Q), the work
/// grid and the FFT's scratch grid on the doubled grid, five image
/// vectors, the stencil), the float64 results, and the gridding baseline's
/// oversampled grids.
pub fn host_bytes(n: [usize; 3], samples: usize, run: &HostRun) -> Option<(&'static str, u64)> {
    let vox = voxels(n)?;
    let big = vox.checked_mul(8)?;
    let m = samples as u64;
    let cplx = 2 * run.real_bytes;
    // Always held: k (3 f64) and each coil's data (complex f64, twice while
    // several coils are whitened and compressed) per sample, the truth and
    // the reference on the grid (f64), and the reference on its own grid;
    // with several coils, their maps (complex f64).
    let copies = if run.coils > 1 { 2 } else { 1 };
    let per_sample = 16u64
        .checked_mul(run.coils.max(1))?
        .checked_mul(copies)?
        .checked_add(24)?;
    let maps = if run.coils > 1 {
        vox.checked_mul(16)?.checked_mul(run.coils)?
    } else {
        0
    };
    let inputs = m
        .checked_mul(per_sample)?
        .checked_add(vox.checked_mul(16)?)?
        .checked_add(run.anatomy_voxels.checked_mul(8)?)?
        .checked_add(maps)?;
    if !run.q {
        return Some(("inputs", inputs));
    }
    // Q and F^H D in the backend's precision.
    let q = big.checked_mul(cplx)?;
    // While Q is computed by the NUFFT: its fine grid, and per sample the
    // plan's copy of k and phi (32 bytes) and two plans' sorted points
    // (28 bytes each).
    let nufft = if run.nufft && !run.on_gpu {
        big.checked_mul(8)?
            .checked_mul(cplx)?
            .checked_add(m.checked_mul(88)?)?
    } else {
        0
    };
    let q_stage = ("Q", inputs.checked_add(q)?.checked_add(nufft)?);
    if !run.solve {
        return Some(q_stage);
    }
    let fhd = vox.checked_mul(cplx)?;
    let solver = if run.on_gpu {
        0
    } else {
        // FFT(Q), work and scratch grids; x, r, p, Ap, b and the extra
        // vectors; stencil (4 f64).
        big.checked_mul(3 * cplx)?
            .checked_add(
                vox.checked_mul(cplx)?
                    .checked_mul(5u64.checked_add(run.extra_vectors)?)?,
            )?
            .checked_add(vox.checked_mul(32)?)?
    }
    .checked_add(if run.extra_vectors > 0 {
        // the preconditioner's eigenvalues on the host (two f64 arrays and
        // the complex f64 grid they come from)
        vox.checked_mul(32)?
    } else {
        0
    })?;
    // Estimating maps: each coil's low-resolution image and its smoothed
    // product (complex f64), beside the maps; the CPU's SENSE solve holds
    // the maps in the backend's precision and two more image vectors.
    let estimate = maps.checked_mul(2)?;
    let sense = if run.coils > 1 && !run.on_gpu {
        vox.checked_mul(cplx)?.checked_mul(run.coils + 2)?
    } else {
        0
    };
    let maps_stage = ("coil maps", inputs.checked_add(q)?.checked_add(estimate)?);
    // The gridding baseline and F^H D are made before the solve (complex
    // f64) and, while it runs, written out from float32 copies (8 + 8 B
    // per voxel, and 8 of the baseline's NIfTI values at most).
    let early = vox.checked_mul(32 + 24)?;
    let cg = inputs
        .checked_add(q)?
        .checked_add(fhd)?
        .checked_add(solver)?
        .checked_add(sense)?
        .checked_add(early)?;
    // Results in complex f64 (recon, F^H D, gridding) and Q in f64 if kept.
    let results = vox.checked_mul(48)?.checked_add(if run.output_q {
        big.checked_mul(16)?
    } else {
        0
    })?;
    // Gridding: three complex f64 copies of the oversampled grid, and per
    // sample its kernel weights and indices.
    let gridding = if run.gridding_oversampling > 0.0 {
        let s = run.gridding_oversampling;
        let g = voxels(n.map(|v| 2 * (s * v as f64 / 2.0).ceil() as usize))?;
        g.checked_mul(48)?.checked_add(m.checked_mul(160)?)?
    } else {
        0
    };
    let after = inputs
        .checked_add(q)?
        .checked_add(results)?
        .checked_add(gridding)?;
    [
        q_stage,
        maps_stage,
        ("CG", cg),
        ("gridding and output", after),
    ]
    .into_iter()
    .max_by_key(|(_, b)| *b)
}

/// Bytes as GiB, for messages.
pub fn gib(bytes: u64) -> f64 {
    bytes as f64 / (1u64 << 30) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cg_dominates_and_largest_cubic_fits() {
        // N = 128: CG holds 5 * 2 Mi + 3 * 16 Mi complex floats plus weights.
        let (stage, bytes) = peak_bytes([128; 3], 284_592, false, 1, 0).unwrap();
        assert_eq!(stage, "CG");
        assert_eq!(
            bytes,
            8 * 5 * 128u64.pow(3) + 8 * 3 * 256u64.pow(3) + 12 * 128u64.pow(3)
        );
        let need = |n| peak_bytes([n; 3], 284_592, false, 1, 0).map(|(_, b)| b);
        let n = largest_cubic(bytes, need).unwrap();
        assert_eq!(n, 128);
        assert!(need(n + 2).unwrap() > bytes);
        assert_eq!(largest_cubic(1000, need), None);
        // The NUFFT's Q plan: its fine grid and cuFFT's work area, 64 image
        // grids each, and Q itself.
        let (stage, bytes) = peak_bytes([128; 3], 284_592, true, 1, 0).unwrap();
        assert_eq!(stage, "Q");
        assert_eq!(
            bytes,
            8 * 2 * 512u64.pow(3) + 8 * 256u64.pow(3) + 68 * 284_592
        );
    }

    #[test]
    fn overflowing_sizes_are_none_not_wrapped() {
        let huge = [1 << 22; 3]; // 2^66 voxels
        assert_eq!(voxels(huge), None);
        assert_eq!(peak_bytes(huge, 10, false, 1, 0), None);
        assert_eq!(peak_bytes(huge, 10, true, 1, 0), None);
        let run = HostRun {
            q: true,
            solve: true,
            real_bytes: 4,
            on_gpu: false,
            anatomy_voxels: 0,
            gridding_oversampling: 2.0,
            output_q: false,
            nufft: true,
            coils: 1,
            extra_vectors: 0,
        };
        assert_eq!(host_bytes(huge, 10, &run), None);
    }

    /// A reconstruction in float32 on the CPU, exact engine, no gridding.
    fn cpu_run() -> HostRun {
        HostRun {
            q: true,
            solve: true,
            real_bytes: 4,
            on_gpu: false,
            anatomy_voxels: 0,
            gridding_oversampling: 0.0,
            output_q: false,
            nufft: false,
            coils: 1,
            extra_vectors: 0,
        }
    }

    #[test]
    fn host_need_grows_with_the_grid_and_the_cpu_solver() {
        let cpu = cpu_run();
        let gpu = HostRun {
            on_gpu: true,
            ..cpu
        };
        let (_, c) = host_bytes([64; 3], 1000, &cpu).unwrap();
        let (_, g) = host_bytes([64; 3], 1000, &gpu).unwrap();
        assert!(c > g);
        // The doubled grid dominates: at least Q, FFT(Q), work and scratch.
        assert!(c >= 4 * 8 * 8 * 64u64.pow(3));
        let (_, c2) = host_bytes([128; 3], 1000, &cpu).unwrap();
        assert!(c2 > 7 * c, "{c2} against {c}");
        // A 1024^3 run in f32 needs far more than any workstation has.
        let (_, big) = host_bytes([1024; 3], 1000, &cpu).unwrap();
        assert!(big > 200 * (1 << 30));
        // The CPU NUFFT's Q grid, 4N per axis, is its peak; on a GPU run
        // the NUFFT's grids are in device memory and add nothing here.
        let nufft = HostRun { nufft: true, ..cpu };
        let (stage, b) = host_bytes([128; 3], 1000, &nufft).unwrap();
        assert_eq!(stage, "Q");
        assert!(b >= 64 * 8 * 128u64.pow(3), "{b}");
        let on_gpu = HostRun { nufft: true, ..gpu };
        assert_eq!(
            host_bytes([128; 3], 1000, &on_gpu),
            host_bytes([128; 3], 1000, &gpu)
        );
    }

    #[test]
    fn coils_add_their_maps_on_the_device_and_their_data_on_the_host() {
        // 32 coils at 128^3: CG holds 34 more image vectors (the maps, S_c x
        // and its product); F^H D the maps and a sum.
        let v = 128u64.pow(3);
        let one = stage_bytes([128; 3], 284_592, true, 1, 0).unwrap();
        let many = stage_bytes([128; 3], 284_592, true, 32, 0).unwrap();
        assert_eq!(many[0], one[0]);
        assert_eq!(many[1].1 - one[1].1, 8 * 33 * v);
        assert_eq!(many[2].1 - one[2].1, 8 * 34 * v);
        let run = HostRun {
            q: true,
            solve: true,
            real_bytes: 4,
            on_gpu: true,
            anatomy_voxels: 0,
            gridding_oversampling: 2.0,
            output_q: false,
            nufft: true,
            coils: 1,
            extra_vectors: 0,
        };
        let (_, single) = host_bytes([128; 3], 284_592, &run).unwrap();
        let (stage, multi) = host_bytes([128; 3], 284_592, &HostRun { coils: 32, ..run }).unwrap();
        // Data twice (whitened) and maps: 284,592 x 32 x 32 B and 32 x 16 B
        // per voxel; estimating maps holds two more per coil.
        assert_eq!(stage, "coil maps");
        assert!(multi > single);
        assert!(multi >= 284_592 * 32 * 32 + 3 * 32 * 16 * v, "{multi}");
    }

    #[test]
    fn the_sparse_priors_vectors_are_counted_on_either_device() {
        let n = [128; 3];
        let vox = 128u64 * 128 * 128;
        let [.., (_, plain)] = stage_bytes(n, 284_592, true, 1, 0).unwrap();
        let [.., (stage, tv)] = stage_bytes(
            n,
            284_592,
            true,
            1,
            sparse_vectors(SparseOperator::Gradient),
        )
        .unwrap();
        assert_eq!(stage, "CG");
        assert_eq!(tv - plain, 26 * 8 * vox, "26 complex float32 image vectors");
        let cpu = cpu_run();
        let (_, a) = host_bytes(n, 1000, &cpu).unwrap();
        let with = HostRun {
            extra_vectors: sparse_vectors(SparseOperator::Directional),
            ..cpu
        };
        let (stage, b) = host_bytes(n, 1000, &with).unwrap();
        assert_eq!(stage, "CG");
        // 35 vectors and the preconditioner's host arrays while it is made
        // (32 bytes a voxel)
        assert_eq!(b - a, 35 * 8 * vox + 32 * vox);
        // on the GPU only the host arrays stay on the host
        let gpu = |extra_vectors| HostRun {
            on_gpu: true,
            extra_vectors,
            ..cpu
        };
        let (_, c) = host_bytes(n, 1000, &gpu(0)).unwrap();
        let (_, d) = host_bytes(n, 1000, &gpu(26)).unwrap();
        assert!(d - c <= 32 * vox, "{d} against {c}");
    }
}

/// A new host vector of `len` default values, written by every core: a
/// large fresh buffer's first touch (the kernel mapping and zeroing its
/// pages) costs more than a copy into it, and spread over the cores it
/// costs a fraction (a 128 MiB image: 34 ms on one core of an H100 host).
pub fn host_vec<T: Default + Send>(len: usize) -> Vec<T> {
    use rayon::prelude::*;
    (0..len).into_par_iter().map(|_| T::default()).collect()
}
