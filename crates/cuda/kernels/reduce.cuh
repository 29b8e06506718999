// A block's sum in double, in a fixed order, for the reductions of
// vector.cu (dot products, norms) and of lines.cu (CG's dot taken in the
// Toeplitz product's last pass): the same inputs give the same bits on
// every run. Included by both (NVRTC gets it as a header, kernels.rs).
#pragma once

// The largest power of two not above t.
__host__ __device__ constexpr int floor_pow2(int t) { return t < 2 ? 1 : 2 * floor_pow2(t / 2); }

// *out = the sum of the `acc`s of the block's T threads (T = blockDim.x),
// a tree over `s` (T doubles of shared memory, free for the block), written
// by thread 0. Every thread of the block calls it.
template <int T>
__device__ __forceinline__ void tree_sum(double* out, double acc, double* s)
{
    constexpr int H = floor_pow2(T);
    const int t = threadIdx.x;
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
