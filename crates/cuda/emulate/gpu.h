// Just enough of CUDA to run lines.cu's kernels on the CPU, for a test of
// their index and twiddle logic without a GPU (lines.cpp, run by
// lines.rs's tests): a block's threads are std::threads, __syncthreads a
// barrier, shared memory one array (blocks run one at a time).
#pragma once
#include <barrier>

#define __device__
#define __host__
#define __global__
#define __forceinline__ inline
#define __restrict__
#define __launch_bounds__(...)
#define __shared__

struct float2 {
    float x, y;
};
inline float2 make_float2(float a, float b) { return {a, b}; }

struct Dim3 {
    int x, y, z;
};
inline thread_local Dim3 threadIdx, blockIdx;
inline std::barrier<>* block_barrier;
inline void __syncthreads() { block_barrier->arrive_and_wait(); }
inline float2 smem[1 << 16];
