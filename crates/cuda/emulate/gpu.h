// Just enough of CUDA to run lines.cu's and nufft.cu's kernels on the
// CPU, for a test of their index logic without a GPU (lines.cpp and
// nufft.cpp, run by lines.rs's and nufft.rs's tests): a block's threads
// are std::threads, __syncthreads a barrier, shared memory one array
// (blocks run one at a time).
#pragma once
#include <atomic>
#include <barrier>
#include <cstring>
#include <math.h>
#include <memory>
#include <thread>
#include <vector>

#define __device__
#define __host__
#define __global__
#define __forceinline__ inline
#define __restrict__
#define __launch_bounds__(...)
#define __shared__
#define __align__(n) __attribute__((aligned(n)))

struct float2 {
    float x, y;
};
inline float2 make_float2(float a, float b) { return {a, b}; }
struct float4 {
    float x, y, z, w;
};
inline float4 make_float4(float a, float b, float c, float d) { return {a, b, c, d}; }
struct int2 {
    int x, y;
};
inline int2 make_int2(int a, int b) { return {a, b}; }
struct int4 {
    int x, y, z, w;
};
inline int4 make_int4(int a, int b, int c, int d) { return {a, b, c, d}; }
inline int min(int a, int b) { return a < b ? a : b; }
inline float atomicAdd(float* p, float v) { return std::atomic_ref<float>(*p).fetch_add(v); }
// Wraps on overflow, as the GPU's does.
inline int atomicAdd(int* p, int v) { return std::atomic_ref<int>(*p).fetch_add(v); }
inline unsigned atomicMax(unsigned* p, unsigned v)
{
    std::atomic_ref<unsigned> a(*p);
    unsigned old = a.load();
    while (old < v && !a.compare_exchange_weak(old, v)) {
    }
    return old;
}
template <class To, class From>
inline To bits_as(From v)
{
    static_assert(sizeof(To) == sizeof(From));
    To t;
    memcpy(&t, &v, sizeof t);
    return t;
}
inline int __float_as_int(float v) { return bits_as<int>(v); }
inline unsigned __float_as_uint(float v) { return bits_as<unsigned>(v); }
inline float __int_as_float(int v) { return bits_as<float>(v); }
inline float __uint_as_float(unsigned v) { return bits_as<float>(v); }

struct Dim3 {
    int x, y, z;
};
inline thread_local Dim3 threadIdx, blockIdx;
inline Dim3 blockDim, gridDim;
inline std::barrier<>* block_barrier;
inline void __syncthreads() { block_barrier->arrive_and_wait(); }
// A barrier per warp (of 32 threads, or the block's last ones).
inline std::vector<std::unique_ptr<std::barrier<>>> warp_barriers;
inline void __syncwarp() { warp_barriers[threadIdx.x / 32]->arrive_and_wait(); }
inline float2 smem[1 << 16];
// A warp's shuffle through a slot per thread between two of the warp's
// barriers: right where every thread of the warp calls it equally often,
// as on the device with a full mask.
inline double shuffle_slots[1024];
inline double __shfl_xor_sync(unsigned, double v, int mask)
{
    shuffle_slots[threadIdx.x] = v;
    __syncwarp();
    const double r = shuffle_slots[threadIdx.x ^ mask];
    __syncwarp();
    return r;
}

// The same for a float among groups of `width` lanes (a mask below the
// width keeps the exchange within the group, as nufft.cu's interpolation
// uses it).
inline float __shfl_xor_sync(unsigned m, float v, int mask, int) { return (float)__shfl_xor_sync(m, (double)v, mask); }
// Lane `src` of each group of `width` lanes, to every lane of the group.
inline long long shuffle_bits[1024];
template <class T>
T __shfl_sync(unsigned, T v, int src, int width)
{
    static_assert(sizeof(T) <= sizeof(long long));
    std::memcpy(&shuffle_bits[threadIdx.x], &v, sizeof(T));
    __syncwarp();
    T r;
    std::memcpy(&r, &shuffle_bits[threadIdx.x / width * width + src], sizeof(T));
    __syncwarp();
    return r;
}

// Runs `kernel` over `blocks` blocks of `threads` threads, a block at a
// time, calling `block_start` (if any) before each block.
template <class K>
void launch(int blocks, int threads, K kernel, void (*block_start)() = nullptr)
{
    blockDim = {threads, 1, 1};
    gridDim = {blocks, 1, 1};
    for (int b = 0; b < blocks; b++) {
        if (block_start) block_start();
        std::barrier<> bar(threads);
        block_barrier = &bar;
        warp_barriers.clear();
        for (int w = 0; w < threads; w += 32) warp_barriers.push_back(std::make_unique<std::barrier<>>(min(32, threads - w)));
        std::vector<std::thread> ts;
        for (int t = 0; t < threads; t++)
            ts.emplace_back([&, t] {
                threadIdx = {t, 0, 0};
                blockIdx = {b, 0, 0};
                kernel();
            });
        for (auto& t : ts) t.join();
    }
}
