// A block's sum in double, in a fixed order, for the reductions of
// vector.cu (dot products, norms) and of lines.cu (CG's dot taken in the
// Toeplitz product's last pass): the same inputs give the same bits on
// every run. Included by both (NVRTC gets it as a header, kernels.rs).
#pragma once

// The largest power of two not above t.
__host__ __device__ constexpr int floor_pow2(int t) { return t < 2 ? 1 : 2 * floor_pow2(t / 2); }

// v summed over a warp's lanes, in every lane, in a fixed order (a
// butterfly).
__device__ __forceinline__ double warp_sum(double v)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// *out = the sum of the `acc`s of the block's T threads (T = blockDim.x),
// written by thread 0; `s` is T doubles of shared memory, free for the
// block. Every thread of the block calls it. Blocks of whole warps sum by
// shuffles, each warp then its warps' sums (one barrier); others by a tree
// over `s`.
template <int T>
__device__ __forceinline__ void block_sum(double* out, double acc, double* s)
{
    const int t = threadIdx.x;
    if constexpr (T % 32 == 0) {
        acc = warp_sum(acc);
        if ((t & 31) == 0) s[t >> 5] = acc;
        __syncthreads();
        // every warp alike (the CPU emulation's shuffles are the block's)
        const double v = warp_sum((t & 31) < T / 32 ? s[t & 31] : 0.0);
        if (t == 0) *out = v;
    } else {
        constexpr int H = floor_pow2(T);
        s[t] = acc;
        __syncthreads();
        if constexpr (H < T) {
            if (t < T - H) s[t] += s[t + H];
            __syncthreads();
        }
        for (int w = H / 2; w > 0; w >>= 1) {
            if (t < w) s[t] += s[t + w];
            __syncthreads();
        }
        if (t == 0) *out = s[0];
    }
}
