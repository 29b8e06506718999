// Type 2's interpolation kernels, included by nufft.cu: from the fine
// grid in global memory (interpolate), or from a shared-memory copy of
// each subproblem's bin (interpolate_shared).
#pragma once

// Type 2 interpolation: out[perm[i]] = sum over the footprint of fine *
// kernel, Q lanes a sorted point (a group), lane q reading the q-th pair
// of cells of each of the footprint's W x W rows (16 bytes), so that a
// group reads a row as one run of 16 Q bytes and a warp's load touches
// 32 / Q rows, not 32: L1 serves a load a line of cells at a time, and
// read thread per point (a row's pairs one after another in each thread)
// the kernel was bound by those lines (Nsight Compute:
// bench/h100-2026-11-27-interp-pairs). A row's P pairs start at the even
// x at or below its first (the fine grid's sizes are even, so a pair
// never wraps apart), the kernel's values shifted by one cell where the
// first is odd and 0 on the cells outside; lanes past P read the last
// pair with weight 0. What every lane of a group needs, the kernel's
// values along y and z and the rows' places, is computed a share a lane
// and passed round by shuffles, and the group's sums meet by shuffles. A
// block's threads go through the points together (a point clamped to
// the last where the block runs past it), so that every lane takes part
// in each shuffle.
template <int W>
__host__ __device__ constexpr int interpolate_lanes()
{
    return (W + 2) / 2 <= 2 ? 2 : (W + 2) / 2 <= 4 ? 4 : 8;
}

template <int W>
__device__ void interpolate(float2* __restrict__ out, const float2* __restrict__ fine, const int* __restrict__ first,
                            const float* __restrict__ frac, const unsigned* __restrict__ perm, long long M, float beta,
                            Geometry g)
{
    constexpr int P = (W + 2) / 2;  // pairs a row: W cells from an odd first need W + 1
    constexpr int Q = interpolate_lanes<W>();
    constexpr int S = (W + Q - 1) / Q;  // a lane's share of the W values along y and z
    const float4* pairs = (const float4*)fine;
    const int q = threadIdx.x % Q, half = g.n[0] / 2;
    const long long groups = blockDim.x / Q;
    for (long long base = blockIdx.x * groups; base < M; base += gridDim.x * groups) {
        const long long at = base + threadIdx.x / Q;
        const long long i = at < M ? at : M - 1;
        // This lane's share: the kernel's values and the rows' places (in
        // pairs) at j = s Q + q.
        const int fy = first[3 * i + 1], fz = first[3 * i + 2];
        const float ay = frac[3 * i + 1], az = frac[3 * i + 2];
        float vy[S], vz[S];
        int oy[S], oz[S];
#pragma unroll
        for (int s = 0; s < S; s++) {
            const int j = s * Q + q;
            vy[s] = kernel_value<W>(j, ay, beta);
            vz[s] = kernel_value<W>(j, az, beta);
            oy[s] = wrap(fy + j, g.n[1]) * half;
            oz[s] = wrap(fz + j, g.n[2]);
        }
        float ky[W];
        int yo[W];
#pragma unroll
        for (int j = 0; j < W; j++) {
            ky[j] = __shfl_sync(0xffffffffu, vy[j / Q], j % Q, Q);
            yo[j] = __shfl_sync(0xffffffffu, oy[j / Q], j % Q, Q);
        }
        // This lane's cells of each row: the footprint's j0 and j0 + 1,
        // j0 = 2q - odd (from -1: the cell below an odd first).
        const int fx = first[3 * i], odd = fx & 1, j0 = 2 * min(q, P - 1) - odd;
        const float ax = frac[3 * i];
        const float k0 = q < P && j0 >= 0 ? kernel_value<W>(j0, ax, beta) : 0.0f;
        const float k1 = q < P && j0 + 1 < W ? kernel_value<W>(j0 + 1, ax, beta) : 0.0f;
        const int xp = wrap(fx + j0, g.n[0]) / 2;
        float accr = 0.0f, acci = 0.0f;
#pragma unroll
        for (int jz = 0; jz < W; jz++) {
            const float kz = __shfl_sync(0xffffffffu, vz[jz / Q], jz % Q, Q);
            const int zi = __shfl_sync(0xffffffffu, oz[jz / Q], jz % Q, Q);
            const float4* plane = pairs + (long long)zi * g.n[1] * half + xp;
            float zr = 0.0f, zim = 0.0f;
#pragma unroll
            for (int jy = 0; jy < W; jy++) {
                const float4 v = plane[yo[jy]];
                const float rr = fmaf(k1, v.z, k0 * v.x), ri = fmaf(k1, v.w, k0 * v.y);
                zr = fmaf(ky[jy], rr, zr);
                zim = fmaf(ky[jy], ri, zim);
            }
            accr = fmaf(kz, zr, accr);
            acci = fmaf(kz, zim, acci);
        }
#pragma unroll
        for (int o = Q / 2; o > 0; o >>= 1) {
            accr += __shfl_xor_sync(0xffffffffu, accr, o, Q);
            acci += __shfl_xor_sync(0xffffffffu, acci, o, Q);
        }
        if (q == 0 && at < M) out[perm[i]] = make_float2(accr, acci);
    }
}

// Bulk copies from global into shared memory (Hopper's copy engine,
// cp.async.bulk: one instruction a run of bytes, none of the load/store
// pipe's work), counted on a barrier in shared memory: bulk_init by one
// thread and a barrier of the block, then bulk_expect(bar, bytes) by one
// thread and bulk_copy by any, then bulk_wait by every thread until all
// the bytes have arrived. Elsewhere (the CPU emulation, older GPUs)
// plain copies, and a barrier of the block in bulk_wait.
__device__ inline unsigned shared_address(const void* p)
{
#if defined(__CUDA_ARCH__)
    return (unsigned)__cvta_generic_to_shared(p);
#else
    return 0;
#endif
}

__device__ inline void bulk_init(unsigned long long* bar)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" ::"r"(shared_address(bar)) : "memory");
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
#endif
}

// The barrier's next phase ends when `bytes` have arrived (whether the
// copies come before or after this: its count of bytes may go below 0).
__device__ inline void bulk_expect(unsigned long long* bar, unsigned bytes)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(shared_address(bar)), "r"(bytes)
                 : "memory");
#endif
}

// bytes (a multiple of 16, both addresses 16-byte aligned) from src to dst.
__device__ inline void bulk_copy(void* dst, const void* src, unsigned bytes, unsigned long long* bar)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(
                     shared_address(dst)),
                 "l"(src), "r"(bytes), "r"(shared_address(bar))
                 : "memory");
#else
    for (unsigned k = 0; k < bytes / 16; k++) ((float4*)dst)[k] = ((const float4*)src)[k];
#endif
}

// Waits until the barrier's phase of this parity has ended; without
// bulk copies, a barrier of the block's threads (whose plain copies are
// then done).
__device__ inline void bulk_wait(unsigned long long* bar, unsigned parity)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    unsigned done = 0;
    while (!done)
        asm volatile(
            "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}\n"
            : "=r"(done)
            : "r"(shared_address(bar)), "r"(parity)
            : "memory");
#else
    __syncthreads();
#endif
}

// Threads per block of interpolate_shared; INTERP_THREADS in nufft.rs.
#define INTERP_THREADS 256

// Type 2 interpolation from shared memory, a block per subproblem: first
// the subproblem's bin with the kernel's overhang (spread_fixed_point's
// copy, its rows in pairs of cells from the even x at or below its first,
// the fine grid's sizes being even) is copied into shared memory, a bulk
// copy a row; then G lanes a sorted point (8, or 16 at width 8), reading
// H = G / P rows of P pairs of each plane of the footprint at once (2
// rows, or 3 at width 8: the 16th lane reads with weight 0), lane r of a
// row its r-th pair of cells (as interpolate's groups, the kernel's
// values shifted by one cell where the first is odd). From global memory,
// L1 serves a load a line of cells at a time, and interpolate's loads
// came to some 60 lines a point at width 7, bound by them (Nsight
// Compute, bench/h100-2026-11-28-sort-tiles); from shared memory 8 lanes
// of 16 bytes are served at once if their banks differ, which the copy's
// row pitch (interpolate_pitch) sees to: a point's 49 rows at width 7
// take 28 such reads. Rows past the width (the last step of a width that
// H does not divide) are read with weight 0. Each lane computes the
// kernel's values at its own offset along each axis, passed round by
// shuffles.
// The row pitch of interpolate_shared's copy, in pairs of cells, for rows
// of `pairs` pairs: the least of at least `pairs` that is P = (W + 2) / 2
// modulo 8. A point's lanes read P pairs a row, rows after rows, so lane
// l of a point reads 16-byte bank group l + const modulo 8: any 8 lanes
// in a row of the point's, as a 16-byte load serves them, on distinct
// groups. (nufft/shared.rs computes it as interp_pitch.)
template <int W>
__host__ __device__ constexpr int interpolate_pitch(int pairs)
{
    return pairs + (((W + 2) / 2 - pairs) % 8 + 8) % 8;
}

// The copy c of a subproblem's bin into `tile` (rows of c.pairs pairs,
// `pitch` pairs apart, y fastest, then z), a thread a row, by bulk copies
// from the fine grid (two or more where a row wraps), counted on `bar`.
__device__ inline void load_copy(float4* tile, int pitch, unsigned long long* bar, const BinCopy& c,
                                 const float2* __restrict__ fine, const Geometry& g)
{
    const int pr = c.pairs();
    if (threadIdx.x == 0) bulk_expect(bar, 16u * c.rows * pr);
    const int half = g.n[0] / 2;
    for (int r = threadIdx.x; r < c.rows; r += blockDim.x) {
        int gx = c.even();
        while (gx < 0) gx += g.n[0];
        const float4* src = (const float4*)fine + copy_row(r, c, g) / 2;
        for (int p = 0, at = gx / 2; p < pr; at = 0) {
            const int run = min(pr - p, half - at);
            bulk_copy(tile + r * pitch + p, src + at, 16u * run, bar);
            p += run;
        }
    }
}

template <int W>
__device__ void interpolate_shared(float2* __restrict__ out, const float2* __restrict__ fine,
                                   const int* __restrict__ first, const float* __restrict__ frac,
                                   const unsigned* __restrict__ perm, const int4* __restrict__ sub,
                                   const int* __restrict__ sub_first, float beta, Geometry g)
{
    constexpr int P = (W + 2) / 2;             // pairs a footprint row
    constexpr int G = 2 * interpolate_lanes<W>();  // lanes a point
    constexpr int H = G / P;                       // rows a step: P lanes each
    constexpr int S = (W + H - 1) / H;             // steps of H rows a plane
    static_assert(H * S - 1 < G && 2 * P - 1 < G && W < G, "every offset a lane asks for has a lane of the group");
    extern __shared__ __align__(16) float shw[];
    // The copy (rows of at most (bs + W + 2) / 2 pairs, at their pitch),
    // and its barrier.
    const int room = (g.bs[1] + W) * (g.bs[2] + W) * interpolate_pitch<W>((g.bs[0] + W + 2) / 2);
    float4* tile = (float4*)shw;
    unsigned long long* bar = (unsigned long long*)(tile + room);
    if (threadIdx.x == 0) bulk_init(bar);
    __syncthreads();
    const int4 sb = sub[blockIdx.x];
    const BinCopy c = bin_copy<W>(sb, g);
    const int pitch = interpolate_pitch<W>(c.pairs());
    load_copy(tile, pitch, bar, c, fine, g);
    // Lane q reads pair q % P of row q / P of each step; lanes past H P
    // (at width 8, the 16th) read the last row's first pair with weight 0.
    const int q = threadIdx.x % G, h = min(q / P, H - 1), pq = q < H * P ? q % P : 0;
    const bool has_pair = q < H * P;
    const int groups = blockDim.x / G;
    const int even = c.even(), plane = c.sy * pitch;
    const int lo = sub_first[blockIdx.x], n = sb.w;
    // Where this lane's row of step j starts, from its point's first row:
    // row H j + h, those past the footprint clamped to its last.
    int row[S];
#pragma unroll
    for (int j = 0; j < S; j++) row[j] = min(H * j + h, W - 1) * pitch;
    bulk_wait(bar, 0);
    for (int t0 = 0; t0 < n; t0 += groups) {
        // A warp whose groups are all past the subproblem's end is done;
        // in a warp that is not, every lane takes part in the shuffles, a
        // group past the end taking the last point and writing nothing.
        if (t0 + (int)(threadIdx.x >> 5) * (32 / G) >= n) break;
        const int t = t0 + threadIdx.x / G, i = lo + min(t, n - 1);
        const int fx = first[3 * i], fy = first[3 * i + 1], fz = first[3 * i + 2];
        // Lane q's values at offset q along each axis (0 past the width).
        const float vx = q < W ? kernel_value<W>(q, frac[3 * i], beta) : 0.0f;
        const float vy = q < W ? kernel_value<W>(q, frac[3 * i + 1], beta) : 0.0f;
        const float vz = q < W ? kernel_value<W>(q, frac[3 * i + 2], beta) : 0.0f;
        float ky[S];
#pragma unroll
        for (int j = 0; j < S; j++) ky[j] = __shfl_sync(0xffffffffu, vy, H * j + h, G);
        // This lane's cells j0 and j0 + 1 of each row (lane W, whose value
        // is 0, stands for the cell below an odd first).
        const int odd = fx & 1, j0 = 2 * pq - odd;
        const float x0 = __shfl_sync(0xffffffffu, vx, j0 < 0 ? W : j0, G);
        const float x1 = __shfl_sync(0xffffffffu, vx, j0 + 1, G);
        const float k0 = has_pair ? x0 : 0.0f, k1 = has_pair ? x1 : 0.0f;
        // A pair past the footprint (an even width from an even first: its
        // weights are 0) is read one pair lower: from the bin's last first
        // it would lie past the copy's row, in shared memory no copy wrote
        // (where 0 times a NaN left there by another kernel is NaN).
        const int read = j0 > W - 1 ? pq - 1 : pq;
        const float4* at = tile + ((fz - c.o[2]) * c.sy + fy - c.o[1]) * pitch + (fx - odd - even) / 2 + read;
        // The two cells' sums over the rows, weighted along y, then z.
        float4 a = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
        for (int jz = 0; jz < W; jz++, at += plane) {
            const float kz = __shfl_sync(0xffffffffu, vz, jz, G);
            float4 u = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
            for (int j = 0; j < S; j++) {
                const float4 v = at[row[j]];
                u.x = fmaf(ky[j], v.x, u.x);
                u.y = fmaf(ky[j], v.y, u.y);
                u.z = fmaf(ky[j], v.z, u.z);
                u.w = fmaf(ky[j], v.w, u.w);
            }
            a.x = fmaf(kz, u.x, a.x);
            a.y = fmaf(kz, u.y, a.y);
            a.z = fmaf(kz, u.z, a.z);
            a.w = fmaf(kz, u.w, a.w);
        }
        float accr = fmaf(k1, a.z, k0 * a.x), acci = fmaf(k1, a.w, k0 * a.y);
#pragma unroll
        for (int o = G / 2; o > 0; o >>= 1) {
            accr += __shfl_xor_sync(0xffffffffu, accr, o, G);
            acci += __shfl_xor_sync(0xffffffffu, acci, o, G);
        }
        if (q == 0 && t < n) out[perm[i]] = make_float2(accr, acci);
    }
}
