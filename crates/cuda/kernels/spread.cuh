// Type 1's spreading kernels (included by nufft.cu, after its geometry,
// kernel values and wrap): into a shared-memory copy of each subproblem's
// bin in float (spread_shared) or in fixed point (spread_fixed_point),
// added into the fine grid by add_copy, or straight into the fine grid
// (spread_global). nufft.cu exports them, a module per family and width.
#pragma once

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

// Warps per spreading block; SPREAD_THREADS in nufft.rs is 32 times this.
#define SPREAD_WARPS 8
#define SPREAD_THREADS (32 * SPREAD_WARPS)

// A subproblem's copy of its bin with the kernel's overhang, W/2 cells
// below and (W+1)/2 above along each axis: its first cell in the fine
// grid (o, unwrapped), its sizes, and its cells, plane and rows; and its
// rows taken as pairs of cells (16 bytes, aligned in the fine grid, whose
// sizes are even): from even(), the even x at or below its first, pairs()
// a row (add_copy and add_fixed_rows write them, interpolate_shared reads
// them; spread_fixed_point and interpolate_shared keep their copies so).
struct BinCopy {
    int o[3], sx, sy, sz, cells, plane, rows;
    __device__ int even() const { return o[0] - (o[0] & 1); }
    __device__ int pairs() const { return (o[0] + sx - even() + 1) / 2; }
};

template <int W>
__device__ inline BinCopy bin_copy(int4 sb, const Geometry& g)
{
    BinCopy c;
    c.o[0] = sb.x * g.bs[0] - W / 2;
    c.o[1] = sb.y * g.bs[1] - W / 2;
    c.o[2] = sb.z * g.bs[2] - W / 2;
    c.sx = g.bs[0] + W;
    c.sy = g.bs[1] + W;
    c.sz = g.bs[2] + W;
    c.cells = c.sx * c.sy * c.sz;
    c.plane = c.sx * c.sy;
    c.rows = c.sy * c.sz;
    return c;
}

// The last step of a shared-memory spreading: the bin's copy (sx cells a
// row, sy rows a plane, `rows` rows; cell(at) its value at cell at) added
// into the fine grid. First each row's start in the fine grid (row_starts)
// into row_at (shared memory the block no longer needs; written out in
// the loop, the same steps in a helper had once made type 1 1.8% slower
// on an H100, bench/h100-2026-11-27-review: row_starts and copy_row
// inlined give the SASS of the loop written out, checked by nvcc). Then a half-warp per
// row, its lanes taking pairs of cells that start at an even global x
// (16-byte aligned: the fine grid's sizes are even), added by one vector
// atomic each. A lane's pair, and with it its x in the fine grid, is the
// same in every row (the copy's x from -1 to sx: its cells outside are
// zero).
// Where row r of copy c (y fastest, then z) starts in the fine grid, y and
// z wrapped (the loops run more than once only on grids smaller than a
// bin's copy): the cell at x = 0 of that row.
__device__ inline long long copy_row(int r, const BinCopy& c, const Geometry& g)
{
    int gy = c.o[1] + r % c.sy, gz = c.o[2] + r / c.sy;
    while (gy < 0) gy += g.n[1];
    while (gy >= g.n[1]) gy -= g.n[1];
    while (gz < 0) gz += g.n[2];
    while (gz >= g.n[2]) gz -= g.n[2];
    return ((long long)gz * g.n[1] + gy) * g.n[0];
}

// Each row's start in the fine grid (copy_row), a thread a row, into
// row_at, then a barrier of the block: before a copy's rows are added.
__device__ inline void row_starts(long long* row_at, const BinCopy& c, const Geometry& g)
{
    for (int r = threadIdx.x; r < c.rows; r += blockDim.x) row_at[r] = copy_row(r, c, g);
    __syncthreads();
}

template <class Cell>
__device__ inline void add_copy(float2* __restrict__ fine, long long* row_at, const BinCopy& c, const Geometry& g,
                                Cell cell)
{
    const int* o = c.o;
    const int sx = c.sx, rows = c.rows;
    row_starts(row_at, c, g);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int half = lane >> 4, hl = lane & 15;
    const int even = c.even(), pairs = c.pairs();
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
    const BinCopy copy = bin_copy<W>(sb, g);
    const int* o = copy.o;
    const int sx = copy.sx, sy = copy.sy, cells = copy.cells, plane = copy.plane;
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
    add_copy(fine, row_at, copy, g, [&](int at) { return cell[at]; });
}

// The plane stride of spread_fixed_point's copy, for planes of `cells`
// cells (rows times their pitch) and groups of G lanes (8, or 4 up to
// width 4): the least of at least `cells` that puts the planes a warp's
// atomic adds to at once (32 / G of them, G lanes on consecutive cells
// of each) on distinct banks: 8 modulo 16 for G = 8 (planes 8 or 24
// banks apart), 4 modulo 8 for G = 4. (nufft/shared.rs computes it as
// fixed_plane.)
template <int G>
__host__ __device__ constexpr int fixed_plane(int cells)
{
    return G == 8 ? cells + (24 - cells % 16) % 16 : cells + (12 - cells % 8) % 8;
}

// The last step of the fixed-point spreading: its copy, kept as rows of
// `pairs()` pairs of cells from the even x (two planes of integers, real
// and imaginary, a row every `pitch` cells, a plane every `plane`), added
// into the fine grid scaled by `unit`, row_at holding the rows' starts
// (row_starts, as in add_copy). The block's lanes take the copy's pairs
// in order, rows after rows (no lane idle at a row's end): a pair is one
// 8-byte load from each plane and one vector atomic into the fine grid
// (16-byte aligned: the fine grid's sizes are even). A lane steps its row
// and pair by the block's size without dividing (and, where PADDED, the
// row's plane and row in the plane: planes longer than their rows).
// WRAP: whether the copy's x runs past either end of the grid (the bins
// at x's ends), where each pair's x is wrapped on its own.
template <bool WRAP, bool PADDED>
__device__ inline void add_fixed_rows(float2* __restrict__ fine, const long long* row_at, const int* re,
                                      const int* im, float unit, int pitch, int plane, const BinCopy& c,
                                      const Geometry& g)
{
    const int pairs = c.pairs(), even = c.even(), total = c.rows * pairs, sy = c.sy;
    const int step_rows = blockDim.x / pairs, step_pairs = blockDim.x % pairs;
    int r = threadIdx.x / pairs, p = threadIdx.x % pairs;
    int z = r / sy, y = r - z * sy;  // r = z sy + y
    for (int f = threadIdx.x; f < total; f += blockDim.x) {
        const int at = PADDED ? z * plane + y * pitch + 2 * p : r * pitch + 2 * p;
        const int2 a = *(const int2*)(re + at), b = *(const int2*)(im + at);
        // (Every pair where a strength was not finite: unit is then NaN.)
        if ((a.x | a.y | b.x | b.y) != 0 || unit != unit) {
            int gx = even + 2 * p;
            if (WRAP) {
                while (gx < 0) gx += g.n[0];
                while (gx >= g.n[0]) gx -= g.n[0];
            }
            add_pair(&fine[row_at[r] + gx], make_float2(a.x * unit, b.x * unit), make_float2(a.y * unit, b.y * unit));
        }
        // f += blockDim.x: the pair blockDim.x on, in row-major order.
        r += step_rows;
        p += step_pairs;
        if (PADDED) y += step_rows;
        if (p >= pairs) {
            p -= pairs;
            r++;
            if (PADDED) y++;
        }
        if (PADDED)
            while (y >= sy) {
                y -= sy;
                z++;
            }
    }
}

// Type 1 spreading into a shared-memory copy of the bin as spread_shared,
// but in fixed point: the copy is two planes of 32-bit integers (real and
// imaginary parts), to which shared-memory integer atomics add natively
// (float ones are compare-and-swap loops), so that any thread may add to
// any cell and the work splits by point rather than by plane: a warp per
// point, its groups of G = 8 lanes (4 at widths up to 4) taking its
// planes, lane jx of a group the column of W cells at x = jx of each, a
// real and an imaginary atomic a cell. The planes' rows start at the even
// x at or below the copy's first (BinCopy::even, as interpolate_shared's
// copy), so that add_fixed_rows reads each pair of cells with one load;
// a row every 2 pairs() cells (no gap, so that the block's lanes read
// whole rows on consecutive banks), a plane every
// fixed_plane(pitch sy) cells, so that the planes a warp adds to at once
// fall on distinct banks (with the default bins at width 7, 24 x 15 = 360
// cells, 8 modulo 32: a group's 7 columns take 7 banks of each 8). Each
// contribution is rounded to an integer after scaling by LIMIT / m, m the largest part of
// any strength in the subproblem (the kernel is at most 1), by one
// multiply-add with 1.5 2^23: the float's low bits are then the rounded
// value (for values below 2^22). A cell's sum is then exact, and within
// 2^31 (LIMIT shrinks past 476 points a subproblem to keep it so); each
// contribution is off by at most half a unit, m / LIMIT / 2 (about 1.2e-7
// m). The copy reaches the fine grid scaled back; a strength that is not
// finite makes every cell of the copy NaN.
//
// Per point, shared memory holds its kernel values along y in whole
// 16-byte words (KP of them, read by KP / 4 broadcast loads), along x and
// z (W each, read by each lane at its own offset), and its strength and
// place in one 16-byte word: six loads a point and warp at width 7.
#define FIXED_MAGIC 12582912.0f  // 1.5 2^23, whose bits are 0x4B400000
#define FIXED_LIMIT 4194000.0f   // below 2^22

// spread_fixed_point's shape at width W: the lanes of a group, and a
// point's values in shared memory (nufft/shared.rs's spreading_bytes
// counts the same).
template <int W>
struct FixedPoint {
    static constexpr int G = W <= 4 ? 4 : 8;  // lanes a group (the columns of a plane)
    static constexpr int KP = (W + 3) & ~3;   // kernel values along y a point, whole 16-byte words
    // The strides of a point's values along y (KS) and along x and z (XZ):
    // at width 8, padded (12 and 17, not 8 and 16) so that the threads
    // writing them (kernel_values) fall on more banks; elsewhere the
    // shared memory of 4 blocks an SM at width 7 leaves no room.
    static constexpr int KS = W == 8 ? 12 : KP, XZ = W == 8 ? 17 : 2 * W;
    // A point's bytes: values along y, strength and place, along x and z.
    static constexpr int point_bytes = 4 * KS + 16 + 4 * XZ;
};

template <int W>
__device__ void spread_fixed_point(float2* __restrict__ fine, const float2* __restrict__ c,
                                   const int* __restrict__ first, const float* __restrict__ frac,
                                   const unsigned* __restrict__ perm, const int4* __restrict__ sub,
                                   const int* __restrict__ sub_first, int maxsub, float beta, Geometry g)
{
    constexpr int G = FixedPoint<W>::G, KP = FixedPoint<W>::KP, KS = FixedPoint<W>::KS, XZ = FixedPoint<W>::XZ;
    extern __shared__ __align__(16) float shw[];
    const int4 sb = sub[blockIdx.x];
    const BinCopy copy = bin_copy<W>(sb, g);
    const int* o = copy.o;
    const int even = copy.even(), pitch = 2 * copy.pairs(), sy = copy.sy;
    const int plane = fixed_plane<G>(pitch * sy), cells = plane * copy.sz;  // both even
    int* re = (int*)shw;                                // [cells]
    int* im = re + cells;                               // [cells]
    float* ky_all = (float*)(im + cells);               // [maxsub][KS]
    float4* point = (float4*)(ky_all + KS * maxsub);    // [maxsub]: strength, place (bits), unused
    float* kxz = (float*)(point + maxsub);              // [maxsub][XZ]: along x, then z
    unsigned* largest = (unsigned*)(kxz + XZ * maxsub);  // the bits of m
    long long* row_at = (long long*)ky_all;             // [rows], after the points
    // Both planes of the copy zeroed 16 bytes at a time (2 cells integers,
    // a whole number of 16-byte words: cells is even).
    for (int i = threadIdx.x; i < cells / 2; i += blockDim.x) ((int4*)re)[i] = make_int4(0, 0, 0, 0);
    if (threadIdx.x == 0) *largest = 0;
    const int lo = sub_first[blockIdx.x], n = sb.w;
    // The kernel values, a thread per point and axis (offsets read in order).
    for (int u = threadIdx.x; u < 3 * n; u += blockDim.x) {
        const int t = u / 3, d = u - 3 * t;
        kernel_values<W>(d == 1 ? ky_all + KS * t : kxz + XZ * t + (d == 0 ? 0 : W), frac[3 * lo + u], beta);
    }
    __syncthreads();
    float m = 0.0f;
    for (int t = threadIdx.x; t < n; t += blockDim.x) {
        const int i = lo + t;
        const float2 v = c[perm[i]];
        // The largest part; NaN once a part is NaN (fmaxf would drop it).
        const float ax = fabsf(v.x), ay = fabsf(v.y);
        m = ax > m || ax != ax ? ax : m;
        m = ay > m || ay != ay ? ay : m;
        const int place = (first[3 * i + 2] - o[2]) * plane + (first[3 * i + 1] - o[1]) * pitch + first[3 * i] - even;
        point[t] = make_float4(v.x, v.y, __int_as_float(place), 0.0f);
    }
    // Non-negative floats order as their bits (NaN above infinity).
    atomicMax(largest, __float_as_uint(m));
    __syncthreads();
    m = __uint_as_float(*largest);
    const bool finite = isfinite(m);
    const float limit = fminf(FIXED_LIMIT, 2.0e9f / n);
    const float scale = finite && m > 0.0f ? limit / m : 0.0f;
    // A warp per point: its group q of G lanes takes the point's planes q,
    // q + 32 / G, ... (consecutive planes in a warp's instruction), lane jx
    // the column at x = jx of each.
    constexpr int GW = 32 / G, P = (W + GW - 1) / GW;  // groups a warp, planes a lane
    const int lane = threadIdx.x & 31, q = lane / G, jx = min(lane % G, W - 1);
    const bool column = lane % G < W;
    for (int t = threadIdx.x >> 5; t < n; t += blockDim.x >> 5) {
        const float4 pt = point[t];
        const float* kxzt = kxz + XZ * t;
        const float kx = kxzt[jx] * scale;
        const float wr = pt.x * kx, wi = pt.y * kx;
        float ky[KP];
#pragma unroll
        for (int j = 0; j < KP; j += 4) {
            const float4 k4 = *(const float4*)(ky_all + KS * t + j);
            ky[j] = k4.x;
            ky[j + 1] = k4.y;
            ky[j + 2] = k4.z;
            ky[j + 3] = k4.w;
        }
        const int base = __float_as_int(pt.z) + jx;
#pragma unroll
        for (int pz = 0; pz < P; pz++) {
            const int jz = q + pz * GW;
            if (column && jz < W) {
                const float kz = kxzt[W + jz];
                const float zr = wr * kz, zi = wi * kz;
                int at = base + jz * plane;
#pragma unroll
                for (int jy = 0; jy < W; jy++, at += pitch) {
                    atomicAdd(&re[at], __float_as_int(fmaf(ky[jy], zr, FIXED_MAGIC)) - 0x4B400000);
                    atomicAdd(&im[at], __float_as_int(fmaf(ky[jy], zi, FIXED_MAGIC)) - 0x4B400000);
                }
            }
        }
    }
    // Where each row starts in the fine grid (over the points' values).
    __syncthreads();
    row_starts(row_at, copy, g);
    // Back to floats (NaN everywhere in the copy if a strength was not
    // finite), added into the fine grid.
    const float unit = finite ? (m > 0.0f ? m / limit : 0.0f) : __int_as_float(0x7fc00000);
    const bool wrap = even < 0 || even + 2 * copy.pairs() > g.n[0], padded = plane != pitch * sy;
    if (wrap && padded)
        add_fixed_rows<true, true>(fine, row_at, re, im, unit, pitch, plane, copy, g);
    else if (wrap)
        add_fixed_rows<true, false>(fine, row_at, re, im, unit, pitch, plane, copy, g);
    else if (padded)
        add_fixed_rows<false, true>(fine, row_at, re, im, unit, pitch, plane, copy, g);
    else
        add_fixed_rows<false, false>(fine, row_at, re, im, unit, pitch, plane, copy, g);
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
