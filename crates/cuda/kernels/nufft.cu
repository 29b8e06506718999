// The NUFFT on the GPU (recon-cuda's nufft.rs drives these), in the way of
// cuFINUFFT (Shih et al. 2021): points are sorted once per plan into bins
// of the upsampled ("fine") grid; type 1 spreads each bin's points into a
// shared-memory copy of the bin and its kernel overhang (a subproblem of at
// most `maxsub` points), then adds that copy into the fine grid; type 2
// interpolates from the fine grid, a group of lanes per sorted point
// reading each row of its footprint together. The deconvolution by the
// kernel's transform and the shift between centred modes and the FFT's
// order are one kernel each way.
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
// of the three families, for one kernel width W, is a module of its own,
// nufft.cu compiled with -DSPREAD_SHARED=W, -DSPREAD_FIXED_POINT=W,
// -DSPREAD_GLOBAL=W or -DINTERPOLATE=W (kernels.rs): a run compiles only
// the widths it uses.
#if defined(SPREAD_SHARED) || defined(SPREAD_FIXED_POINT) || defined(SPREAD_GLOBAL) || defined(INTERPOLATE)
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

// The kernel's value at offset j - W/2 + a.
template <int W>
__device__ inline float kernel_value(int j, float a, float beta)
{
    const float z = (j + a) * (2.0f / W) - 1.0f;  // (2 (j + a) - W) / W
    const float s = 1.0f - z * z;
    return s > 0.0f ? expf(beta * (sqrtf(s) - 1.0f)) : 0.0f;
}

// The kernel's W values at offsets j - W/2 + a.
template <int W>
__device__ inline void kernel_values(float* k, float a, float beta)
{
#pragma unroll
    for (int j = 0; j < W; j++) k[j] = kernel_value<W>(j, a, beta);
}

// fine += (re, im), atomically: one vector atomic on Hopper and later.
__device__ inline void add_global(float2* fine, float re, float im)
{
#if __CUDA_ARCH__ >= 900
    atomicAdd(fine, make_float2(re, im));
#else
    atomicAdd(&fine->x, re);
    atomicAdd(&fine->y, im);
#endif
}

// fine[0] += a and fine[1] += b, atomically; fine 16-byte aligned: one
// vector atomic on Hopper and later.
__device__ inline void add_pair(float2* fine, float2 a, float2 b)
{
#if __CUDA_ARCH__ >= 900
    atomicAdd((float4*)fine, make_float4(a.x, a.y, b.x, b.y));
#else
    add_global(fine, a.x, a.y);
    add_global(fine + 1, b.x, b.y);
#endif
}

__device__ inline int wrap(int i, int n)
{
    i %= n;
    return i < 0 ? i + n : i;
}

// Warps per spreading block; SPREAD_THREADS in nufft.rs is 32 times this.
#define SPREAD_WARPS 8
#define SPREAD_THREADS (32 * SPREAD_WARPS)

// The last step of a shared-memory spreading: the bin's copy (sx cells a
// row, `rows` rows starting in the fine grid at row_at; cell(at) its
// value at cell at) added into the fine grid. A half-warp per row, its
// lanes taking pairs of cells that start at an even global x (16-byte
// aligned: the fine grid's sizes are even), added by one vector atomic
// each. A lane's pair, and with it its x in the fine grid, is the same in
// every row (the copy's x from -1 to sx: its cells outside are zero).
template <class Cell>
__device__ inline void add_copy(float2* __restrict__ fine, const long long* row_at, const int* o, int sx, int rows,
                                const Geometry& g, Cell cell)
{
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int half = lane >> 4, hl = lane & 15;
    const int even = o[0] - (o[0] & 1);  // the even x at or below the copy's first
    const int pairs = (o[0] + sx - even + 1) / 2;
    for (int p = hl; p < pairs; p += 16) {
        const int lx = even + 2 * p - o[0];  // the pair's first cell in the copy: -1 .. sx - 1
        int gx = even + 2 * p;
        while (gx < 0) gx += g.n[0];
        while (gx >= g.n[0]) gx -= g.n[0];
        for (int row = 2 * warp + half; row < rows; row += 2 * SPREAD_WARPS) {
            const int at = row * sx + lx;
            const float2 v0 = lx >= 0 ? cell(at) : make_float2(0.0f, 0.0f);
            const float2 v1 = lx + 1 < sx ? cell(at + 1) : make_float2(0.0f, 0.0f);
            if (v0.x != 0.0f || v0.y != 0.0f || v1.x != 0.0f || v1.y != 0.0f) add_pair(&fine[row_at[row] + gx], v0, v1);
        }
    }
}

// Type 1 spreading, one block per subproblem (at most maxsub points of one
// bin), into a shared-memory copy of the bin with W/2 cells of overhang
// below and (W+1)/2 above (bs + W cells per axis), then added into the
// fine grid (periodically wrapped) by global atomics.
//
// Float atomics on shared memory are compare-and-swap loops on current
// GPUs, so the copy is written without them: first a thread per point and
// axis puts its kernel values in shared memory, and a thread per point its
// strength and place; then warp w adds every point's contribution to the
// z-planes congruent to w modulo the warp count, its lanes taking one or
// two (x, y) cells of the footprint each. No two warps touch one plane and no two lanes one cell,
// so plain loads and stores suffice. The copy is complex (float2): a cell
// is one 8-byte load and one store, half the instructions of separate
// real and imaginary planes (the kernel is bound by its instructions
// issued, Nsight Compute: bench/h100-2026-11-27-probe). A half-warp's 16
// cells span whole rows of the footprint, bs + W cells apart; with bins
// 16 cells wide those rows fall on consecutive banks.
template <int W>
__device__ void spread_shared(float2* __restrict__ fine, const float2* __restrict__ c, const int* __restrict__ first,
                              const float* __restrict__ frac, const unsigned* __restrict__ perm,
                              const int4* __restrict__ sub, const int* __restrict__ sub_first, int maxsub, float beta,
                              Geometry g)
{
    static_assert(W <= SPREAD_WARPS, "a footprint's planes meet each warp at most once");
    extern __shared__ __align__(16) float shw[];
    const int4 sb = sub[blockIdx.x];
    const int o[3] = {sb.x * g.bs[0] - W / 2, sb.y * g.bs[1] - W / 2, sb.z * g.bs[2] - W / 2};
    const int sx = g.bs[0] + W, sy = g.bs[1] + W, sz = g.bs[2] + W;
    const int cells = sx * sy * sz, plane = sx * sy, rows = sy * sz;
    float2* cell = (float2*)shw;                     // [cells]
    float* ker = (float*)(cell + cells);             // [maxsub][3][W]
    float2* str = (float2*)(ker + ((3 * W * maxsub + 1) & ~1));  // [maxsub], 8-byte aligned
    int2* place = (int2*)(str + maxsub);              // [maxsub]: base cell, first z plane
    // After the points: where each row of the copy starts in the fine grid,
    // in their place (the shared memory of 4 blocks an SM at width 7).
    long long* row_at = (long long*)ker;              // [rows]
    // The copy zeroed 16 bytes at a time, and an odd last cell.
    for (int i = threadIdx.x; i < cells / 2; i += blockDim.x) ((float4*)cell)[i] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (threadIdx.x == 0 && (cells & 1)) cell[cells - 1] = make_float2(0.0f, 0.0f);
    const int lo = sub_first[blockIdx.x], n = sb.w;
    // The kernel values, a thread per point and axis (offsets read in order).
    for (int u = threadIdx.x; u < 3 * n; u += blockDim.x) kernel_values<W>(ker + u * W, frac[3 * lo + u], beta);
    for (int t = threadIdx.x; t < n; t += blockDim.x) {
        const int i = lo + t;
        str[t] = c[perm[i]];
        const int lz = first[3 * i + 2] - o[2];
        place[t] = make_int2((lz * sy + first[3 * i + 1] - o[1]) * sx + first[3 * i] - o[0], lz);
    }
    __syncthreads();
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    // This lane's (x, y) cells of the footprint: p = lane and lane + 32.
    // (Branches, not a second update with weight 0 where a lane has one
    // cell: the kernel is near the shared-memory pipe's limit, and the
    // extra load and store cost more than the branches save:
    // bench/h100-2026-11-27-spread-rows.)
    const int p0 = min(lane, W * W - 1), p1 = min(lane + 32, W * W - 1);
    const bool has0 = lane < W * W, has1 = lane + 32 < W * W;
    const int x0 = p0 % W, y0 = p0 / W, x1 = p1 % W, y1 = p1 / W;
    const int off0 = y0 * sx + x0, off1 = y1 * sx + x1;
    for (int t = 0; t < n; t++) {
        const int2 pl = place[t];
        // The footprint's plane this warp owns, if any: z = pl.y + jz = warp (mod SPREAD_WARPS).
        const int jz = (warp - pl.y) & (SPREAD_WARPS - 1);  // a power of two
        if (jz < W) {
            const float* k = ker + 3 * W * t;
            const float2 v = str[t];
            const float kz = k[2 * W + jz];
            const float k0 = k[x0] * k[W + y0] * kz, k1 = k[x1] * k[W + y1] * kz;
            const int at = pl.x + jz * plane;
            if (has0) {
                float2 a = cell[at + off0];
                a.x = fmaf(v.x, k0, a.x);
                a.y = fmaf(v.y, k0, a.y);
                cell[at + off0] = a;
            }
            if (has1) {
                float2 a = cell[at + off1];
                a.x = fmaf(v.x, k1, a.x);
                a.y = fmaf(v.y, k1, a.y);
                cell[at + off1] = a;
            }
        }
        // The next point's cells may be this point's, in other lanes.
        __syncwarp();
    }
    __syncthreads();
    // Each row's start in the fine grid, y and z wrapped (the loops run more
    // than once only on grids smaller than a bin's copy). The steps are
    // written out: the same steps in a helper function made type 1 1.8%
    // slower on an H100 (bench/h100-2026-11-27-review).
    for (int r = threadIdx.x; r < rows; r += blockDim.x) {
        int gy = o[1] + r % sy, gz = o[2] + r / sy;
        while (gy < 0) gy += g.n[1];
        while (gy >= g.n[1]) gy -= g.n[1];
        while (gz < 0) gz += g.n[2];
        while (gz >= g.n[2]) gz -= g.n[2];
        row_at[r] = ((long long)gz * g.n[1] + gy) * g.n[0];
    }
    __syncthreads();
    add_copy(fine, row_at, o, sx, rows, g, [&](int at) { return cell[at]; });
}

// Type 1 spreading into a shared-memory copy of the bin as spread_shared,
// but in fixed point: the copy is two planes of 32-bit integers (real and
// imaginary parts), to which shared-memory integer atomics add natively
// (float ones are compare-and-swap loops), so that any thread may add to
// any cell and the work splits by point rather than by plane: a warp per
// point, its groups of G = 8 lanes (4 at widths up to 4) taking its
// planes, lane jx of a group the column of W cells at x = jx of each, a
// real and an imaginary atomic a cell. (With the default bins at width 7
// the four planes a warp adds to at once fall on distinct banks: their
// pitch, 23 x 15 cells, is 25 mod 32.) Each contribution is rounded to an integer after scaling by
// LIMIT / m, m the largest part of any strength in the subproblem (the
// kernel is at most 1), by one multiply-add with 1.5 2^23: the float's
// low bits are then the rounded value (for values below 2^22). A cell's
// sum is then exact, and within 2^31 (LIMIT shrinks past 476 points a
// subproblem to keep it so); each contribution is off by at most half a
// unit, m / LIMIT / 2 (about 1.2e-7 m). The copy reaches the fine grid as
// spread_shared's does, scaled back; a strength that is not finite makes
// every cell of the copy NaN.
#define FIXED_MAGIC 12582912.0f  // 1.5 2^23, whose bits are 0x4B400000
#define FIXED_LIMIT 4194000.0f   // below 2^22
template <int W>
__device__ void spread_fixed_point(float2* __restrict__ fine, const float2* __restrict__ c,
                                   const int* __restrict__ first, const float* __restrict__ frac,
                                   const unsigned* __restrict__ perm, const int4* __restrict__ sub,
                                   const int* __restrict__ sub_first, int maxsub, float beta, Geometry g)
{
    constexpr int G = W <= 4 ? 4 : 8;  // lanes a (point, plane)
    extern __shared__ __align__(16) float shw[];
    const int4 sb = sub[blockIdx.x];
    const int o[3] = {sb.x * g.bs[0] - W / 2, sb.y * g.bs[1] - W / 2, sb.z * g.bs[2] - W / 2};
    const int sx = g.bs[0] + W, sy = g.bs[1] + W, sz = g.bs[2] + W;
    const int cells = sx * sy * sz, plane = sx * sy, rows = sy * sz;
    int* re = (int*)shw;                             // [cells]
    int* im = re + cells;                            // [cells]
    float* ker = (float*)(im + cells);               // [maxsub][3][W]
    float2* str = (float2*)(ker + ((3 * W * maxsub + 1) & ~1));  // [maxsub], 8-byte aligned
    int* place = (int*)(str + maxsub);               // [maxsub]: base cell
    unsigned* largest = (unsigned*)(place + maxsub); // the bits of m
    long long* row_at = (long long*)ker;             // [rows], after the points
    // The copy zeroed 16 bytes at a time (2 cells is 16 bytes), and an odd last cell.
    for (int i = threadIdx.x; i < cells / 2; i += blockDim.x) ((int4*)re)[i] = make_int4(0, 0, 0, 0);
    if (threadIdx.x == 0) {
        if (cells & 1) re[2 * cells - 2] = re[2 * cells - 1] = 0;
        *largest = 0;
    }
    const int lo = sub_first[blockIdx.x], n = sb.w;
    for (int u = threadIdx.x; u < 3 * n; u += blockDim.x) kernel_values<W>(ker + u * W, frac[3 * lo + u], beta);
    __syncthreads();
    float m = 0.0f;
    for (int t = threadIdx.x; t < n; t += blockDim.x) {
        const int i = lo + t;
        const float2 v = c[perm[i]];
        str[t] = v;
        // The largest part; NaN where a part is NaN (fmaxf would drop it).
        const float a = fmaxf(fabsf(v.x), fabsf(v.y));
        m = a > m || a != a ? a : m;
        place[t] = ((first[3 * i + 2] - o[2]) * sy + first[3 * i + 1] - o[1]) * sx + first[3 * i] - o[0];
    }
    // Non-negative floats order as their bits (NaN above infinity).
    atomicMax(largest, __float_as_uint(m));
    __syncthreads();
    m = __uint_as_float(*largest);
    const bool finite = m <= 3.4e38f;
    const float limit = fminf(FIXED_LIMIT, 2.0e9f / n);
    const float scale = finite && m > 0.0f ? limit / m : 0.0f;
    // A warp per point: its group q of G lanes takes the point's planes q,
    // q + 32 / G, ... (consecutive planes in a warp's instruction), lane jx
    // the column at x = jx of each.
    constexpr int GW = 32 / G, P = (W + GW - 1) / GW;  // groups a warp, planes a lane
    const int lane = threadIdx.x & 31, q = lane / G, jx = min(lane % G, W - 1);
    const bool column = lane % G < W;
    for (int t = threadIdx.x >> 5; t < n; t += blockDim.x >> 5) {
        const float* k = ker + 3 * W * t;
        const float2 v = str[t];
        const float kx = k[jx] * scale;
        const float wr = v.x * kx, wi = v.y * kx;
        float ky[W];
#pragma unroll
        for (int jy = 0; jy < W; jy++) ky[jy] = k[W + jy];
        const int base = place[t] + jx;
#pragma unroll
        for (int pz = 0; pz < P; pz++) {
            const int jz = q + pz * GW;
            if (column && jz < W) {
                const float kz = k[2 * W + jz];
                const float zr = wr * kz, zi = wi * kz;
                int at = base + jz * plane;
#pragma unroll
                for (int jy = 0; jy < W; jy++, at += sx) {
                    atomicAdd(&re[at], __float_as_int(fmaf(ky[jy], zr, FIXED_MAGIC)) - 0x4B400000);
                    atomicAdd(&im[at], __float_as_int(fmaf(ky[jy], zi, FIXED_MAGIC)) - 0x4B400000);
                }
            }
        }
    }
    __syncthreads();
    // Each row's start in the fine grid, as in spread_shared.
    for (int r = threadIdx.x; r < rows; r += blockDim.x) {
        int gy = o[1] + r % sy, gz = o[2] + r / sy;
        while (gy < 0) gy += g.n[1];
        while (gy >= g.n[1]) gy -= g.n[1];
        while (gz < 0) gz += g.n[2];
        while (gz >= g.n[2]) gz -= g.n[2];
        row_at[r] = ((long long)gz * g.n[1] + gy) * g.n[0];
    }
    __syncthreads();
    // Back to floats (NaN everywhere in the copy if a strength was not
    // finite), added into the fine grid.
    const float unit = finite ? (m > 0.0f ? m / limit : 0.0f) : __int_as_float(0x7fc00000);
    add_copy(fine, row_at, o, sx, rows, g, [&](int at) { return make_float2(re[at] * unit, im[at] * unit); });
}

// Type 1 spreading straight into the fine grid, thread per sorted point:
// the fallback where a subproblem would not fit in shared memory.
template <int W>
__device__ void spread_global(float2* __restrict__ fine, const float2* __restrict__ c, const int* __restrict__ first,
                              const float* __restrict__ frac, const unsigned* __restrict__ perm, long long M,
                              float beta, Geometry g)
{
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < M; i += (long long)gridDim.x * blockDim.x) {
        float kx[W], ky[W], kz[W];
        kernel_values<W>(kx, frac[3 * i], beta);
        kernel_values<W>(ky, frac[3 * i + 1], beta);
        kernel_values<W>(kz, frac[3 * i + 2], beta);
        float2 v = c[perm[i]];
        int xi[W];
#pragma unroll
        for (int j = 0; j < W; j++) xi[j] = wrap(first[3 * i] + j, g.n[0]);
#pragma unroll
        for (int jz = 0; jz < W; jz++) {
            long long zi = wrap(first[3 * i + 2] + jz, g.n[2]);
            float2 vz = make_float2(v.x * kz[jz], v.y * kz[jz]);
#pragma unroll
            for (int jy = 0; jy < W; jy++) {
                long long row = (zi * g.n[1] + wrap(first[3 * i + 1] + jy, g.n[1])) * g.n[0];
                float2 vy = make_float2(vz.x * ky[jy], vz.y * ky[jy]);
#pragma unroll
                for (int jx = 0; jx < W; jx++) add_global(&fine[row + xi[jx]], vy.x * kx[jx], vy.y * kx[jx]);
            }
        }
    }
}

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
#define INSTANTIATE(KERNEL, W) KERNEL(W)

#if defined(SPREAD_SHARED)
INSTANTIATE(SPREAD_SHARED_KERNEL, SPREAD_SHARED)
#elif defined(SPREAD_FIXED_POINT)
INSTANTIATE(SPREAD_FIXED_POINT_KERNEL, SPREAD_FIXED_POINT)
#elif defined(SPREAD_GLOBAL)
INSTANTIATE(SPREAD_GLOBAL_KERNEL, SPREAD_GLOBAL)
#elif defined(INTERPOLATE)
INSTANTIATE(INTERPOLATE_KERNEL, INTERPOLATE)
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
#endif  // SPREAD_SHARED, SPREAD_FIXED_POINT, SPREAD_GLOBAL, INTERPOLATE
