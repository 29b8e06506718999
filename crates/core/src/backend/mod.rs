//! The [`Backend`] trait: everything that differs between CPU and GPU.
//! Its arguments' types are in `args`; `pieces` composes some of its maps
//! from others, for backends without a fused version.

mod args;
mod pieces;

pub use args::{CgStep, CoilOp, Direction, GroupProx, NufftUse, Ratio, Sign, Targets, Workload};
pub use pieces::{
    fft_q_by_pieces, toeplitz_by_pieces, toeplitz_coil_by_pieces, toeplitz_dot_by_pieces,
};

use crate::{Complex, Progress, Real, Result, Stencil};

/// The device primitives of the pipeline. One implementation per device;
/// Q, F^H D, the Toeplitz operator and CG are written once above it.
///
/// Vectors are complex, of `Self::Real`, and live on the device. 3-D shapes
/// are `[Nx, Ny, Nz]`, stored x fastest. Implementations check lengths at
/// these boundaries and return [`crate::Error::Length`] on a mismatch.
pub trait Backend: Send + Sync {
    type Real: Real;
    /// A complex vector in device memory.
    type Vector: Send + Sync;
    /// The stencil of W (squared weights) in device memory.
    type Weights: Send;
    /// A few f64 scalars of an iterative solver in device memory.
    type Scalars: Send;
    /// A plan for in-place 3-D FFTs of one shape ([`Backend::fft_plan`]).
    /// The operator that runs the FFTs makes it once and keeps it: the
    /// backend holds no plans of its own.
    type Fft: Send;
    /// What the Toeplitz product of one image shape needs (its FFT plans or
    /// line passes), made once by [`Backend::toeplitz_plan`] and kept by
    /// the operator, as [`Backend::Fft`].
    type ToeplitzPlan: Send;

    /// A one-line description: device name and precision.
    fn describe(&self) -> String;

    /// Free device memory in bytes, where the device has a hard limit
    /// (GPUs); `None` on the CPU. The pipeline checks its estimate against it
    /// before allocating.
    fn memory_available(&self) -> Option<u64> {
        None
    }

    /// Gets ready for `work` (a GPU compiles or loads the kernels it will
    /// launch). Optional: whatever it leaves out is made when first used.
    fn prepare(&self, work: &Workload) -> Result<()> {
        let _ = work;
        Ok(())
    }

    /// Waits until every operation issued so far has finished (the GPU
    /// queues its work); for timings. The CPU's operations are synchronous.
    fn synchronize(&self) -> Result<()> {
        Ok(())
    }

    /// Gives memory that no vector uses back to the device's driver (a GPU
    /// keeps freed memory for its next allocations): for a process that
    /// shares the device with other libraries between calls.
    fn release_unused_memory(&self) -> Result<()> {
        Ok(())
    }

    // --- several devices -------------------------------------------------

    /// Devices that can each compute a share of a sum of independent terms
    /// (SENSE's coils, Q's slabs) side by side: the GPUs in use; 1 for the
    /// CPU.
    fn shards(&self) -> usize {
        1
    }

    /// A backend whose vectors live on shard `i` (`0..shards()`), with this
    /// one's settings; shard 0 is this backend's own device. A shard has
    /// one device: its `shards()` is 1.
    fn shard(&self, i: usize) -> Result<Self>
    where
        Self: Sized;

    /// `out = x`, with `out` a vector of this backend and `x` one of `from`
    /// (another shard). Ordered after everything issued on either so far and
    /// before anything issued on either afterwards; the host does not wait.
    fn transfer(&self, out: &mut Self::Vector, from: &Self, x: &Self::Vector) -> Result<()>
    where
        Self: Sized;

    /// The summation engine shared by Q, F^H D and the forward model:
    /// `out[i] = sum_m coef[m] exp(sign i 2pi sources[m] . targets[first + i])`,
    /// for the targets `first .. first + out.len()` (a slab of them: each
    /// target's position comes from its own index in `targets`, so a slab
    /// of whole rows of a lattice, or any slab of a list, gives the values
    /// of the whole sum to the bit).
    ///
    /// Sources are host data (k-space positions, uploaded once per call);
    /// the output is returned to the host. Work is split into ranges of
    /// targets, and `progress(done, total)` is called after each. One
    /// device computes it; `recon_ops::sum_exp_on_shards` splits the
    /// targets over every shard.
    #[allow(clippy::too_many_arguments)]
    fn sum_exp(
        &self,
        out: &mut [Complex<Self::Real>],
        targets: Targets<'_>,
        first: usize,
        sources: &[[f64; 3]],
        coef: &[Complex<Self::Real>],
        sign: Sign,
        progress: Progress<'_>,
    ) -> Result<()>;

    // --- vectors --------------------------------------------------------

    fn zeros(&self, len: usize) -> Result<Self::Vector>;
    fn upload(&self, host: &[Complex<Self::Real>]) -> Result<Self::Vector>;
    fn download(&self, out: &mut [Complex<Self::Real>], x: &Self::Vector) -> Result<()>;
    /// `x` in a new host vector ([`crate::memory::host_vec`], then
    /// [`Backend::download`]).
    fn to_host(&self, x: &Self::Vector) -> Result<Vec<Complex<Self::Real>>> {
        let mut out = crate::memory::host_vec(self.len(x));
        self.download(&mut out, x)?;
        Ok(out)
    }
    fn len(&self, x: &Self::Vector) -> usize;
    /// `out = x`
    fn copy(&self, out: &mut Self::Vector, x: &Self::Vector) -> Result<()>;
    /// `y = y + a x`
    fn axpy(&self, y: &mut Self::Vector, a: f64, x: &Self::Vector) -> Result<()>;
    /// `Re <x, y> = Re sum conj(x_i) y_i`, accumulated in at least f64,
    /// read back to the host (on the GPU, a wait for the queue).
    fn dot_re(&self, x: &Self::Vector, y: &Self::Vector) -> Result<f64>;

    // --- solver scalars -------------------------------------------------
    // CG keeps its dot products where its vectors are and takes its
    // coefficients from them there ([`Ratio`]), so the host can queue
    // iteration after iteration and read the scalars now and then.

    /// Scalars on the device, set to `init`.
    fn scalars(&self, init: &[f64]) -> Result<Self::Scalars>;
    /// Copies the scalars to the host, waiting for what writes them.
    fn read_scalars(&self, out: &mut [f64], s: &Self::Scalars) -> Result<()>;
    /// `s[slot] = Re <x, y>`, left on the device.
    fn dot_re_to(
        &self,
        s: &mut Self::Scalars,
        slot: usize,
        x: &Self::Vector,
        y: &Self::Vector,
    ) -> Result<()>;
    /// `y = y + a c x`, with `c = ratio.of(s)`.
    fn axpy_ratio(
        &self,
        y: &mut Self::Vector,
        a: f64,
        ratio: Ratio,
        s: &Self::Scalars,
        x: &Self::Vector,
    ) -> Result<()>;
    /// `y = x + c y`, with `c = ratio.of(s)`.
    fn xpby_ratio(
        &self,
        y: &mut Self::Vector,
        x: &Self::Vector,
        ratio: Ratio,
        s: &Self::Scalars,
    ) -> Result<()>;
    /// `y = y + a c x` (c = `ratio.of(s)`), then `s[slot] = Re <y, y>`:
    /// CG's residual update and its squared norm, which a device may do in
    /// one pass over the vectors.
    #[allow(clippy::too_many_arguments)]
    fn axpy_norm_to(
        &self,
        y: &mut Self::Vector,
        a: f64,
        ratio: Ratio,
        s: &mut Self::Scalars,
        x: &Self::Vector,
        slot: usize,
    ) -> Result<()> {
        self.axpy_ratio(y, a, ratio, s, x)?;
        self.dot_re_to(s, slot, y, y)
    }
    /// `x = x + a c p` with `c = step.of(s)`, then `p = r + d p` with `d =
    /// beta.of(s)`: CG's updates of the iterate and the direction, which a
    /// device may do in one pass.
    #[allow(clippy::too_many_arguments)]
    fn cg_update(
        &self,
        x: &mut Self::Vector,
        a: f64,
        step: Ratio,
        p: &mut Self::Vector,
        r: &Self::Vector,
        beta: Ratio,
        s: &Self::Scalars,
    ) -> Result<()> {
        self.axpy_ratio(x, a, step, s, p)?;
        self.xpby_ratio(p, r, beta, s)
    }
    /// How many iterations a solver should queue between reads of its
    /// scalars: 1 where a read costs nothing (the CPU computes as it is
    /// called), more where each read drains the device's queue.
    fn read_every(&self) -> usize {
        1
    }

    // --- Toeplitz pieces ------------------------------------------------

    /// The plan of in-place 3-D FFTs of shape `shape`.
    fn fft_plan(&self, shape: [usize; 3]) -> Result<Self::Fft>;
    /// In-place 3-D FFT of `x` by `plan` (the inverse normalised).
    fn fft3(&self, plan: &Self::Fft, x: &mut Self::Vector, dir: Direction) -> Result<()>;
    /// `x = x .* y`, elementwise.
    fn mul(&self, x: &mut Self::Vector, y: &Self::Vector) -> Result<()>;
    /// `out = 1 / (re a + rho re b)`, real, elementwise (a diagonal's
    /// inverse: the circulant preconditioner's from its eigenvalues).
    fn inverse_sum(
        &self,
        out: &mut Self::Vector,
        a: &Self::Vector,
        rho: f64,
        b: &Self::Vector,
    ) -> Result<()>;
    /// Zero-pads the `n` image `x` into the corner (indices `0..n`) of the
    /// `2n` grid `out`.
    fn pad(&self, out: &mut Self::Vector, x: &Self::Vector, n: [usize; 3]) -> Result<()>;
    /// Takes the corner `0..n` of the `2n` grid `x` into `out`: the adjoint of `pad`.
    fn crop(&self, out: &mut Self::Vector, x: &Self::Vector, n: [usize; 3]) -> Result<()>;

    /// The Toeplitz kernel `FFT(ifftshift(q))` of Q on the `2n` grid
    /// (shape `d`, even), uploaded: Q's lag 0 moved to index 0. The default
    /// shifts on the host, uploads and calls `fft3`; a device may instead
    /// fold the shift into its FFT, and keep only the real part where its
    /// own `toeplitz` reads it so (Q is Hermitian but for its lags `-n`,
    /// which the product never uses).
    fn fft_q(&self, q: &[Complex<Self::Real>], d: [usize; 3]) -> Result<Self::Vector> {
        fft_q_by_pieces(self, q, d)
    }

    /// The plan of the Toeplitz product for images of shape `n`.
    fn toeplitz_plan(&self, n: [usize; 3]) -> Result<Self::ToeplitzPlan>;

    /// The Toeplitz product `out = crop(IFFT(fq .* FFT(pad(x))))` on the
    /// `2n` grid of `plan`, with `work` a `(2n)^3` scratch vector.
    /// [`toeplitz_by_pieces`] composes the pieces above; a device may
    /// instead skip the FFT work on the zero part of the padded input and
    /// on the cropped-away part of the output, and fuse the pieces.
    fn toeplitz(
        &self,
        plan: &Self::ToeplitzPlan,
        out: &mut Self::Vector,
        x: &Self::Vector,
        fq: &Self::Vector,
        work: &mut Self::Vector,
    ) -> Result<()>;

    /// CG's map and dot over the Toeplitz product: `out = T x`, plus
    /// `a W^H W x` with `prior = Some((a, w))`, then `s[slot] = Re <x,
    /// out>`. [`toeplitz_dot_by_pieces`] makes the calls one by one; a
    /// device may take the dot in the product's last pass, and fold a
    /// uniform W^H W (every edge 1, no diagonal: a convolution but at the
    /// grid's faces) into the product's FFT(Q), the faces mended in that
    /// last pass too.
    #[allow(clippy::too_many_arguments)]
    fn toeplitz_dot(
        &self,
        plan: &Self::ToeplitzPlan,
        out: &mut Self::Vector,
        x: &Self::Vector,
        fq: &Self::Vector,
        work: &mut Self::Vector,
        prior: Option<(f64, &Self::Weights)>,
        s: &mut Self::Scalars,
        slot: usize,
    ) -> Result<()> {
        toeplitz_dot_by_pieces(self, plan, out, x, fq, work, prior, s, slot)
    }

    /// CG's updates `u` of the iterate and the direction p, then
    /// [`Backend::toeplitz_dot`] of the new p. By default
    /// [`Backend::cg_update`], then the map; a device may make the updates
    /// in the product's first pass, which reads p anyway (one pass over
    /// p fewer).
    #[allow(clippy::too_many_arguments)]
    fn toeplitz_update_dot(
        &self,
        plan: &Self::ToeplitzPlan,
        u: CgStep<'_, Self::Vector>,
        out: &mut Self::Vector,
        p: &mut Self::Vector,
        fq: &Self::Vector,
        work: &mut Self::Vector,
        prior: Option<(f64, &Self::Weights)>,
        s: &mut Self::Scalars,
        slot: usize,
    ) -> Result<()> {
        u.apply(self, p, s)?;
        self.toeplitz_dot(plan, out, p, fq, work, prior, s, slot)
    }

    // --- coils ----------------------------------------------------------

    /// A coil's sensitivity map `s` applied to `x` elementwise, as `op`
    /// says: SENSE's `S_c` and `S_c^H` around the one Toeplitz product.
    fn coil(
        &self,
        out: &mut Self::Vector,
        op: CoilOp,
        s: &Self::Vector,
        x: &Self::Vector,
    ) -> Result<()>;

    /// One coil's term of SENSE's normal operator, `out = conj(s) . T(s . x)`
    /// (`accumulate`: `out += ...`), T the Toeplitz product of `fq` by
    /// `plan` (`work` its scratch, as in [`Backend::toeplitz`]), `scratch`
    /// two image-sized vectors. [`toeplitz_coil_by_pieces`] composes
    /// [`Backend::coil`] and [`Backend::toeplitz`]; a device may instead
    /// fold the map into the product's first read and last write.
    #[allow(clippy::too_many_arguments)]
    fn toeplitz_coil(
        &self,
        plan: &Self::ToeplitzPlan,
        out: &mut Self::Vector,
        accumulate: bool,
        s: &Self::Vector,
        x: &Self::Vector,
        fq: &Self::Vector,
        work: &mut Self::Vector,
        scratch: (&mut Self::Vector, &mut Self::Vector),
    ) -> Result<()> {
        toeplitz_coil_by_pieces(self, plan, out, accumulate, s, x, fq, work, scratch)
    }

    // --- sparse priors (recon-ops) ---------------------------------------
    // Vectors of fields hold `g` components, each a whole image, one after
    // another: component `a` of voxel `i` is at `a N + i`.

    /// `x = a x`
    fn scale(&self, x: &mut Self::Vector, a: f64) -> Result<()>;

    /// `out[at..at + len] = x[from..from + len]`: the blocks of a stacked
    /// operator's vectors.
    fn copy_part(
        &self,
        out: &mut Self::Vector,
        at: usize,
        x: &Self::Vector,
        from: usize,
        len: usize,
    ) -> Result<()>;

    /// Forward differences of the image `x` (shape `n`) into the 3-component
    /// field `out`: `out[a][i] = x[i + e_a] - x[i]`, 0 where `i + e_a` lies
    /// outside the grid (a symmetric, Neumann boundary).
    fn grad(&self, out: &mut Self::Vector, x: &Self::Vector, n: [usize; 3]) -> Result<()>;

    /// The adjoint of [`Backend::grad`] (minus the divergence):
    /// `out[i] = sum_a y[a][i - e_a] - y[a][i]`, each term present where
    /// the difference it comes from is.
    fn grad_adjoint(&self, out: &mut Self::Vector, y: &Self::Vector, n: [usize; 3]) -> Result<()>;

    /// Per group `v` of `components` values (component `a` of group `i` at
    /// `a len / components + i`), with `|v|` its Euclidean norm over the
    /// complex components: `kind` with threshold `t`.
    fn group_prox(
        &self,
        x: &mut Self::Vector,
        t: f64,
        components: usize,
        kind: GroupProx,
    ) -> Result<()>;

    /// Per voxel, the 3-component field `v` projected off the real unit-or-
    /// shorter field `xi` (its imaginary parts are 0): `v = v - xi (xi . v)`.
    /// Directional total variation's weighting.
    fn project_off(&self, v: &mut Self::Vector, xi: &Self::Vector) -> Result<()>;

    /// One level of the orthonormal periodic Daubechies-2 wavelet transform
    /// along `axis` of the corner `extent` of the image `x` (shape `n`; the
    /// extent along `axis` even): forward, the corner's first half along
    /// the axis receives the scaling (low-pass) coefficients and its second
    /// half the wavelet (high-pass) ones; `inverse`, the synthesis from
    /// them (the forward map's adjoint). Outside the corner `out = x`.
    fn dwt(
        &self,
        out: &mut Self::Vector,
        x: &Self::Vector,
        n: [usize; 3],
        extent: [usize; 3],
        axis: usize,
        inverse: bool,
    ) -> Result<()>;

    /// `out[(c + shift) mod n] = x[c]` for the image `x` of shape `n`: the
    /// circular shift.
    fn roll(
        &self,
        out: &mut Self::Vector,
        x: &Self::Vector,
        n: [usize; 3],
        shift: [usize; 3],
    ) -> Result<()>;

    /// Soft thresholding by `t`, `v = max(0, 1 - t / |v|) v`, of every value
    /// outside the corner `corner` of each image (shape `n`) of `x`, whose
    /// length is a whole number of images.
    fn shrink_outside(
        &self,
        x: &mut Self::Vector,
        n: [usize; 3],
        corner: [usize; 3],
        t: f64,
    ) -> Result<()>;

    // --- regulariser ----------------------------------------------------

    /// Copies the stencil's squared weights to the device.
    fn upload_weights(&self, w: &Stencil) -> Result<Self::Weights>;
    /// `out = out + a W^H W x`, with W the weighted stencil (see [`Stencil`]).
    fn add_whw(
        &self,
        out: &mut Self::Vector,
        a: f64,
        x: &Self::Vector,
        w: &Self::Weights,
    ) -> Result<()>;
    /// [`Backend::add_whw`], then `s[slot] = <x, out>`: CG's `<p, A p>`
    /// taken along with the regulariser's pass. This default is the two
    /// calls.
    fn add_whw_dot_to(
        &self,
        out: &mut Self::Vector,
        a: f64,
        x: &Self::Vector,
        w: &Self::Weights,
        s: &mut Self::Scalars,
        slot: usize,
    ) -> Result<()> {
        self.add_whw(out, a, x, w)?;
        self.dot_re_to(s, slot, x, out)
    }
}
