// Vector primitives of the CG loop, the Toeplitz pieces and the W^H W stencil.
// Complex vectors are float2 (re, im). Reductions accumulate in double and
// run in two fixed passes, so a dot product is the same on every run.

#include "chain.cuh"
#include "ratio.cuh"
#include "reduce.cuh"

extern "C" __global__ void axpy(float2* y, double a, const double* __restrict__ s, int num, int den, int floor,
                                const float2* __restrict__ x, long long n)
{
    prior_grids();
    // y = y + c x, c = a ratio(s)
    const float c = (float)(a * ratio(s, num, den, floor));
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
        float2 v = y[i], u = x[i];
        y[i] = make_float2(fmaf(c, u.x, v.x), fmaf(c, u.y, v.y));
    }
}

extern "C" __global__ void xpby(float2* y, const float2* __restrict__ x, const double* __restrict__ s, int num, int den,
                                int floor, long long n)
{
    prior_grids();
    // y = x + c y, c = ratio(s)
    const float c = (float)ratio(s, num, den, floor);
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
        float2 v = y[i], u = x[i];
        y[i] = make_float2(fmaf(c, v.x, u.x), fmaf(c, v.y, u.y));
    }
}

extern "C" __global__ void real_part(float* out, const float2* __restrict__ x, long long n)
{
    prior_grids();
    // out = re x
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
        out[i] = x[i].x;
}

extern "C" __global__ void mul_scaled(float2* x, const float2* __restrict__ y, float scale, long long n)
{
    prior_grids();
    // x = scale * x .* y
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
        float2 a = x[i], b = y[i];
        x[i] = make_float2(scale * (a.x * b.x - a.y * b.y), scale * (a.x * b.y + a.y * b.x));
    }
}

// out = 1 / (re a + rho re b), real (a diagonal's inverse, e.g. a circulant
// preconditioner's from its eigenvalues).
extern "C" __global__ void inverse_sum(float2* out, const float2* __restrict__ a, const float2* __restrict__ b,
                                       double rho, long long n)
{
    prior_grids();
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
        out[i] = make_float2((float)(1.0 / ((double)a[i].x + rho * (double)b[i].x)), 0.f);
}

// A coil's map s applied to x: op 0 out = s x, 1 out = conj(s) x,
// 2 out = out + conj(s) x (recon_core::CoilOp).
extern "C" __global__ void coil(float2* out, int op, const float2* __restrict__ s, const float2* __restrict__ x,
                                long long n)
{
    prior_grids();
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
        const float2 a = s[i], b = x[i];
        if (op == 0) {
            out[i] = make_float2(a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x);
        } else {
            float2 v = make_float2(a.x * b.x + a.y * b.y, a.x * b.y - a.y * b.x);
            if (op == 2) {
                const float2 o = out[i];
                v = make_float2(o.x + v.x, o.y + v.y);
            }
            out[i] = v;
        }
    }
}

extern "C" __global__ void scale(float2* x, float s, long long n)
{
    prior_grids();
    // x = s x
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
        float2 a = x[i];
        x[i] = make_float2(s * a.x, s * a.y);
    }
}

// pad, crop and add_whw run a block per row of x (fixed y and z) and a
// thread per x: the row's y and z come from the block index by one 32-bit
// division, where a flat index cost four 64-bit ones per element.

// out (2nx x 2ny x 2nz) = x (nx x ny x nz) in the corner, zeros elsewhere.
// Every element of out is written. Blocks: 2nz * 2ny rows.
extern "C" __global__ void pad(float2* out, const float2* __restrict__ x, int nx, int ny, int nz)
{
    prior_grids();
    const unsigned row = blockIdx.x;
    const int Y = (int)(row % (unsigned)(2 * ny)), Z = (int)(row / (unsigned)(2 * ny));
    const bool inside = Y < ny && Z < nz;
    float2* o = out + (long long)row * 2 * nx;
    const float2* src = x + ((long long)Z * ny + Y) * nx;
    for (int X = threadIdx.x; X < 2 * nx; X += blockDim.x)
        o[X] = (inside && X < nx) ? src[X] : make_float2(0.0f, 0.0f);
}

// out (nx x ny x nz) = the corner of x (2nx x 2ny x 2nz). Blocks: nz * ny rows.
extern "C" __global__ void crop(float2* out, const float2* __restrict__ x, int nx, int ny, int nz)
{
    prior_grids();
    const unsigned row = blockIdx.x;
    const int Y = (int)(row % (unsigned)ny), Z = (int)(row / (unsigned)ny);
    const float2* src = x + ((long long)Z * 2 * ny + Y) * 2 * nx;
    float2* o = out + (long long)row * nx;
    for (int X = threadIdx.x; X < nx; X += blockDim.x) o[X] = src[X];
}

#define REDUCE_THREADS 256

// *out = the sum of the block's `acc`s, in a fixed order (reduce.cuh),
// written by thread 0.
__device__ void block_sum_to(double* out, double acc)
{
    __shared__ double s[REDUCE_THREADS];
    block_sum<REDUCE_THREADS>(out, acc, s);
}

// partial[block] = sum over this block's grid-stride share of Re(conj(x) y), in double.
extern "C" __global__ void dot_partial(double* partial, const float2* __restrict__ x, const float2* __restrict__ y, long long n)
{
    prior_grids();
    double acc = 0.0;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
        float2 a = x[i], b = y[i];
        acc += (double)a.x * b.x + (double)a.y * b.y;
    }
    block_sum_to(&partial[blockIdx.x], acc);
}

// CG's residual update and its norm in one pass: y = y + c x, c = a
// ratio(s), and partial[block] = the block's part of <y, y> (as
// dot_partial; sum_partials adds the parts).
extern "C" __global__ void axpy_norm_partial(double* partial, float2* y, double a, const double* __restrict__ s,
                                             int num, int den, int floor, const float2* __restrict__ x, long long n)
{
    prior_grids();
    const float c = (float)(a * ratio(s, num, den, floor));
    double acc = 0.0;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
        float2 v = y[i], u = x[i];
        v = make_float2(fmaf(c, u.x, v.x), fmaf(c, u.y, v.y));
        y[i] = v;
        acc += (double)v.x * v.x + (double)v.y * v.y;
    }
    block_sum_to(&partial[blockIdx.x], acc);
}

// CG's updates of the iterate and the direction in one pass: x = x + c p
// with the old p, then p = r + d p; c = a ratio(s; step), d = ratio(s;
// beta).
extern "C" __global__ void cg_update(float2* x, float2* p, const float2* __restrict__ r, double a,
                                     const double* __restrict__ s, int step_num, int step_den, int beta_num,
                                     int beta_den, int floor, long long n)
{
    prior_grids();
    const CgCoefficients k = cg_coefficients(a, s, step_num, step_den, beta_num, beta_den, floor);
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
        const CgStepped t = cg_step(x[i], p[i], r[i], k.c, k.d);
        x[i] = t.x;
        p[i] = t.p;
    }
}

// out[0] = sum of count partials, by one block, in a fixed order.
// SUM_THREADS threads (vector.rs): the Toeplitz product's last pass leaves
// 32,768 parts at 256^3 (2 lines a block), which 256 threads read in 10 us,
// their loads too few in flight.
#define SUM_THREADS 1024
extern "C" __global__ void sum_partials(double* out, const double* __restrict__ partial, int count)
{
    prior_grids();
    __shared__ double s[SUM_THREADS / 32];
    double acc = 0.0;
    for (int i = threadIdx.x; i < count; i += SUM_THREADS) acc += partial[i];
    block_sum<SUM_THREADS>(out, acc, s);
}

// (W^H W x)[i] at voxel (X, Y, Z), W the weighted stencil
// (recon_core::Stencil): w2d holds the squared weight of the edge
// (n, n + e_d), or is null for weights of 1; d2 holds the squared
// diagonal, or is null for none. Mirrors the CPU stencil.
__device__ __forceinline__ float2 whw_at(const float2* __restrict__ x, const float* __restrict__ w2x,
                                         const float* __restrict__ w2y, const float* __restrict__ w2z,
                                         const float* __restrict__ d2, long long i, int X, int Y, int Z, int nx,
                                         int ny, int nz)
{
    const long long sy = nx, sz = (long long)nx * ny;
    const float2 xi = x[i];
    float accr = 0.0f, acci = 0.0f;
#define EDGE(cond, j, w)                   \
    if (cond) {                            \
        float2 xj = x[j];                  \
        float ww = (w);                    \
        accr += ww * (xi.x - xj.x);        \
        acci += ww * (xi.y - xj.y);        \
    }
    EDGE(X + 1 < nx, i + 1, w2x ? w2x[i] : 1.0f)
    EDGE(X > 0, i - 1, w2x ? w2x[i - 1] : 1.0f)
    EDGE(Y + 1 < ny, i + sy, w2y ? w2y[i] : 1.0f)
    EDGE(Y > 0, i - sy, w2y ? w2y[i - sy] : 1.0f)
    EDGE(Z + 1 < nz, i + sz, w2z ? w2z[i] : 1.0f)
    EDGE(Z > 0, i - sz, w2z ? w2z[i - sz] : 1.0f)
#undef EDGE
    if (d2) {  // diagonal row: d^2 x[i]
        accr += d2[i] * xi.x;
        acci += d2[i] * xi.y;
    }
    return make_float2(accr, acci);
}

// out = out + a W^H W x (whw_at). Blocks: nz * ny rows.
extern "C" __global__ void add_whw(float2* out, float a, const float2* __restrict__ x, const float* __restrict__ w2x,
                                   const float* __restrict__ w2y, const float* __restrict__ w2z,
                                   const float* __restrict__ d2, int nx, int ny, int nz)
{
    prior_grids();
    const unsigned row = blockIdx.x;
    const int Y = (int)(row % (unsigned)ny), Z = (int)(row / (unsigned)ny);
    for (int X = threadIdx.x; X < nx; X += blockDim.x) {
        const long long i = (long long)row * nx + X;
        const float2 h = whw_at(x, w2x, w2y, w2z, d2, i, X, Y, Z, nx, ny, nz);
        const float2 o = out[i];
        out[i] = make_float2(fmaf(a, h.x, o.x), fmaf(a, h.y, o.y));
    }
}

// add_whw and CG's <x, out> after it in one pass: partial[block] = the
// block's part of Re <x, out> (as dot_partial; sum_partials adds the
// parts). A grid-stride loop over voxels (at most 1024^3, recon_core::MAX_N
// per axis: 32-bit indices).
extern "C" __global__ void add_whw_dot_partial(double* partial, float2* out, float a, const float2* __restrict__ x,
                                               const float* __restrict__ w2x, const float* __restrict__ w2y,
                                               const float* __restrict__ w2z, const float* __restrict__ d2, int nx,
                                               int ny, int nz)
{
    prior_grids();
    const unsigned len = (unsigned)nx * ny * nz;
    double acc = 0.0;
    for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < len; i += gridDim.x * blockDim.x) {
        const unsigned row = i / (unsigned)nx;
        const int X = (int)(i - row * (unsigned)nx), Y = (int)(row % (unsigned)ny), Z = (int)(row / (unsigned)ny);
        const float2 h = whw_at(x, w2x, w2y, w2z, d2, i, X, Y, Z, nx, ny, nz);
        const float2 o = out[i], xi = x[i];
        const float2 v = make_float2(fmaf(a, h.x, o.x), fmaf(a, h.y, o.y));
        out[i] = v;
        acc += (double)xi.x * v.x + (double)xi.y * v.y;
    }
    block_sum_to(&partial[blockIdx.x], acc);
}
