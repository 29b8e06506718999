// The NUFFT on the GPU (recon-cuda's nufft.rs drives these), in the way of
// cuFINUFFT (Shih et al. 2021): points are sorted once per plan into bins
// of the upsampled ("fine") grid, a tile of bins at a time; type 1 spreads
// each bin's points into a shared-memory copy of the bin and its kernel
// overhang (a subproblem of at most `maxsub` points; in fixed point, by
// integer atomics, at tolerances 1e-5 and above), then adds that copy into the fine
// grid; type 2
// interpolates from a shared-memory copy of each subproblem's bin (or
// from the fine grid), a group of lanes per sorted point reading the rows
// of its footprint together. The deconvolution by the kernel's transform
// and the shift between centred modes and the FFT's order are one kernel
// each way. The spreading kernels are in spread.cuh, the interpolation's
// in interp.cuh.
//
// Conventions as in recon-nufft (FINUFFT's): points x in radians, fine
// grid coordinate u = frac(x / 2pi) n; a point covers the W cells
// first + j, first = ceil(u - W/2), at offsets t = j - W/2 + a with
// a = first - u + W/2 in [0, 1). The ES kernel is
// exp(beta (sqrt(1 - (2t/W)^2) - 1)). Positions are located in double,
// and only the offset a is rounded to float, so that rounding does not
// grow with the grid. Fine grids are float2, x fastest.

#define TWO_PI 6.283185307179586

// Fine-grid coordinate of x along an axis of n cells, in [0, n).
__device__ inline double fine_coord(double x, int n)
{
    double t = x / TWO_PI;
    t -= floor(t);
    double u = t * n;
    return u >= n ? 0.0 : u;
}

// The first cell of the footprint of u (unwrapped: it may be negative)
// and the offset a.
__device__ inline int footprint_first(double u, int W, float* a)
{
    double f = ceil(u - 0.5 * W);
    *a = (float)(f - u + 0.5 * W);
    return (int)f;
}

struct Geometry {
    int n[3];   // fine grid
    int bs[3];  // bin size
    int nb[3];  // bins per axis
    int bt[3];  // bins per tile of the sort order (each at most nb)
};
// The size `Geometry` in nufft.rs has (NVRTC has no offsetof; nufft.rs
// also checks the fields' offsets).
static_assert(sizeof(Geometry) == 48, "Geometry's size differs from nufft.rs");

// The sort key of bin (bx, by, bz), a bijection onto 0 .. bins - 1: the
// bins go a tile of bt bins at a time (tiles x fastest, those at the
// grid's far ends cut short), x fastest within a tile. Points are sorted
// and spread in this order, so that the points in flight together touch
// one compact block of the fine grid, which L2 keeps between neighbouring
// bins (in plain x-fastest order they sweep whole planes, and a bin's
// overhang along z is read again from memory). With bt = nb it is the
// plain order.
__host__ __device__ inline int bin_key(int bx, int by, int bz, const Geometry& g)
{
    const int tx = bx / g.bt[0], ty = by / g.bt[1], tz = bz / g.bt[2];
    const int dx = min(g.bt[0], g.nb[0] - tx * g.bt[0]), dy = min(g.bt[1], g.nb[1] - ty * g.bt[1]),
              dz = min(g.bt[2], g.nb[2] - tz * g.bt[2]);
    // Tiles before this one: whole layers of tiles, whole rows of this
    // layer, tiles of this row; then the bin's place in its tile.
    return tz * g.bt[2] * g.nb[1] * g.nb[0] + dz * ty * g.bt[1] * g.nb[0] + dz * dy * tx * g.bt[0] +
           ((bz - tz * g.bt[2]) * dy + by - ty * g.bt[1]) * dx + bx - tx * g.bt[0];
}

// The bin (b[0], b[1], b[2]) of sort key k: bin_key's inverse.
__host__ __device__ inline void key_bin(int* b, int k, const Geometry& g)
{
    const int layer = g.bt[2] * g.nb[1] * g.nb[0], tz = k / layer;
    k -= tz * layer;
    const int dz = min(g.bt[2], g.nb[2] - tz * g.bt[2]), row = dz * g.bt[1] * g.nb[0], ty = k / row;
    k -= ty * row;
    const int dy = min(g.bt[1], g.nb[1] - ty * g.bt[1]), tile = dz * dy * g.bt[0], tx = k / tile;
    k -= tx * tile;
    const int dx = min(g.bt[0], g.nb[0] - tx * g.bt[0]), lz = k / (dy * dx);
    k -= lz * dy * dx;
    b[0] = tx * g.bt[0] + k % dx;
    b[1] = ty * g.bt[1] + k / dx;
    b[2] = tz * g.bt[2] + lz;
}

// The sort key of a point's bin: by the cell of u, in bins of bs cells.
__device__ inline int bin_of_point(const double* x, long long m, const Geometry& g)
{
    int b[3];
    for (int d = 0; d < 3; d++) {
        int cell = (int)fine_coord(x[3 * m + d], g.n[d]);
        b[d] = min(cell / g.bs[d], g.nb[d] - 1);
    }
    return bin_key(b[0], b[1], b[2], g);
}

// One module holds the fixed kernels (nufft.cu compiled as it is); each
// of the five families, for one kernel width W, is a module of its own,
// nufft.cu compiled with -DSPREAD_SHARED=W, -DSPREAD_FIXED_POINT=W,
// -DSPREAD_GLOBAL=W, -DINTERPOLATE=W or -DINTERPOLATE_SHARED=W
// (kernels.rs): a run compiles only the widths it uses.
#if defined(SPREAD_SHARED) || defined(SPREAD_FIXED_POINT) || defined(SPREAD_GLOBAL) || defined(INTERPOLATE) || \
    defined(INTERPOLATE_SHARED)
#define FAMILY_MODULE
#endif
#ifndef FAMILY_MODULE
// Counts the points per bin (by sort key); rank[m]: the point's place within its bin.
extern "C" __global__ void nufft_count(int* __restrict__ bin, int* __restrict__ rank, int* __restrict__ count,
                                       const double* __restrict__ x, long long M, Geometry g)
{
    for (long long m = blockIdx.x * (long long)blockDim.x + threadIdx.x; m < M; m += (long long)gridDim.x * blockDim.x) {
        int b = bin_of_point(x, m, g);
        bin[m] = b;
        rank[m] = atomicAdd(&count[b], 1);
    }
}

#define SCAN_THREADS 1024

// out[i] = sum_{j < i} v(in[j]) for i = 0 .. n (n + 1 entries), by one
// block: v(c) = c, or ceil(c / div) when div > 0 (subproblems per bin).
extern "C" __global__ void nufft_scan(int* __restrict__ out, const int* __restrict__ in, int n, int div)
{
    __shared__ int part[SCAN_THREADS];
    int per = (n + SCAN_THREADS - 1) / SCAN_THREADS;
    int lo = min(n, threadIdx.x * per), hi = min(n, lo + per);
    int s = 0;
    for (int i = lo; i < hi; i++) s += div > 0 ? (in[i] + div - 1) / div : in[i];
    part[threadIdx.x] = s;
    __syncthreads();
    // Inclusive scan of the parts (Hillis-Steele).
    for (int off = 1; off < SCAN_THREADS; off <<= 1) {
        int v = threadIdx.x >= off ? part[threadIdx.x - off] : 0;
        __syncthreads();
        part[threadIdx.x] += v;
        __syncthreads();
    }
    int acc = threadIdx.x > 0 ? part[threadIdx.x - 1] : 0;
    for (int i = lo; i < hi; i++) {
        out[i] = acc;
        acc += div > 0 ? (in[i] + div - 1) / div : in[i];
    }
    if (threadIdx.x == SCAN_THREADS - 1) out[n] = part[SCAN_THREADS - 1];
}

// Puts each point in its sorted place: its footprint's first cells and
// offsets, and perm[i], the caller's index of sorted point i.
extern "C" __global__ void nufft_place(int* __restrict__ first, float* __restrict__ frac, unsigned* __restrict__ perm,
                                       const double* __restrict__ x, const int* __restrict__ bin,
                                       const int* __restrict__ rank, const int* __restrict__ start, long long M,
                                       int W, Geometry g)
{
    for (long long m = blockIdx.x * (long long)blockDim.x + threadIdx.x; m < M; m += (long long)gridDim.x * blockDim.x) {
        long long i = (long long)start[bin[m]] + rank[m];
        perm[i] = (unsigned)m;
        for (int d = 0; d < 3; d++) {
            float a;
            first[3 * i + d] = footprint_first(fine_coord(x[3 * m + d], g.n[d]), W, &a);
            frac[3 * i + d] = a;
        }
    }
}

// The subproblems of each bin (by sort key): at most maxsub points each.
// Subproblem s: sub[s] = (its bin's coordinates, its point count), and
// its first sorted point sub_first[s].
extern "C" __global__ void nufft_subproblems(int4* __restrict__ sub, int* __restrict__ sub_first,
                                             const int* __restrict__ count, const int* __restrict__ start,
                                             const int* __restrict__ sub_start, int bins, int maxsub, Geometry g)
{
    for (int b = blockIdx.x * blockDim.x + threadIdx.x; b < bins; b += gridDim.x * blockDim.x) {
        int bin[3];
        key_bin(bin, b, g);
        for (int s = sub_start[b], k = 0; s < sub_start[b + 1]; s++, k++) {
            sub[s] = make_int4(bin[0], bin[1], bin[2], min(maxsub, count[b] - k * maxsub));
            sub_first[s] = start[b] + k * maxsub;
        }
    }
}

#endif  // FAMILY_MODULE

// 1 / sqrt(s) and 2^x by the hardware's approximations (relative errors
// about 2^-23 and 2^-22), without the steps CUDA's rsqrtf and exp2f add
// for subnormal arguments and results, which the kernel's never are.
__device__ inline float fast_rsqrt(float s)
{
#if defined(__CUDA_ARCH__)
    float r;
    asm("rsqrt.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(s));
    return r;
#else
    return 1.0f / sqrtf(s);
#endif
}
__device__ inline float fast_exp2(float x)
{
#if defined(__CUDA_ARCH__)
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
#else
    return exp2f(x);
#endif
}

// The kernel's value at offset j - W/2 + a.
template <int W>
__device__ inline float kernel_value(int j, float a, float beta)
{
    const float z = (j + a) * (2.0f / W) - 1.0f;  // (2 (j + a) - W) / W
    const float s = 1.0f - z * z;
    const float r = fast_rsqrt(s), q = s * r;
    const float root = fmaf(0.5f * r, fmaf(-q, q, s), q);
    return s > 0.0f ? fast_exp2(beta * 1.44269504f * (root - 1.0f)) : 0.0f;
}

// The kernel's W values at offsets j - W/2 + a.
template <int W>
__device__ inline void kernel_values(float* k, float a, float beta)
{
#pragma unroll
    for (int j = 0; j < W; j++) k[j] = kernel_value<W>(j, a, beta);
}

__device__ inline int wrap(int i, int n)
{
    i %= n;
    return i < 0 ? i + n : i;
}

#include "spread.cuh"

#include "interp.cuh"

// One exported kernel per family and width: widths 2 to 8 serve
// tolerances down to 1e-6, all that float32 reaches (nufft.rs's WIDTHS).
// The extra level of macros expands the width before it is pasted.
#define SPREAD_SHARED_KERNEL(W)                                                                                            \
    extern "C" __global__ void nufft_spread_shared_##W(                                                                    \
        float2* fine, const float2* c, const int* first, const float* frac, const unsigned* perm, const int4* sub,         \
        const int* sub_first, int maxsub, float beta, Geometry g)                                                          \
    {                                                                                                                      \
        spread_shared<W>(fine, c, first, frac, perm, sub, sub_first, maxsub, beta, g);                                     \
    }
#define SPREAD_FIXED_POINT_KERNEL(W)                                                                                       \
    extern "C" __global__ void nufft_spread_fixed_point_##W(                                                               \
        float2* fine, const float2* c, const int* first, const float* frac, const unsigned* perm, const int4* sub,         \
        const int* sub_first, int maxsub, float beta, Geometry g)                                                          \
    {                                                                                                                      \
        spread_fixed_point<W>(fine, c, first, frac, perm, sub, sub_first, maxsub, beta, g);                                \
    }
#define SPREAD_GLOBAL_KERNEL(W)                                                                                            \
    extern "C" __global__ void nufft_spread_global_##W(float2* fine, const float2* c, const int* first,                    \
                                                       const float* frac, const unsigned* perm, long long M,              \
                                                       float beta, Geometry g)                                             \
    {                                                                                                                      \
        spread_global<W>(fine, c, first, frac, perm, M, beta, g);                                                          \
    }
#define INTERPOLATE_KERNEL(W)                                                                                              \
    extern "C" __global__ void __launch_bounds__(256, 4)                                                                  \
        nufft_interpolate_##W(float2* out, const float2* fine, const int* first, const float* frac,                        \
                              const unsigned* perm, long long M, float beta, Geometry g)                                   \
    {                                                                                                                      \
        interpolate<W>(out, fine, first, frac, perm, M, beta, g);                                                          \
    }
#define INTERPOLATE_SHARED_KERNEL(W)                                                                                      \
    extern "C" __global__ void __launch_bounds__(INTERP_THREADS)                                                           \
        nufft_interpolate_shared_##W(float2* out, const float2* fine, const int* first, const float* frac,                 \
                                     const unsigned* perm, const int4* sub, const int* sub_first, float beta, Geometry g)  \
    {                                                                                                                      \
        interpolate_shared<W>(out, fine, first, frac, perm, sub, sub_first, beta, g);                                      \
    }
#define INSTANTIATE(KERNEL, W) KERNEL(W)

#if defined(SPREAD_SHARED)
INSTANTIATE(SPREAD_SHARED_KERNEL, SPREAD_SHARED)
#elif defined(SPREAD_FIXED_POINT)
INSTANTIATE(SPREAD_FIXED_POINT_KERNEL, SPREAD_FIXED_POINT)
#elif defined(SPREAD_GLOBAL)
INSTANTIATE(SPREAD_GLOBAL_KERNEL, SPREAD_GLOBAL)
#elif defined(INTERPOLATE)
INSTANTIATE(INTERPOLATE_KERNEL, INTERPOLATE)
#elif defined(INTERPOLATE_SHARED)
INSTANTIATE(INTERPOLATE_SHARED_KERNEL, INTERPOLATE_SHARED)
#else

// The fine-grid index of mode index k (0 .. m) along an axis: mode k - m/2.
__device__ inline int mode_cell(int k, int m, int n)
{
    return wrap(k - m / 2, n);
}

// Type 1's last step: out[k] = fine[cell(k)] / K^(k), the corrections
// per axis (c = 1 / K^) multiplied.
extern "C" __global__ void nufft_deconvolve(float2* __restrict__ out, const float2* __restrict__ fine,
                                            const float* __restrict__ cx, const float* __restrict__ cy,
                                            const float* __restrict__ cz, int mx, int my, int mz, Geometry g)
{
    long long total = (long long)mx * my * mz;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total; i += (long long)gridDim.x * blockDim.x) {
        int kx = (int)(i % mx);
        long long r = i / mx;
        int ky = (int)(r % my), kz = (int)(r / my);
        long long gi = ((long long)mode_cell(kz, mz, g.n[2]) * g.n[1] + mode_cell(ky, my, g.n[1])) * g.n[0] +
                       mode_cell(kx, mx, g.n[0]);
        float s = cx[kx] * cy[ky] * cz[kz];
        float2 v = fine[gi];
        out[i] = make_float2(s * v.x, s * v.y);
    }
}

// The mode index of fine cell gi along an axis, or -1 where no mode lands.
__device__ inline int cell_mode(int gi, int m, int n)
{
    int k = gi < n - m / 2 ? gi : gi - n;  // the frequency of the cell, in -n/2 .. n/2
    int idx = k + m / 2;
    return idx >= 0 && idx < m ? idx : -1;
}

// Type 2's first step, over the whole fine grid: fine = f / K^ where a
// mode lands, zero elsewhere.
extern "C" __global__ void nufft_amplify(float2* __restrict__ fine, const float2* __restrict__ f,
                                         const float* __restrict__ cx, const float* __restrict__ cy,
                                         const float* __restrict__ cz, int mx, int my, int mz, Geometry g)
{
    long long total = (long long)g.n[0] * g.n[1] * g.n[2];
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total; i += (long long)gridDim.x * blockDim.x) {
        int x = (int)(i % g.n[0]);
        long long r = i / g.n[0];
        int y = (int)(r % g.n[1]), z = (int)(r / g.n[1]);
        int kx = cell_mode(x, mx, g.n[0]), ky = cell_mode(y, my, g.n[1]), kz = cell_mode(z, mz, g.n[2]);
        float2 v = make_float2(0.0f, 0.0f);
        if (kx >= 0 && ky >= 0 && kz >= 0) {
            float s = cx[kx] * cy[ky] * cz[kz];
            float2 a = f[((long long)kz * my + ky) * mx + kx];
            v = make_float2(s * a.x, s * a.y);
        }
        fine[i] = v;
    }
}
#endif  // SPREAD_SHARED, SPREAD_FIXED_POINT, SPREAD_GLOBAL, INTERPOLATE, INTERPOLATE_SHARED
