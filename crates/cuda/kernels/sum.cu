// The summation engine on the GPU: out[n] = sum_m c_m exp(sign i 2pi k_m . x_n).
//
// One thread gathers over all samples for its output point(s): no atomics.
// The kernels are the book's optimisation ladder, kept side by side so that
// each step's effect stays measurable (engine.variant in the config):
//   1 naive: sample arrays and the output accumulated in global memory,
//     target coordinates recomputed per sample, accurate sinf/cosf;
//   2 coordinates and accumulators in registers;
//   3 samples in chunks through constant memory, array-of-structs;
//   4 as 3, with hardware __sincosf after explicit range reduction of the
//     phase in turns (t - round(t), exact), so its argument is in [-pi, pi];
//   5 tuned: samples staged through shared-memory tiles, several outputs per
//     thread (V consecutive voxels along x, their sin/cos by rotation from one
//     hardware sin/cos per sample), tile-wise partial sums;
//   6 as 5, with samples streamed in double-buffered chunks, copies
//     overlapping compute, for sample sets larger than device memory.
// Phases are in turns: t = k . x with k in cycles/FOV and x in FOV units.

#define TAU 6.28318530717958647692f

// A regular lattice of targets, x fastest. Mirrored by `Lattice` in lib.rs.
struct Lattice {
    int nx, ny, nz, pad;
    float ox, oy, oz, sx, sy, sz;
};

// One k-space sample with its coefficient. Mirrored by `Sample` in lib.rs.
struct Sample {
    float kx, ky, kz, cr, ci;
};
// The sizes `Lattice` and `Sample` in engine.rs have (NVRTC has no
// offsetof; engine.rs also checks the fields' offsets).
static_assert(sizeof(Lattice) == 40, "Lattice's size differs from engine.rs");
static_assert(sizeof(Sample) == 20, "Sample's size differs from engine.rs");

#define CHUNK 3200 // 3200 * 20 bytes = 64000 of the 65536 bytes of constant memory
__constant__ Sample c_samples[CHUNK];

// Position of target n: from the lattice, or from an explicit list (x, y, z) when list != 0.
__device__ __forceinline__ float3 target(const Lattice L, const float* __restrict__ list, long long n)
{
    if (list != nullptr) {
        return make_float3(list[3 * n], list[3 * n + 1], list[3 * n + 2]);
    }
    int i = (int)(n % L.nx);
    long long r = n / L.nx;
    int j = (int)(r % L.ny);
    int l = (int)(r / L.ny);
    return make_float3(L.ox + i * L.sx, L.oy + j * L.sy, L.oz + l * L.sz);
}

// Round to nearest with two adds (1.5 * 2^23): stays on the FMA pipe, leaving
// the special-function unit to sin and cos. Valid for |t| < 2^22.
__device__ __forceinline__ float round_fast(float t)
{
    return __fadd_rn(__fadd_rn(t, 12582912.0f), -12582912.0f);
}

// sin and cos of 2 pi t by the hardware units, after exact range reduction.
__device__ __forceinline__ void sincos_turns_fast(float t, float* s, float* c)
{
    float r = t - round_fast(t); // in [-0.5, 0.5]
    __sincosf(TAU * r, s, c);
}

// ---- 1. naive ------------------------------------------------------------
extern "C" __global__ void sum_v1(float2* out, Lattice L, const float* list, long long first, int count,
                                  const Sample* samples, int m_count, float sign)
{
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= count) return;
    for (int m = 0; m < m_count; m++) {
        float3 x = target(L, list, first + t);
        float arg = TAU * (samples[m].kx * x.x + samples[m].ky * x.y + samples[m].kz * x.z);
        float c = cosf(arg);
        float s = sign * sinf(arg);
        out[t].x += samples[m].cr * c - samples[m].ci * s;
        out[t].y += samples[m].ci * c + samples[m].cr * s;
    }
}

// ---- 2. registers --------------------------------------------------------
extern "C" __global__ void sum_v2(float2* out, Lattice L, const float* list, long long first, int count,
                                  const Sample* __restrict__ samples, int m_count, float sign)
{
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= count) return;
    float3 x = target(L, list, first + t);
    float ar = 0.0f, ai = 0.0f;
    for (int m = 0; m < m_count; m++) {
        Sample p = samples[m];
        float arg = TAU * (p.kx * x.x + p.ky * x.y + p.kz * x.z);
        float c = cosf(arg);
        float s = sign * sinf(arg);
        ar += p.cr * c - p.ci * s;
        ai += p.ci * c + p.cr * s;
    }
    out[t] = make_float2(ar, ai);
}

// ---- 3. constant memory (one launch per chunk; out accumulates) ------------
extern "C" __global__ void sum_v3(float2* out, Lattice L, const float* list, long long first, int count,
                                  int m_count, float sign)
{
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= count) return;
    float3 x = target(L, list, first + t);
    float ar = 0.0f, ai = 0.0f;
    for (int m = 0; m < m_count; m++) {
        float arg = TAU * (c_samples[m].kx * x.x + c_samples[m].ky * x.y + c_samples[m].kz * x.z);
        float c = cosf(arg);
        float s = sign * sinf(arg);
        ar += c_samples[m].cr * c - c_samples[m].ci * s;
        ai += c_samples[m].ci * c + c_samples[m].cr * s;
    }
    out[t].x += ar;
    out[t].y += ai;
}

// ---- 4. hardware sin/cos with explicit range reduction ---------------------
extern "C" __global__ void sum_v4(float2* out, Lattice L, const float* list, long long first, int count,
                                  int m_count, float sign)
{
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= count) return;
    float3 x = target(L, list, first + t);
    float ar = 0.0f, ai = 0.0f;
    for (int m = 0; m < m_count; m++) {
        float s, c;
        sincos_turns_fast(c_samples[m].kx * x.x + c_samples[m].ky * x.y + c_samples[m].kz * x.z, &s, &c);
        s *= sign;
        ar += c_samples[m].cr * c - c_samples[m].ci * s;
        ai += c_samples[m].ci * c + c_samples[m].cr * s;
    }
    out[t].x += ar;
    out[t].y += ai;
}

// ---- 5 and 6. tuned: shared-memory tiles, several outputs per thread --------
// Samples are read from global memory in tiles of TILE, staged through shared
// memory (every thread reads the same sample: a broadcast). Sums are kept per
// tile and added to the running total with Kahan compensation, so float32
// rounding grows with the tile length, not with the number of samples.
//
// Lattice kernels (sum_v5_V, sum_v6_V): each thread owns V consecutive
// targets along x. It evaluates one hardware sin/cos per sample, for its first
// target, and gets the others by rotation, exp(i 2pi k.(x + v dx)) =
// exp(i 2pi k.x) exp(i 2pi v kx dx), with exp(i 2pi kx dx) computed once per
// sample per block (accurately, by sincospif) when the tile is staged. The
// host launches them only on whole x-rows with Nx a multiple of V.
// Generic kernels (sum_v5g_V, sum_v6g_V): any targets; V targets per thread,
// strided by the block size, each with its own hardware sin/cos.

#define TILE 256

// sum += x with Kahan compensation c (the low bits sum + x lost).
__device__ __forceinline__ void kahan_add(float& sum, float& c, float x)
{
    float y = __fsub_rn(x, c);
    float t = __fadd_rn(sum, y);
    c = __fsub_rn(__fsub_rn(t, sum), y);
    sum = t;
}

template <int V>
__device__ __forceinline__ void zero(float (&a)[V])
{
#pragma unroll
    for (int v = 0; v < V; v++) a[v] = 0.0f;
}

// The tile sums (tr, ti) into the running totals (ar, ai), compensated by (er, ei).
template <int V>
__device__ __forceinline__ void add_tile(float (&ar)[V], float (&ai)[V], float (&er)[V], float (&ei)[V],
                                         const float (&tr)[V], const float (&ti)[V])
{
#pragma unroll
    for (int v = 0; v < V; v++) {
        kahan_add(ar[v], er[v], tr[v]);
        kahan_add(ai[v], ei[v], ti[v]);
    }
}

template <int V>
__device__ __forceinline__ void gather_rows(float2* out, const Lattice L, long long first, int count,
                                            const Sample* __restrict__ g, int m_count, float sign)
{
    __shared__ float4 s_k[TILE]; // kx, ky, kz, cr
    __shared__ float4 s_r[TILE]; // sign ci, sin and cos of the step's phase
    int n0 = (blockIdx.x * blockDim.x + threadIdx.x) * V;
    bool active = n0 < count;
    float3 p = target(L, nullptr, first + (active ? n0 : 0));
    float ar[V], ai[V], er[V], ei[V];
    zero(ar);
    zero(ai);
    zero(er);
    zero(ei);
    for (int base = 0; base < m_count; base += TILE) {
        int len = min(TILE, m_count - base);
        __syncthreads();
        for (int j = threadIdx.x; j < len; j += blockDim.x) {
            Sample q = g[base + j];
            float sd, cd;
            sincospif(2.0f * q.kx * L.sx, &sd, &cd);
            s_k[j] = make_float4(q.kx, q.ky, q.kz, q.cr);
            s_r[j] = make_float4(sign * q.ci, sd, cd, 0.0f);
        }
        __syncthreads();
        float tr[V], ti[V];
        zero(tr);
        zero(ti);
#pragma unroll 2
        for (int j = 0; j < len; j++) {
            float4 k = s_k[j];
            float4 r = s_r[j];
            float s, c;
            sincos_turns_fast(k.x * p.x + k.y * p.y + k.z * p.z, &s, &c);
            float cr = k.w, ci = r.x;
#pragma unroll
            for (int v = 0; v < V; v++) {
                // (cr + i ci')(c + i s), with ci' = sign ci; the sign of the
                // imaginary part is applied once at the end (see below).
                tr[v] += cr * c - ci * s;
                ti[v] += ci * c + cr * s;
                if (v + 1 < V) {
                    float s2 = s * r.z + c * r.y;
                    c = c * r.z - s * r.y;
                    s = s2;
                }
            }
        }
        add_tile(ar, ai, er, ei, tr, ti);
    }
    if (active) {
#pragma unroll
        for (int v = 0; v < V; v++) {
            // (cr + i ci)(c + i sign s) = (cr c - ci' s) + i sign (ci' c + cr s)
            out[n0 + v].x += ar[v];
            out[n0 + v].y += sign * ai[v];
        }
    }
}

template <int V>
__device__ __forceinline__ void gather_any(float2* out, const Lattice L, const float* list, long long first,
                                           int count, const Sample* __restrict__ g, int m_count, float sign)
{
    __shared__ float4 s_k[TILE]; // kx, ky, kz, cr
    __shared__ float s_ci[TILE]; // sign ci
    int t0 = blockIdx.x * blockDim.x * V + threadIdx.x;
    float x[V], y[V], z[V], ar[V], ai[V], er[V], ei[V];
#pragma unroll
    for (int v = 0; v < V; v++) {
        int t = t0 + v * blockDim.x;
        float3 p = target(L, list, first + (t < count ? t : 0));
        x[v] = p.x;
        y[v] = p.y;
        z[v] = p.z;
    }
    zero(ar);
    zero(ai);
    zero(er);
    zero(ei);
    for (int base = 0; base < m_count; base += TILE) {
        int len = min(TILE, m_count - base);
        __syncthreads();
        for (int j = threadIdx.x; j < len; j += blockDim.x) {
            Sample q = g[base + j];
            s_k[j] = make_float4(q.kx, q.ky, q.kz, q.cr);
            s_ci[j] = sign * q.ci;
        }
        __syncthreads();
        float tr[V], ti[V];
        zero(tr);
        zero(ti);
#pragma unroll 2
        for (int j = 0; j < len; j++) {
            float4 k = s_k[j];
            float ci = s_ci[j];
#pragma unroll
            for (int v = 0; v < V; v++) {
                float s, c;
                sincos_turns_fast(k.x * x[v] + k.y * y[v] + k.z * z[v], &s, &c);
                tr[v] += k.w * c - ci * s;
                ti[v] += ci * c + k.w * s;
            }
        }
        add_tile(ar, ai, er, ei, tr, ti);
    }
#pragma unroll
    for (int v = 0; v < V; v++) {
        int t = t0 + v * blockDim.x;
        if (t < count) {
            out[t].x += ar[v];
            out[t].y += sign * ai[v];
        }
    }
}

// Variants 5 and 6 launch the same kernels; they differ on the host (all
// samples resident, or streamed chunk by chunk).
#define DEFINE_TUNED(V)                                                                                      \
    extern "C" __global__ void sum_v5_##V(float2* out, Lattice L, const float* list, long long first,      \
                                          int count, const Sample* __restrict__ samples, int m_count,       \
                                          float sign)                                                       \
    {                                                                                                        \
        gather_rows<V>(out, L, first, count, samples, m_count, sign);                                       \
    }                                                                                                        \
    extern "C" __global__ void sum_v5g_##V(float2* out, Lattice L, const float* list, long long first,     \
                                           int count, const Sample* __restrict__ samples, int m_count,      \
                                           float sign)                                                      \
    {                                                                                                        \
        gather_any<V>(out, L, list, first, count, samples, m_count, sign);                                  \
    }

DEFINE_TUNED(1)
DEFINE_TUNED(2)
DEFINE_TUNED(4)
DEFINE_TUNED(8)
