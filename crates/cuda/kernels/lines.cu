// FFTs along lines of a 3-D grid, of our own, for the pruned Toeplitz
// product (toeplitz.rs) and the NUFFT's fine grid (nufft.rs); lines.rs
// launches them.
//
// fft_lines_L transforms lines of length L from one buffer to another
// (or in place). A line reads only the points it has (the rest are zero)
// and writes only those wanted, either the first n or, "centred", the n
// modes of lowest frequency in the order -n/2 .. n/2 - 1; each side may
// multiply by a factor per point. So zero padding, cropping, picking a
// NUFFT's modes out of its fine grid and the deconvolution cost no pass of
// their own.
//
// toeplitz_columns_L is the middle of the Toeplitz product: along z, for
// each (x, y) column of the 2N grid (of which only the planes z < N are
// held), column = IFFT( scale * fq .* FFT(column) ), lower half kept, in
// one pass through shared memory. fq is real (FFT(Q) of a Hermitian Q,
// toeplitz.rs): half the bytes of a complex kernel.
//
// Each kernel is Stockham FFTs along its lines (stockham.cuh: the passes,
// their layout in shared memory, the maps), with its own reads and writes.

#include "ratio.cuh"
#include "reduce.cuh"
#include "stockham.cuh"

// cos and sin of 2 pi (g / PT + r / R) for g < G, r < R, as constants:
// the turns from a thread's first frequency tj to the others its last
// forward pass writes, tj + g L / PT + r L / R (toeplitz_columns).
template <int G, int R, int PT>
struct Turns {
    float c[G * R], s[G * R];
    __host__ __device__ constexpr Turns() : c(), s()
    {
        for (int g = 0; g < G; g++)
            for (int r = 0; r < R; r++) {
                int m = (g * R + r * PT) % (PT * R);
                if (2 * m > PT * R) m -= PT * R;
                const double x = 6.283185307179586476925 * m / (PT * R);
                c[g * R + r] = (float)series(x, 0);
                s[g * R + r] = (float)series(x, 1);
            }
    }
};

// work: the planes z < nz of the 2N grid (P points each), transformed
// along x and y already; fq: FFT(Q), real, all L = 2 nz planes; twiddles:
// L points exp(i 2pi k / L). Blocks of C * L / columns_points(L) threads, C columns each
// (wide); dynamic shared memory: L float2 of twiddles, then the columns
// in rows of C (at): L rows, and L / R1 of padding where C < 16.
//
// The forward FFT's first pass reads the column from global memory (its
// upper half zero: PAD) and its last pass multiplies by scale * FFT(Q) on
// the way to shared memory; the inverse FFT's last pass computes and
// writes the lower half only (CROP), back to global memory. L = 2 nz
// (toeplitz.rs).
//
// With `symbol` (not null) the multiplier is scale FFT(Q) + lam S, lam =
// scale lambda: S(k) = sum over the axes of 2 - 2 cos(2 pi k_d / L_d), the
// FFT of the uniform stencil's Toeplitz part (6 at lag 0, -1 at the lags
// +-e_d), so that the product is T + lambda W^H W but at the grid's faces
// (toeplitz.rs). symbol holds S_x + S_y of each column, one value a
// column; along z each thread turns exp(i 2 pi tj / L) by constants
// (Turns), which cost the 256^3 columns less than a table read
// (bench/h100-2026-11-27-fold).
template <int L>
__device__ __forceinline__ void columns(float2* work, const float* __restrict__ fq,
                                        const float2* __restrict__ twiddles, long long P, int nz, float scale,
                                        const float* __restrict__ symbol, float lam)
{
    constexpr int C = columns_for(L, true);
    constexpr int PT = columns_points(L);
    constexpr int R = last_radix(L, PT);
    constexpr int G = (PT + R - 1) / R;
    const Block b = block<L, C, PT>(twiddles);
    const int c = b.c, tj = b.tj;
    const long long x = b.line;
    // Column x: point z at z * P + x.
    const Map m{0, 1, P, 1 << 30, nz, 0, 0, nullptr};
    const LineT<false> col(work, work, m, m, (int)x, x < P, L);

    // lam (S_x + S_y + 2) of this column, and exp(i 2 pi tj / L).
    float base = 0.0f;
    float2 t0 = make_float2(1.0f, 0.0f);
    if (symbol && col.inside) {
        base = lam * (symbol[x] + 2.0f);
        t0 = twiddles[tj];
    }
    // The multiplier at the points this thread's last forward pass writes
    // (j + r L/R for its groups j), loaded before the FFT so that the
    // product does not wait for memory.
    constexpr Turns<G, R, PT> turns{};
    float f[G * R];
#pragma unroll
    for (int g = 0; g < G; g++) {
#pragma unroll
        for (int r = 0; r < R; r++) {
            int k = tj + g * (L / PT) + r * (L / R);
            // lam (S_x + S_y + 2 - 2 cos(2 pi k / L)); the turns of 0 and
            // +-1 (a quarter of them, or half) cost no arithmetic.
            const float tc = turns.c[g * R + r], ts = turns.s[g * R + r];
            const float cz = ts == 0.0f   ? tc * t0.x
                             : tc == 0.0f ? -ts * t0.y
                                          : fmaf(t0.x, tc, -t0.y * ts);
            const float add = symbol ? fmaf(-2.0f * lam, cz, base) : 0.0f;
            f[g * R + r] = (col.inside && tj + g * (L / PT) < L / R) ? fmaf(scale, load_prefetch(fq + k * P + x), add)
                                                                      : 0.0f;
        }
    }

    // The twiddles are first read by the second pass, after the first's
    // synchronisation. Between the transforms the points stay in registers
    // where the passes allow (hands_over).
    constexpr Place MID = hands_over(L, PT) ? REGS : SHARED;
    float2 regs[MID == REGS ? PT : 1];
    fft_columns<L, C, PT, 1, GLOBAL, MID, true, false>(b.S, b.tw, c, tj, -1.0f, col, f, regs);
    fft_columns<L, C, PT, 1, MID, GLOBAL, false, true>(b.S, b.tw, c, tj, 1.0f, col, nullptr, regs);
}

// The FFT of sign s of `lines` lines of length L, from src (map mi) to dst
// (map mo), through shared memory: the first pass reads global memory, the
// last writes it. A null src reads dst: in place (a block reads all of its
// lines before it writes any). Blocks and shared memory as columns<L>, C
// columns a block (columns_for). COIL: with the maps' coil maps (SENSE's
// term of one coil). PAD: mi is plain with n = L/2 (the upper half zero);
// CROP: mo is plain with n = L/2 (the lower half written; see pass).
template <int L, int C, bool COIL, bool PAD, bool CROP>
__device__ __forceinline__ void lines(float2* dst, const float2* src, Map mo, Map mi, int count,
                                      const float2* __restrict__ twiddles, float s)
{
    const Block b = block<L, C, 8>(twiddles);
    const LineT<COIL> line(src ? src : dst, dst, mi, mo, (int)b.line, b.line < count, L);
    fft_columns<L, C, 8, 1, GLOBAL, GLOBAL, PAD, CROP>(b.S, b.tw, b.c, b.tj, s, line, nullptr, nullptr);
}

// CG's dot taken in the Toeplitz product's last pass (toeplitz.rs): the
// inverse x lines of fft_lines_crop_L, cropped into the image `out`,
// each value then less a b(i) x[i] at voxel i (b(i) the number of the
// grid's faces it lies on, where the uniform stencil, folded into the z
// columns as a convolution, lacks neighbours; an axis of 1 voxel counts
// twice; a = 0 without a prior), and Re <x, out> summed per thread in
// double. Line q is the image's row (y, z) = (q % ny, q / ny), written at
// q nx (mo: rows of nx = L/2 points); x is the product's input, laid out
// as out. This replaces a pass of its own that read x and out again.
struct DotLine : LineT<false> {
    const float2* x;
    float a;
    int faces;  // the row's faces along y and z
    mutable double acc = 0.0;
    __device__ __forceinline__ DotLine(const float2* src_, float2* dst_, const Map& mi_, const Map& mo_, int q,
                                       bool inside_, int len_, const float2* x_, float a_, int ny, int nz)
        : LineT<false>(src_, dst_, mi_, mo_, q, inside_, len_), x(x_), a(a_)
    {
        const int y = q % ny, z = q / ny;
        faces = (y == 0) + (y == ny - 1) + (z == 0) + (z == nz - 1);
    }
    __device__ __forceinline__ void store(int i, float2 v) const
    {
        const int k = point_of(mo, i, len);
        if (k < 0 || !inside) return;
        const float2 xi = x[out + k];
        const int b = faces + (k == 0) + (k == mo.n - 1);
        if (a != 0.0f && b) {
            const float ab = a * (float)b;
            v = make_float2(v.x - ab * xi.x, v.y - ab * xi.y);
        }
        dst[k] = v;
        acc += (double)xi.x * v.x + (double)xi.y * v.y;
    }
};

// fft_lines_crop_L with DotLine's stores: partial[block] = the block's part
// of Re <x, out> (vector.cu's sum_partials adds the parts). The block's
// sum goes through the shared memory its lines held, once the last pass
// has read them.
template <int L, int C>
__device__ __forceinline__ void crop_dot(double* partial, float2* dst, const float2* src, Map mo, Map mi, int count,
                                         const float2* __restrict__ twiddles, const float2* __restrict__ x, float a,
                                         int ny, int nz)
{
    const Block b = block<L, C, 8>(twiddles);
    const DotLine line(src, dst, mi, mo, (int)b.line, b.line < count, L, x, a, ny, nz);
    fft_columns<L, C, 8, 1, GLOBAL, GLOBAL, false, true>(b.S, b.tw, b.c, b.tj, 1.0f, line, nullptr, nullptr);
    __syncthreads();
    block_sum<C * L / 8>(&partial[blockIdx.x], line.acc, reinterpret_cast<double*>(b.S));
}

// CG's updates made in the Toeplitz product's first pass (toeplitz.rs):
// the x lines of fft_lines_pad_L read p (mi: the image's rows), and each
// point read first becomes p = r + d p, with x = x + c p of the old p on
// the way, both written back (vector.cu's cg_update, the same arithmetic:
// cg_step). The pass reads each point of p once, so this replaces
// cg_update's pass, and the product reads p no more than before.
struct UpdateLine : LineT<false> {
    float2* p;  // src, writable
    float2* x;
    const float2* r;
    CgCoefficients k;
    __device__ __forceinline__ UpdateLine(float2* p_, float2* dst_, const Map& mi_, const Map& mo_, int q,
                                          bool inside_, int len_, float2* x_, const float2* r_, CgCoefficients k_)
        : LineT<false>(p_, dst_, mi_, mo_, q, inside_, len_), p(p_), x(x_), r(r_), k(k_)
    {
    }
    // The padded first pass asks for points i < L/2 only, which the map
    // (rows of L/2 points, lines.rs) holds at in + i. A group's points are
    // all read before any is written: point by point, each write waited
    // for its reads before the next point's were issued.
    template <int N, int G>
    __device__ __forceinline__ void load_group(float2* v, int j) const
    {
        if (!inside) {
#pragma unroll
            for (int m = 0; m < N; m++) v[m] = make_float2(0.0f, 0.0f);
            return;
        }
        float2 xs[N], ps[N], rs[N];
#pragma unroll
        for (int m = 0; m < N; m++) {
            const long long at = in + j + m * G;
            xs[m] = x[at];
            ps[m] = p[at];
            rs[m] = r[at];
        }
#pragma unroll
        for (int m = 0; m < N; m++) {
            const long long at = in + j + m * G;
            const CgStepped t = cg_step(xs[m], ps[m], rs[m], k.c, k.d);
            x[at] = t.x;
            p[at] = t.p;
            v[m] = t.p;
        }
    }
};

// fft_lines_pad_L with UpdateLine's loads, the coefficients taken as
// cg_update takes them. The scalars are read after block(), which waits
// for the kernel that wrote them.
template <int L, int C>
__device__ __forceinline__ void pad_update(float2* dst, float2* p, Map mo, Map mi, int count,
                                           const float2* __restrict__ twiddles, float2* x, const float2* r, double a,
                                           const double* s, int step_num, int step_den, int beta_num, int beta_den,
                                           int floor)
{
    const Block b = block<L, C, 8>(twiddles);
    const CgCoefficients k = cg_coefficients(a, s, step_num, step_den, beta_num, beta_den, floor);
    const UpdateLine line(p, dst, mi, mo, (int)b.line, b.line < count, L, x, r, k);
    fft_columns<L, C, 8, 1, GLOBAL, GLOBAL, true, false>(b.S, b.tw, b.c, b.tj, -1.0f, line, nullptr, nullptr);
}

// The kernels of one line length L (one of lines.rs's LENGTHS), in three
// modules, so that a run compiles only the set it launches (side by side):
// -DLENGTH=L, plain FFTs (the NUFFT's fine grid, FFT(Q)): fft_lines_L and
// fft_lines_coil_L with narrow blocks (lines along x) and their _wide
// twins (strided lines); -DTOEPLITZ=L, the Toeplitz product's (toeplitz.rs):
// toeplitz_columns_L, and its x and y lines, zero-padded forward
// (fft_lines_pad_L) and cropped inverse (fft_lines_crop_L), with _wide
// twins for the y lines; -DTOEPLITZ_DOT=L, CG's x lines: the cropped
// inverse with CG's dot (fft_lines_crop_dot_L) and the padded forward with
// CG's updates (fft_lines_pad_update_L). SENSE's x lines through a coil
// map take the plain fft_lines_coil_L: pruned twins of those cost the
// module's compile (kept once per machine, but a cold start's longest)
// more than they would gain. (The CPU emulation defines all three.)
// Launch bounds: 1536 threads an SM (three quarters of Hopper's 2048, at
// most 40 registers a thread), where 1024 (56 registers) was the bound
// before: the kernels wait on shared memory and their barriers more than
// they issue, and more warps hide that. On an H200
// (bench/h100-2026-11-27-yz-fused), the y lines, z columns and y lines
// inverse at L = 512: 1.38 -> 1.26 ms; L = 256: 144 -> 139 us. 2048 for
// the lines gained at 512 and lost at 256; the columns spilled there.
#define THREADS(L, W) (columns_for(L, W) * (L) / 8)
#define BOUNDS(L, W) __launch_bounds__(THREADS(L, W), 1536 / THREADS(L, W))
#define LINE_KERNEL(NAME, L, W, COIL, PAD, CROP)                                                            \
    extern "C" __global__ void BOUNDS(L, W) NAME(float2* dst, const float2* src, Map mo, Map mi, int count, \
                                                 const float2* __restrict__ tw, float s)                   \
    {                                                                                                        \
        lines<L, columns_for(L, W), COIL, PAD, CROP>(dst, src, mo, mi, count, tw, s);                        \
    }
// The _wide kernels exist only where the widths differ (lines.rs's
// `has_wide`, which a test holds to this list): elsewhere a pass across
// lines takes the narrow kernels, and the module compiles no copies.
#define WIDE(L) ((L) >= 256)
#define PLAIN_KERNELS(L, W, SUFFIX)                                    \
    LINE_KERNEL(fft_lines_##L##SUFFIX, L, W, false, false, false) \
    LINE_KERNEL(fft_lines_coil_##L##SUFFIX, L, W, true, false, false)
#define PRUNED_KERNELS(L, W, SUFFIX)                                       \
    LINE_KERNEL(fft_lines_pad_##L##SUFFIX, L, W, false, true, false) \
    LINE_KERNEL(fft_lines_crop_##L##SUFFIX, L, W, false, false, true)
// toeplitz_columns: as the lines, or at most 128 registers a thread where a
// thread holds more than 8 points (768 threads an SM, 85 registers, made
// the 256 columns 36% slower: bench/h100-2026-11-27-yz-fused).
#define COLUMN_THREADS(L) (columns_for(L, true) * (L) / columns_points(L))
#define COLUMN_BOUNDS(L)                                                                                     \
    __launch_bounds__(COLUMN_THREADS(L), (columns_points(L) > 8 ? 512 : 1536) / COLUMN_THREADS(L))
#define TOEPLITZ_KERNELS(L)                                                                                  \
    extern "C" __global__ void COLUMN_BOUNDS(L)                                                             \
        toeplitz_columns_##L(float2* work, const float* __restrict__ fq, const float2* __restrict__ tw, long long P, \
                             int nz, float scale, const float* __restrict__ symbol, float lam)               \
    {                                                                                                        \
        columns<L>(work, fq, tw, P, nz, scale, symbol, lam);                                                 \
    }                                                                                                        \
    PRUNED_KERNELS(L, false, )
// CG's x lines, a module of their own (-DTOEPLITZ_DOT=L), compiled beside
// the product's: the dot in its module made that module's compile, a cold
// start's longest, 40% longer (bench/h100-2026-11-27-warp-sums).
#define TOEPLITZ_DOT_KERNEL(L)                                                                               \
    extern "C" __global__ void BOUNDS(L, false)                                                              \
        fft_lines_crop_dot_##L(double* partial, float2* dst, const float2* src, Map mo, Map mi, int count,     \
                               const float2* __restrict__ tw, const float2* __restrict__ x, float a, int ny, int nz) \
    {                                                                                                        \
        crop_dot<L, columns_for(L, false)>(partial, dst, src, mo, mi, count, tw, x, a, ny, nz);              \
    }                                                                                                        \
    extern "C" __global__ void BOUNDS(L, false)                                                              \
        fft_lines_pad_update_##L(float2* __restrict__ dst, float2* __restrict__ p, Map mo, Map mi, int count,     \
                                 const float2* __restrict__ tw, float2* __restrict__ x, const float2* __restrict__ r, double a, const double* __restrict__ s, \
                                 int step_num, int step_den, int beta_num, int beta_den, int floor)            \
    {                                                                                                        \
        pad_update<L, columns_for(L, false)>(dst, p, mo, mi, count, tw, x, r, a, s, step_num, step_den, beta_num, \
                                             beta_den, floor);                                               \
    }

#if !defined(LENGTH) && !defined(TOEPLITZ) && !defined(TOEPLITZ_DOT)
#error "lines.cu is compiled once per line length, with -DLENGTH=L, -DTOEPLITZ=L or -DTOEPLITZ_DOT=L"
#endif
#define INSTANTIATE_PLAIN(L) PLAIN_KERNELS(L, false, )
#define INSTANTIATE_PLAIN_WIDE(L) PLAIN_KERNELS(L, true, _wide)
#define INSTANTIATE_TOEPLITZ(L) TOEPLITZ_KERNELS(L)
#define INSTANTIATE_TOEPLITZ_WIDE(L) PRUNED_KERNELS(L, true, _wide)
#ifdef LENGTH
INSTANTIATE_PLAIN(LENGTH)
#if WIDE(LENGTH)
INSTANTIATE_PLAIN_WIDE(LENGTH)
#endif
#endif
#ifdef TOEPLITZ
INSTANTIATE_TOEPLITZ(TOEPLITZ)
#if WIDE(TOEPLITZ)
INSTANTIATE_TOEPLITZ_WIDE(TOEPLITZ)
#endif
#endif
#define INSTANTIATE_TOEPLITZ_DOT(L) TOEPLITZ_DOT_KERNEL(L)
#ifdef TOEPLITZ_DOT
INSTANTIATE_TOEPLITZ_DOT(TOEPLITZ_DOT)
#endif
