// Complex arithmetic and DFTs of radix 2, 3, 4, 5, 6, 8 and 16 in a thread's
// registers, with the pruned forms a zero-padded or cropped line's first
// or last pass takes (dft_pad, dft_crop): the butterflies of the Stockham
// passes (stockham.cuh, which includes it; NVRTC gets it as a header,
// kernels.rs), so that the FFT's arithmetic reads apart from its layout,
// passes and kernels.
#pragma once

__device__ __forceinline__ float2 cmul(float2 a, float2 b)
{
    return make_float2(a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x);
}

__device__ __forceinline__ float2 cadd(float2 a, float2 b) { return make_float2(a.x + b.x, a.y + b.y); }
__device__ __forceinline__ float2 csub(float2 a, float2 b) { return make_float2(a.x - b.x, a.y - b.y); }

// a * (s i), s = +-1
__device__ __forceinline__ float2 times_i(float2 a, float s) { return make_float2(-s * a.y, s * a.x); }

// cos(x) and sin(x) for |x| <= pi by their series, at compile time.
__host__ __device__ constexpr double series(double x, int first)
{
    double term = first == 0 ? 1.0 : x, sum = term;
    for (int k = first + 2; k < 40; k += 2) {
        term *= -x * x / ((k - 1) * k);
        sum += term;
    }
    return sum;
}

// exp(i 2pi q / R) for q < R / 2, as constants.
template <int R>
struct Roots {
    float c[R / 2], s[R / 2];
    __host__ __device__ constexpr Roots() : c(), s()
    {
        for (int q = 0; q < R / 2; q++) {
            const double x = 6.283185307179586476925 * q / R;
            c[q] = (float)series(x, 0);
            s[q] = (float)series(x, 1);
        }
    }
};

// v[q] = sum_r v[r] exp(s i 2pi r q / R), in registers, s = +-1.
template <int R>
__device__ __forceinline__ void dft(float2* v, float s);

// o[q] times w^q, w = exp(s i 2pi / R), for q = 1 .. R/2 - 1: the twiddles
// between the two half-length DFTs of a radix-R DFT (R = 4, 6, 8 or 16).
template <int R>
__device__ __forceinline__ void twiddle_halves(float2* o, float s)
{
    if constexpr (R == 4) {
        o[1] = times_i(o[1], s);
    } else if constexpr (R == 8) {
        const float h = 0.70710678118654752f;
        o[1] = make_float2(h * (o[1].x - s * o[1].y), h * (o[1].y + s * o[1].x));
        o[2] = times_i(o[2], s);
        o[3] = make_float2(-h * (o[3].x + s * o[3].y), h * (s * o[3].x - o[3].y));
    } else {
        static_assert(R == 6 || R == 16, "halves of radix 4, 6, 8 or 16");
        constexpr Roots<R> w{};
#pragma unroll
        for (int q = 1; q < R / 2; q++) o[q] = cmul(o[q], make_float2(w.c[q], s * w.s[q]));
    }
}

// The DFTs of length R/2 of v's even points (e) and odd points (o), o[q]
// then times w^q: X_q = e_q + o_q and X_{q+R/2} = e_q - o_q.
template <int R>
__device__ __forceinline__ void halves(const float2* v, float2* e, float2* o, float s)
{
#pragma unroll
    for (int q = 0; q < R / 2; q++) {
        e[q] = v[2 * q];
        o[q] = v[2 * q + 1];
    }
    dft<R / 2>(e, s);
    dft<R / 2>(o, s);
    twiddle_halves<R>(o, s);
}

template <int R>
__device__ __forceinline__ void dft(float2* v, float s)
{
    if constexpr (R == 6 || R == 8 || R == 16) {
        // Two DFTs of half the length (radix 6: two of 3).
        constexpr int H = R / 2;
        float2 e[H], o[H];
        halves<R>(v, e, o, s);
#pragma unroll
        for (int q = 0; q < H; q++) {
            v[q] = cadd(e[q], o[q]);
            v[q + H] = csub(e[q], o[q]);
        }
    } else if constexpr (R == 2) {
        float2 a = v[0], b = v[1];
        v[0] = cadd(a, b);
        v[1] = csub(a, b);
    } else if constexpr (R == 4) {
        float2 a0 = cadd(v[0], v[2]), a1 = csub(v[0], v[2]);
        float2 a2 = cadd(v[1], v[3]), a3 = times_i(csub(v[1], v[3]), s);
        v[0] = cadd(a0, a2);
        v[2] = csub(a0, a2);
        v[1] = cadd(a1, a3);
        v[3] = csub(a1, a3);
    } else if constexpr (R == 3) {
        // w = exp(s i 2pi / 3) = -1/2 + s i sqrt(3)/2
        float2 t = cadd(v[1], v[2]);
        float2 d = times_i(csub(v[1], v[2]), s * 0.86602540378443865f);
        float2 m = make_float2(v[0].x - 0.5f * t.x, v[0].y - 0.5f * t.y);
        v[0] = cadd(v[0], t);
        v[1] = cadd(m, d);
        v[2] = csub(m, d);
    } else {
        static_assert(R == 5, "radices are 2, 3, 4, 5, 6, 8 and 16");
        const float c[5] = {1.0f, 0.30901699437494742f, -0.80901699437494742f, -0.80901699437494742f,
                            0.30901699437494742f};
        const float sn[5] = {0.0f, 0.95105651629515357f, 0.58778525229247313f, -0.58778525229247313f,
                             -0.95105651629515357f};
        float2 in[5] = {v[0], v[1], v[2], v[3], v[4]};
#pragma unroll
        for (int q = 0; q < 5; q++) {
            float2 acc = in[0];
#pragma unroll
            for (int r = 1; r < 5; r++) {
                float2 w = make_float2(c[(r * q) % 5], s * sn[(r * q) % 5]);
                acc = cadd(acc, cmul(in[r], w));
            }
            v[q] = acc;
        }
    }
}

// dft<R> of points whose upper half is zero (v[r] = 0 for r >= R/2, not
// read), R = 8 or 16: X_2m = DFT_{R/2}(v)_m and X_2m+1 = DFT_{R/2}(w^r
// v_r)_m, w = exp(s i 2pi / R). A zero-padded line's first pass: the
// butterflies that would add the zeros are left out (a third of an
// 8-point DFT's additions).
template <int R>
__device__ __forceinline__ void dft_pad(float2* v, float s)
{
    static_assert(R == 8 || R == 16, "a first pass's radix is 8 or 16");
    constexpr int H = R / 2;
    float2 e[H], o[H];
#pragma unroll
    for (int r = 0; r < H; r++) e[r] = o[r] = v[r];
    twiddle_halves<R>(o, s);
    dft<H>(e, s);
    dft<H>(o, s);
#pragma unroll
    for (int m = 0; m < H; m++) {
        v[2 * m] = e[m];
        v[2 * m + 1] = o[m];
    }
}

// The lower half of dft<R> (X_q for q < R/2, into v[q]), R = 2, 4, 6, 8
// or 16: e_q + o_q of halves<R>, the other half (e_q - o_q) left out. A
// cropped line's last pass.
template <int R>
__device__ __forceinline__ void dft_crop(float2* v, float s)
{
    if constexpr (R == 2) {
        v[0] = cadd(v[0], v[1]);
    } else {
        float2 e[R / 2], o[R / 2];
        halves<R>(v, e, o, s);
#pragma unroll
        for (int q = 0; q < R / 2; q++) v[q] = cadd(e[q], o[q]);
    }
}
