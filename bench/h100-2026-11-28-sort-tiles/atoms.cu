// Shared-memory throughput on one GPU: 32-bit integer atomic adds
// (ATOMS.ADD, native) against a float read-modify-write (LDS, FADD, STS)
// and a float2 one (LDS.64, 2 FADD, STS.64), each lane at an offset of its
// own: conflict-free (lane), groups of 8 lanes at 7 consecutive words with
// the groups' starts scattered (group), or scattered lanes (random).
// Prints lane operations per SM and clock. nvcc -O3 -arch=sm_90 atoms.cu
#include <cstdio>
#include <cuda_runtime.h>
#define WORDS 10240
#define ITERS 2048

__device__ int lane_offset(int mode)
{
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    unsigned h = (threadIdx.x + 1) * 2654435761u;
    if (mode == 0) return warp * 32 + lane;
    if (mode == 1) return ((h >> 8) % 4000) * 0 + (((warp * 4 + lane / 8) * 2654435761u >> 10) % 9000) + (lane & 7);
    return (h >> 9) % 9000;
}

template <int KIND>
__global__ void k(int* out, int mode)
{
    __shared__ int s[WORDS];
    for (int i = threadIdx.x; i < WORDS; i += blockDim.x) s[i] = 0;
    __syncthreads();
    const int o = lane_offset(mode);
    float* f = (float*)s;
    float2* f2 = (float2*)s;
    const int o2 = o / 2;
    for (int it = 0; it < ITERS; it++) {
        const int step = (it * 64) & 1023;
#pragma unroll
        for (int u = 0; u < 8; u++) {
            const int at = o + ((step + u * 128) & 1023);
            if (KIND == 0) atomicAdd(&s[at], it + u);
            else if (KIND == 1) f[at] += 1.0f;
            else if (KIND == 2) { float2 v = f2[(o2 + ((step + u * 128) & 511)) ]; v.x += 1.0f; v.y += 2.0f; f2[(o2 + ((step + u * 128) & 511))] = v; }
            else if (KIND == 3) atomicAdd(&f[at], 1.0f);
        }
    }
    __syncthreads();
    int acc = 0;
    for (int i = threadIdx.x; i < WORDS; i += blockDim.x) acc += s[i];
    if (acc == 12345) out[0] = acc;
}

int main()
{
    int* out;
    cudaMalloc(&out, 4);
    int sms, clock;
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
    cudaDeviceGetAttribute(&clock, cudaDevAttrClockRate, 0);
    const char* kinds[] = {"atoms.add.s32", "float rmw (lds, fadd, sts)", "float2 rmw (lds.64, sts.64)", "atomicAdd float (cas loop)"};
    const char* modes[] = {"lane", "group", "random"};
    cudaEvent_t a, b;
    cudaEventCreate(&a);
    cudaEventCreate(&b);
    for (int kind = 0; kind < 4; kind++)
        for (int mode = 0; mode < 3; mode++) {
            for (int rep = 0; rep < 2; rep++) {
                const int blocks = sms * 4, threads = 256;
                cudaEventRecord(a);
                if (kind == 0) k<0><<<blocks, threads>>>(out, mode);
                if (kind == 1) k<1><<<blocks, threads>>>(out, mode);
                if (kind == 2) k<2><<<blocks, threads>>>(out, mode);
                if (kind == 3) k<3><<<blocks, threads>>>(out, mode);
                cudaEventRecord(b);
                cudaEventSynchronize(b);
                float ms;
                cudaEventElapsedTime(&ms, a, b);
                const double ops = (double)blocks * threads * ITERS * 8;
                if (rep == 1)
                    printf("%-30s %-7s %8.3f ms  %6.2f lane ops per SM and clock (at %d MHz)\n", kinds[kind], modes[mode], ms,
                           ops / (ms * 1e-3) / sms / (clock * 1e3), clock / 1000);
            }
        }
    printf("%s\n", cudaGetErrorString(cudaGetLastError()));
}
