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
//   5 tuned: several outputs per thread, unrolled sample loop;
//   6 as 5, with samples streamed from global memory in double-buffered
//     chunks, copies overlapping compute, for sample sets of any size.
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

// ---- 5 and 6. several outputs per thread -----------------------------------
// A block covers blockDim.x * VPT consecutive targets; thread t takes targets
// t, t + blockDim.x, ..., so loads and stores stay coalesced. Each sample is
// read once per thread and used VPT times.
template <int VPT, bool CONSTANT>
__device__ __forceinline__ void gather_many(float2* out, const Lattice L, const float* list, long long first,
                                            int count, const Sample* __restrict__ g, int m_count, float sign)
{
    int base = blockIdx.x * blockDim.x * VPT + threadIdx.x;
    float x[VPT], y[VPT], z[VPT], ar[VPT], ai[VPT];
#pragma unroll
    for (int v = 0; v < VPT; v++) {
        int t = base + v * blockDim.x;
        float3 p = target(L, list, first + (t < count ? t : 0));
        x[v] = p.x;
        y[v] = p.y;
        z[v] = p.z;
        ar[v] = 0.0f;
        ai[v] = 0.0f;
    }
#pragma unroll 4
    for (int m = 0; m < m_count; m++) {
        Sample p = CONSTANT ? c_samples[m] : g[m];
        // (cr + i ci)(c + i sign s) = (cr c - sign ci s) + i (ci c + sign cr s).
        // With ci' = sign ci: real part cr c - ci' s, and imaginary part
        // sign (ci' c + cr s), so the sign is applied once, at the end.
        float cr = p.cr;
        float ci = sign * p.ci;
#pragma unroll
        for (int v = 0; v < VPT; v++) {
            float s, c;
            sincos_turns_fast(p.kx * x[v] + p.ky * y[v] + p.kz * z[v], &s, &c);
            ar[v] += cr * c - ci * s;
            ai[v] += ci * c + cr * s;
        }
    }
#pragma unroll
    for (int v = 0; v < VPT; v++) {
        int t = base + v * blockDim.x;
        if (t < count) {
            out[t].x += ar[v];
            out[t].y += sign * ai[v];
        }
    }
}

#define DEFINE_V5(VPT)                                                                                        \
    extern "C" __global__ void sum_v5_##VPT(float2* out, Lattice L, const float* list, long long first,     \
                                            int count, int m_count, float sign)                              \
    {                                                                                                         \
        gather_many<VPT, true>(out, L, list, first, count, nullptr, m_count, sign);                          \
    }                                                                                                         \
    extern "C" __global__ void sum_v6_##VPT(float2* out, Lattice L, const float* list, long long first,     \
                                            int count, const Sample* __restrict__ samples, int m_count,      \
                                            float sign)                                                      \
    {                                                                                                         \
        gather_many<VPT, false>(out, L, list, first, count, samples, m_count, sign);                         \
    }

DEFINE_V5(1)
DEFINE_V5(2)
DEFINE_V5(4)
DEFINE_V5(8)
