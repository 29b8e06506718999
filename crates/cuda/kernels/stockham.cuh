// The Stockham FFTs along lines that lines.cu's kernels are built of: the
// passes, their shared-memory layout, the maps that say where a line's
// points lie in global memory, and a block's set-up. Included by lines.cu
// (NVRTC gets it as a header, kernels.rs).
//
// Each line's transform is a Stockham autosort FFT (Govindaraju et al.
// 2008) of mixed radix 8, 4, 6, 2, 3, 5 (and 16 for the columns of the
// lengths that columns_points names), a radix-R DFT per thread in
// registers and a shared-memory exchange per pass. A line of length L has
// L / P threads, P points each (8, or columns_points(L) for the columns);
// a radix-R pass gives each up to ceil(P / R) groups of R points. In
// toeplitz_columns the forward FFT's last pass and the inverse's first
// hold the same P points in each thread (when the first radix is P): the
// product with FFT(Q) happens in registers between them, with no exchange
// through shared memory (four exchanges instead of five at L = 512, two
// at L = 256 with P = 16).
// A block holds C lines adjacent in memory: for lines along x ("narrow"),
// a warp's load takes 32 / C adjacent points of each of C lines, so lines
// of 256 points or more take C = 2, 128 bytes of each (16 points): the
// Toeplitz product's x passes at L = 256 and 512 took 10 and 17 us less a
// product than with 8 and 4 (bench/h100-2026-11-27-pdl/narrow; C = 1 was
// slower). Lines along y or z ("wide" kernels, and toeplitz_columns) are
// strided: a warp's load takes C points of each of 32 / C rows, so C is at
// least 8 where a block of 512 threads allows (L = 512: 64 bytes a row,
// against 32 with C = 4, the narrow blocks' count before). Nsight Compute, 256^3: the z columns
// 25% faster (with the real FFT(Q)), the y lines 7 to 10%; at L = 256 a
// wider C than 8 measured slower. Everything is compiled per
// line length, so that the passes, strides and twiddle steps are
// constants: a kernel with them as run-time values needed 156 registers a
// thread.
#pragma once

#include "chain.cuh"
#include "dft.cuh"

// A point from global memory, asking L2 to fetch the 256 bytes around a
// miss (PTX's L2::256B prefetch size): the lines along y and the z
// columns read 64 bytes of each row (C = 8 columns), and the blocks beside
// read the rest of those bytes soon after. On an H100
// (bench/h100-2026-11-27-l2): the z columns at L = 512 0.774 ms instead
// of 0.809 (128 bytes: 0.778), the y lines forward and inverse 0.563
// instead of 0.592. Not volatile: with `asm volatile` the line kernels
// were 9 to 44% slower (the loads kept in their order); the load's value
// is used before the pass's barrier, so no store of the kernel can come
// before it. Plain loads on the CPU emulation and before sm_75, which has
// no such hint.
__device__ __forceinline__ float2 load_prefetch(const float2* p)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 750
    float2 v;
    asm("ld.global.L2::256B.v2.f32 {%0, %1}, [%2];" : "=f"(v.x), "=f"(v.y) : "l"(p));
    return v;
#else
    return *p;
#endif
}
__device__ __forceinline__ float load_prefetch(const float* p)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 750
    float v;
    asm("ld.global.L2::256B.f32 %0, [%1];" : "=f"(v) : "l"(p));
    return v;
#else
    return *p;
#endif
}

// Columns per block for length L: a power of two from 4 to 32, about 256
// threads a block; wide (strided lines), at least 8 (64 bytes of each row)
// where that fits 512 threads; narrow lines of 256 points or more, 2 (see
// the top). lines.rs computes the same.
__host__ __device__ constexpr int columns_for(int L, bool wide)
{
    if (!wide && L >= 256) return 2;
    int c = 1;
    while (2 * c * (L / 8) <= 256 && 2 * c <= 32) c *= 2;
    c = c < 4 ? 4 : c;
    return wide && c < 8 && 8 * (L / 8) <= 512 ? 8 : c;
}

// The radix of the next pass when `rest` points remain to be combined,
// with P points a thread. Radix 6 where 4 does not divide: 384 = 8 x 8 x
// 6, three passes instead of four (8, 8, 2, 3); its pass leaves a third of
// the group slots idle (64 groups a line on 48 threads of 8 points), which
// costs less than a barrier and a shared-memory round trip of the line:
// on an H200 the NUFFT's six passes of 384 took 3 to 7% less each, with
// 15% fewer instructions (bench/h200-2026-11-28-radix6).
__host__ __device__ constexpr int next_radix(int rest, int P)
{
    return P >= 16 && rest % 16 == 0   ? 16
           : rest % 8 == 0             ? 8
           : rest % 4 == 0             ? 4
           : rest % 6 == 0             ? 6
           : rest % 2 == 0             ? 2
           : rest % 3 == 0             ? 3
                                       : 5;
}

// Points a thread of toeplitz_columns_L holds: 16 at L = 256 (two passes
// of radix 16 each way), else 8. On an H100 (bench/h100-2026-11-26-columns)
// 16 made the 128^3 CG iteration 13% faster; at L = 512, 16 (16 x 16 x 2)
// gained nothing over 8 (8 x 8 x 8) and 32 (32 x 16, its FFT(Q) factors
// held through the forward FFT) lost 20%. lines.rs computes the same.
__host__ __device__ constexpr int columns_points(int L) { return L == 256 ? 16 : 8; }

// Shared-memory position of point i of column c, for passes whose first
// radix is R1: rows of C points (columns interleaved, so a warp's threads
// touch adjacent words), a row of padding after every R1 rows. A
// half-warp's 16 float2 accesses fill the 32 banks once when its M = 16 / C
// rows fall on distinct sixteenths of a bank row: a pass reads M
// consecutive rows (of one run of R1), and the first pass writes rows R1
// apart (later passes, NS >= R1 >= M, consecutive rows again), which the
// padding shifts by C points each. The padding is one row per run of R1
// rows, so for i = j + (multiple of R1) it splits into j's part and a
// constant: the offsets of a thread's points fold into its base address.
// (One word per 32, the earlier layout, left 2- to 4.7-way conflicts:
// Nsight Compute, bench/h200-2026-11-27-columns-async; permuting rows
// within a half-warp's group removed them but cost more integer work than
// they did, bench/h100-2026-11-27-banks.)
template <int C, int R1>
__device__ __forceinline__ int at(int i, int c)
{
    if constexpr (C >= 16) return i * C + c;
    else return (i + (unsigned)i / R1) * C + c;
}

// at(i + k, c) - at(i, c) for k a multiple of R1 (any k where C >= 16): a
// constant, so that a thread's accesses are one base register and
// immediate offsets (the kernels are bound by the instructions they issue,
// most of them integer: Nsight Compute, bench/h100-2026-11-27-banks).
template <int C, int R1>
__host__ __device__ constexpr int at_shift(int k)
{
    return C >= 16 ? k * C : (k + k / R1) * C;
}

// Where line q's points are in global memory: point k at
// (q / a) * b + (q % a) * d + k * step, for k < n, times f[k] where f is
// not null. The line's transform index i holds point k = i (plain), or,
// centred, the mode of frequency i (i - L above L/2) at k = frequency +
// n/2: the n lowest frequencies, in the order -n/2 .. n/2 - 1. A coil
// map `s` (SENSE), where not null, is indexed like the data: a load
// multiplies each point by s, a store writes conj(s) times the result
// (`coil` MAP_SET) or adds it to what is there (MAP_ADD).
enum { MAP_SET = 0, MAP_ADD = 1 };
struct Map {
    long long b, d, step;
    int a, n, centred, coil;
    const float* f;
    const float2* s;
};
// The size `Map` in lines.rs has (NVRTC has no offsetof; lines.rs also
// checks the fields' offsets).
static_assert(sizeof(Map) == 56, "Map's size differs from lines.rs");

// The point of transform index i of a line of length len, or -1.
// Centred: frequency i (i - len from len/2 on) is point (i + n/2) mod len
// where that is below n.
__device__ __forceinline__ int point_of(const Map& m, int i, int len)
{
    if (!m.centred) return i < m.n ? i : -1;
    int k = i + m.n / 2;
    k = k >= len ? k - len : k;
    return k < m.n ? k : -1;
}

// p, as a value the compiler cannot take apart: a line's pointer, which
// it would otherwise split back into buffer and offset, adding the offset
// to each point's in 64 bits. Stores through it are generic (ST, not
// STG): stores by st.global made the compiler branch around each, 6% more
// instructions and slower passes (bench/h200-2026-11-28-radix6).
template <class T>
__device__ __forceinline__ T* opaque(T* p)
{
#if defined(__CUDA_ARCH__)
    asm("mov.b64 %0, %0;" : "+l"(p));
#endif
    return p;
}

// This thread's line: read from src through one map, written to dst
// through another (the same buffer for the passes in place). COIL: the
// maps' coil maps apply where set (a separate kernel, so that the other passes keep
// their registers: the launch bounds allow 64 per thread).
//
// A point's offset within its line, k step, is taken in 32 bits (one
// multiply, and one wide multiply-add onto the line's pointer), where 64
// bits cost seven instructions a point, most of a pass's integer work:
// the passes were issue-bound, and on an H200 they then issued 13% fewer
// instructions and took 5 to 8% less time (bench/h200-2026-11-28-radix6).
// lines.rs's `Map::fits` holds n step below 2^31 for every map a kernel
// is given, and for the columns' own (checked when their pass is made).
template <bool COIL>
struct LineT {
    const float2* src;
    float2* dst;
    long long in, out;
    Map mi, mo;
    int len;
    bool inside;
    __device__ __forceinline__ LineT(const float2* src_, float2* dst_, const Map& mi_, const Map& mo_, int q,
                                     bool inside_, int len_)
        : mi(mi_), mo(mo_), len(len_), inside(inside_)
    {
        in = (long long)(q / mi.a) * mi.b + (long long)(q % mi.a) * mi.d;
        out = (long long)(q / mo.a) * mo.b + (long long)(q % mo.a) * mo.d;
        src = opaque(src_ + in);
        dst = opaque(dst_ + out);
    }
    __device__ __forceinline__ float2 load(int i) const
    {
        const int k = point_of(mi, i, len);
        if (k < 0 || !inside) return make_float2(0.0f, 0.0f);
        const unsigned at = (unsigned)k * (unsigned)mi.step;
        float2 v = load_prefetch(src + at);
        if (mi.f) {
            const float f = mi.f[k];
            v = make_float2(f * v.x, f * v.y);
        }
        if (COIL && mi.s) v = cmul((mi.s + in)[at], v);
        return v;
    }
    // A first pass's N points of one group, j + r G for r < N, into v (a
    // line may read them all before it writes anything: lines.cu's
    // UpdateLine).
    template <int N, int G>
    __device__ __forceinline__ void load_group(float2* v, int j) const
    {
#pragma unroll
        for (int r = 0; r < N; r++) v[r] = load(j + r * G);
    }
    __device__ __forceinline__ void store(int i, float2 v) const
    {
        const int k = point_of(mo, i, len);
        if (k < 0 || !inside) return;
        if (mo.f) {
            const float f = mo.f[k];
            v = make_float2(f * v.x, f * v.y);
        }
        const unsigned at = (unsigned)k * (unsigned)mo.step;
        if (COIL && mo.s) {
            const float2 c = (mo.s + out)[at];
            v = cmul(make_float2(c.x, -c.y), v);
            if (mo.coil == MAP_ADD) v = cadd(v, dst[at]);
        }
        dst[at] = v;
    }
};

// Where a pass reads its points and writes its results: shared memory, the
// column in global memory (the first pass reads it, the last writes it),
// or the thread's registers (point tj + m L / P at m, see hands_over).
enum Place { SHARED, GLOBAL, REGS };

// The last radix of length L's passes, P points a thread.
__host__ __device__ constexpr int last_radix(int L, int P)
{
    int ns = 1, r = 1;
    while (ns < L) {
        r = next_radix(L / ns, P);
        ns *= r;
    }
    return r;
}

// Whether the last pass of an FFT and the first of the next hold the same
// points in each thread, so that the results can stay in registers: the
// first radix is P and the last divides it.
__host__ __device__ constexpr bool hands_over(int L, int P)
{
    return next_radix(L, P) == P && P % last_radix(L, P) == 0;
}

// One radix-R Stockham pass over every column of the block, P points a
// thread: every thread reads its groups into registers, transforms them,
// and writes them. Where both sides are shared memory the block
// synchronises between reading and writing (the pass is in place) and
// after; a pass from registers to shared memory synchronises before it
// writes (the previous pass read there). NS is the product of the earlier
// radices; tw[k] = exp(i 2pi k / L), conjugated for s = -1. With `f`, each
// result is multiplied by the real f[g * R + r] before it is written.
// `regs`: the P points a pass from REGS takes or one to REGS leaves.
// PAD: a first pass from GLOBAL reads a line whose points from L/2 on are
// zero (a map of n = L/2, plain): its points j + r L/R with r >= R/2 are
// those (j < L/R), not read, and dft_pad leaves them out. CROP: a last
// pass to GLOBAL writes only the lower half (n = L/2, plain): its points
// j + r L/R with r < R/2 (the last pass's groups are j < L/R), computed
// by dft_crop where R is even.
template <int L, int C, int P, int R, int NS, Place SRC, Place DST, bool PAD, bool CROP, class Col>
__device__ __forceinline__ void pass(float2* S, const float2* tw, int c, int tj, float s, const Col& col,
                                     const float* f, float2* regs)
{
    constexpr int TC = L / P;
    constexpr int G = (P + R - 1) / R;
    constexpr int GROUPS = L / R;
    constexpr int STEP = L / (NS * R);
    constexpr int R1 = next_radix(L, P);  // the first pass's radix: the layout (at)
    static_assert(SRC != REGS || (NS == 1 && R == P), "registers hold the first pass's points");
    static_assert(DST != REGS || (NS * R == L && P % R == 0), "registers take the last pass's points");
    // A thread's shared-memory reads: at(j + r GROUPS), base plus a constant
    // where GROUPS is a multiple of R1; its writes: at(d + r NS), base plus
    // r C in the first pass (d a multiple of R1 = R, r < R) and a constant
    // in later ones (NS a multiple of R1).
    constexpr bool READ_SHIFTS = C >= 16 || GROUPS % R1 == 0;
    static_assert(NS == 1 ? R == R1 : NS % R1 == 0, "the first radix divides the later strides");
    constexpr bool PADDED = PAD && SRC == GLOBAL && NS == 1;
    constexpr bool CROPPED = CROP && DST == GLOBAL && NS * R == L && R % 2 == 0;
    float2 v[G][R];
#pragma unroll
    for (int g = 0; g < G; g++) {
        const int j = tj + g * TC;
        if (j < GROUPS) {
            const int kstep = (j % NS) * STEP;
            const int rb = at<C, R1>(j, c);
            if constexpr (SRC == GLOBAL) {
                // The first pass (NS = 1: no twiddles) reads global memory
                // a group at a time.
                col.template load_group<PADDED ? R / 2 : R, GROUPS>(v[g], j);
            } else {
#pragma unroll
                for (int r = 0; r < R; r++) {
                    float2 a;
                    if constexpr (SRC == REGS)
                        a = regs[r];
                    else if constexpr (READ_SHIFTS)
                        a = S[rb + at_shift<C, R1>(r * GROUPS)];
                    else
                        a = S[at<C, R1>(j + r * GROUPS, c)];
                    if (r > 0 && NS > 1) {
                        float2 w = tw[kstep * r];
                        a = cmul(a, make_float2(w.x, s * w.y));
                    }
                    v[g][r] = a;
                }
            }
            if constexpr (PADDED)
                dft_pad<R>(v[g], s);
            else if constexpr (CROPPED)
                dft_crop<R>(v[g], s);
            else
                dft<R>(v[g], s);
        }
    }
    if ((SRC == SHARED || SRC == REGS) && DST == SHARED) __syncthreads();
#pragma unroll
    for (int g = 0; g < G; g++) {
        const int j = tj + g * TC;
        if (j < GROUPS) {
            const int d = (j / NS) * NS * R + j % NS;
            const int wb = at<C, R1>(d, c);
#pragma unroll
            for (int r = 0; r < (CROPPED ? R / 2 : R); r++) {
                float2 a = v[g][r];
                if (f) a = make_float2(f[g * R + r] * a.x, f[g * R + r] * a.y);
                if constexpr (DST == GLOBAL)
                    col.store(d + r * NS, a);
                else if constexpr (DST == REGS)
                    regs[g + r * G] = a;
                else if constexpr (NS == 1)
                    S[wb + r * C] = a;
                else
                    S[wb + at_shift<C, R1>(r * NS)] = a;
            }
        }
    }
    if (DST == SHARED) __syncthreads();
}

// The FFT of length L of every column, sign s, P points a thread: the
// passes from NS (points combined so far) on. The first reads from FIRST,
// the last writes to LAST (multiplied by `f`); the others work in shared
// memory.
template <int L, int C, int P, int NS, Place FIRST, Place LAST, bool PAD = false, bool CROP = false, class Col>
__device__ __forceinline__ void fft_columns(float2* S, const float2* tw, int c, int tj, float s,
                                            const Col& col, const float* f, float2* regs)
{
    if constexpr (NS < L) {
        constexpr int R = next_radix(L / NS, P);
        static_assert(NS > 1 || R < L, "one pass: the first would also be the last");
        constexpr Place SRC = NS == 1 ? FIRST : SHARED;
        constexpr Place DST = NS * R == L ? LAST : SHARED;
        pass<L, C, P, R, NS, SRC, DST, PAD, CROP>(S, tw, c, tj, s, col, NS * R == L ? f : nullptr, regs);
        fft_columns<L, C, P, NS * R, FIRST, LAST, PAD, CROP>(S, tw, c, tj, s, col, f, regs);
    }
}

// A block of C lines of length L, P points a thread: the twiddles copied
// into shared memory (first read after the first pass's synchronisation),
// the lines' points after them; thread t serves line c = t % C of the
// block, its groups starting at tj = t / C, tj + L/P, ...
struct Block {
    float2* tw;
    float2* S;
    int c, tj;
    long long line;
};

template <int L, int C, int P>
__device__ __forceinline__ Block block(const float2* __restrict__ twiddles)
{
    constexpr int THREADS = C * (L / P);
    extern __shared__ float2 smem[];
    // Every kernel of lines.cu starts here: chained (chain.cuh), it waits
    // for the kernel before it first.
    prior_grids();
    // Unsigned, and a copy loop of a count known at compile time: with a
    // signed index and `i += THREADS` the compiler does not know the
    // thread index is below THREADS, and emitted a general unrolled loop
    // with remainders, dozens of instructions a thread, in every block.
    const unsigned t = threadIdx.x;
#pragma unroll
    for (int q = 0; q < (L + THREADS - 1) / THREADS; q++) {
        const unsigned i = t + q * THREADS;
        if (L % THREADS == 0 || i < L) smem[i] = twiddles[i];
    }
    return Block{smem, smem + L, (int)(t % C), (int)(t / C), (long long)blockIdx.x * C + t % C};
}
