// Prototype (issue 29): the Toeplitz product's y and z passes fused into
// one kernel per x frequency, its (y, z) plane held in the shared memory
// of a thread-block cluster, against today's three passes (y lines, z
// columns with FFT(Q), y lines inverse) on the same data. Built and run on
// the GPU machine by run.sh:
//     nvcc -O3 -std=c++17 -arch=sm_90 -DLENGTH=L -DK=... yz.cu
// Layouts: today's work is [z < n][y < 2n][x < 2n] (x fastest), the fused
// kernel's [kx < 2n][z < n][y < n] (a plane per x frequency, y fastest);
// FFT(Q) [kz][ky][kx] for today's, [kx][ky][kz] for the fused.
#ifndef LINES_CU
#define LINES_CU "../../crates/cuda/kernels/lines.cu"
#endif
#include LINES_CU
// PRUNED: lines.cu's passes take PAD and CROP (the fused kernel's too)
#ifdef PRUNED
#define PC(p, c) , p, c
#else
#define PC(p, c)
#endif

#include <cstdio>
#include <cstdlib>
#include <vector>
#include <cmath>

#ifndef K
#define K 8
#endif
#ifndef CF
#define CF 8
#endif

// This block's shared-memory address p as seen in the cluster's block
// `rank`, and loads and stores there (distributed shared memory).
__device__ __forceinline__ unsigned cluster_addr(unsigned p, unsigned rank)
{
    unsigned out;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(out) : "r"(p), "r"(rank));
    return out;
}
__device__ __forceinline__ void st_cluster(unsigned a, float2 v)
{
    asm volatile("st.shared::cluster.v2.f32 [%0], {%1, %2};" ::"r"(a), "f"(v.x), "f"(v.y) : "memory");
}
__device__ __forceinline__ float2 ld_cluster(unsigned a)
{
    float2 v;
    asm volatile("ld.shared::cluster.v2.f32 {%0, %1}, [%2];" : "=f"(v.x), "=f"(v.y) : "r"(a) : "memory");
    return v;
}
__device__ __forceinline__ void cluster_sync()
{
    asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}

// The plane buffer: ky rows of this block (L / K), each N z points plus
// one of padding (conflict-free rows for the column pass).
template <int L>
struct Plane {
    static constexpr int N = L / 2, ROWS = L / K, STRIDE = N + 1;
};

// Phase A: a z line's y FFT, read from global, written to its ky owners.
template <int L>
struct ColA {
    const float2* src;  // the line's N points, y fastest
    unsigned buf;       // the plane buffer's shared address (same in every rank)
    int z;
    bool inside;
    __device__ float2 load(int i) const { return i < L / 2 ? src[i] : make_float2(0.f, 0.f); }
    __device__ void store(int i, float2 v) const
    {
        using P = Plane<L>;
        st_cluster(cluster_addr(buf + 8 * ((i % P::ROWS) * P::STRIDE + z), i / P::ROWS), v);
    }
};
// Phase B: a ky row of the local buffer, along z, in place.
template <int L>
struct ColB {
    float2* row;
    bool inside;
    __device__ float2 load(int i) const { return i < L / 2 ? row[i] : make_float2(0.f, 0.f); }
    __device__ void store(int i, float2 v) const
    {
        if (i < L / 2) row[i] = v;
    }
};
// Phase C: a z line gathered from the ky owners, the inverse y FFT, lower
// half written to global.
template <int L>
struct ColC {
    unsigned buf;
    float2* dst;
    int z;
    bool inside;
    __device__ float2 load(int i) const
    {
        using P = Plane<L>;
        return ld_cluster(cluster_addr(buf + 8 * ((i % P::ROWS) * P::STRIDE + z), i / P::ROWS));
    }
    __device__ void store(int i, float2 v) const
    {
        if (i < L / 2) dst[i] = v;
    }
};

template <int L>
__global__ void __cluster_dims__(K, 1, 1) __launch_bounds__(CF * L / 8, 1)
    planes(float2* work, const float* __restrict__ fq, const float2* __restrict__ twiddles, float scale)
{
    using P = Plane<L>;
    constexpr int N = L / 2, C = CF, THREADS = C * L / 8;
    extern __shared__ float2 smem[];
    const unsigned t = threadIdx.x;
    const int rank = blockIdx.x % K, kx = blockIdx.x / K;
    float2* tw = smem;
    float2* S = smem + L;
    float2* buf = S + (L + L / 8) * C;
    for (int i = t; i < L; i += THREADS) tw[i] = twiddles[i];
    const int c = t % C, tj = t / C;
    ColA<L> a;
    ColC<L> cc;
    a.buf = cc.buf = (unsigned)__cvta_generic_to_shared(buf);
    cluster_sync();  // every block has started (its shared memory exists)
    float2* plane = work + (long long)kx * N * N;
    // A: the z lines of this rank, C at a time
    for (int z0 = rank * (N / K); z0 < (rank + 1) * (N / K); z0 += C) {
        a.z = z0 + c;
        a.src = plane + (long long)a.z * N;
        a.inside = true;
        __syncthreads();
        fft_columns<L, C, 8, 1, GLOBAL, GLOBAL PC(true, false)>(S, tw, c, tj, -1.0f, a, nullptr, nullptr);
    }
    cluster_sync();
    // B: this rank's ky rows along z: FFT, times scale FFT(Q), inverse
    constexpr int R = last_radix(L, 8);
    constexpr int G = (8 + R - 1) / R;
    constexpr Place MID = hands_over(L, 8) ? REGS : SHARED;
    for (int k0 = 0; k0 < P::ROWS; k0 += C) {
        const int kl = k0 + c, ky = rank * P::ROWS + kl;
        ColB<L> b{buf + kl * P::STRIDE, true};
        const float* q = fq + ((long long)kx * L + ky) * L;
        float f[G * R];
#pragma unroll
        for (int g = 0; g < G; g++)
#pragma unroll
            for (int r = 0; r < R; r++) {
                int k = tj + g * (L / 8) + r * (L / R);
                f[g * R + r] = tj + g * (L / 8) < L / R ? scale * q[k] : 0.0f;
            }
        float2 regs[MID == REGS ? 8 : 1];
        __syncthreads();
        fft_columns<L, C, 8, 1, GLOBAL, MID PC(true, false)>(S, tw, c, tj, -1.0f, b, f, regs);
        fft_columns<L, C, 8, 1, MID, GLOBAL PC(false, true)>(S, tw, c, tj, 1.0f, b, nullptr, regs);
    }
    cluster_sync();
    // C: the z lines again, gathered, inverse y FFT
    for (int z0 = rank * (N / K); z0 < (rank + 1) * (N / K); z0 += C) {
        cc.z = z0 + c;
        cc.dst = plane + (long long)cc.z * N;
        cc.inside = true;
        __syncthreads();
        fft_columns<L, C, 8, 1, GLOBAL, GLOBAL PC(false, true)>(S, tw, c, tj, 1.0f, cc, nullptr, nullptr);
    }
    cluster_sync();  // no block leaves while others read its buffer
}

__global__ void fill(float2* a, long long n, unsigned seed)
{
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
        unsigned h = (unsigned)i * 2654435761u ^ seed;
        h ^= h >> 15; h *= 2246822519u; h ^= h >> 13;
        unsigned g = h * 3266489917u; g ^= g >> 16;
        a[i] = make_float2((h & 0xffff) / 65536.f - 0.5f, (g & 0xffff) / 65536.f - 0.5f);
    }
}
__global__ void fill_real(float* a, long long n)
{
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
        unsigned h = (unsigned)i * 2246822519u;
        h ^= h >> 13; h *= 3266489917u; h ^= h >> 16;
        a[i] = (h & 0xffff) / 65536.f + 0.5f;
    }
}
// today's layout from the fused one, and FFT(Q) [kz][ky][kx] from [kx][ky][kz]
__global__ void to_today(float2* w, const float2* v, int n)
{
    long long L = 2 * n, total = (long long)L * n * n;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total; i += (long long)gridDim.x * blockDim.x) {
        long long kx = i / ((long long)n * n), z = (i / n) % n, y = i % n;
        w[(z * L + y) * L + kx] = v[i];
    }
}
__global__ void fq_today(float* a, const float* b, int L)
{
    long long total = (long long)L * L * L;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total; i += (long long)gridDim.x * blockDim.x) {
        long long kx = i / ((long long)L * L), ky = (i / L) % L, kz = i % L;
        a[(kz * L + ky) * L + kx] = b[i];
    }
}

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("%s: %s\n", #x, cudaGetErrorString(e)); exit(1); } } while (0)

int main()
{
    constexpr int L = LENGTH, N = L / 2;
    const long long plane = (long long)L * L;
    std::vector<float2> twh(L);
    for (int k = 0; k < L; k++) twh[k] = make_float2(cos(2 * M_PI * k / L), sin(2 * M_PI * k / L));
    float2 *tw, *v, *w, *v0;
    float *fqf, *fqt;
    CK(cudaMalloc(&tw, L * 8));
    CK(cudaMemcpy(tw, twh.data(), L * 8, cudaMemcpyHostToDevice));
    const long long nv = (long long)L * N * N, nw = plane * N, nq = plane * L;
    CK(cudaMalloc(&v, nv * 8)); CK(cudaMalloc(&v0, nv * 8));
    CK(cudaMalloc(&w, nw * 8));
    CK(cudaMalloc(&fqf, nq * 4)); CK(cudaMalloc(&fqt, nq * 4));
    fill<<<1024, 256>>>(v0, nv, 7);
    fill_real<<<1024, 256>>>(fqf, nq);
    fq_today<<<1024, 256>>>(fqt, fqf, L);
    const float scale = 1.0f / (float)(plane * L);

    // today's: y lines, z columns, y lines inverse (lines.rs's launch shapes)
    const int Cw = columns_for(L, true);
    auto y_kernel = NAME_Y;
    auto y_inverse = NAME_Y_INV;
    auto z_kernel = NAME_Z;
    const int ysmem = 8 * (L + (Cw >= 16 ? L : L + L / 8) * Cw);
    const int zC = columns_for(L, true), zP = columns_points(L), zR1 = next_radix(L, zP);
    const int zsmem = 8 * (L + (zC >= 16 ? L : L + L / zR1) * zC);
    const long long ycount = (long long)L * N;
    // lines.rs's work_ys(n): Map::new(px, plane, 1, px, n)
    Map ys_full{plane, 1, L, L, L, 0, 0, nullptr, nullptr};
    Map ys_half = ys_full; ys_half.n = N;
    auto today = [&] {
        y_kernel<<<(unsigned)(ycount / Cw), Cw * L / 8, ysmem>>>(w, nullptr, ys_full, ys_half, (int)ycount, tw, -1.0f);
        z_kernel<<<(unsigned)(plane / zC), zC * L / zP, zsmem>>>(w, fqt, tw, plane, N, scale);
        y_inverse<<<(unsigned)(ycount / Cw), Cw * L / 8, ysmem>>>(w, nullptr, ys_half, ys_full, (int)ycount, tw, 1.0f);
    };
    const int fsmem = 8 * (L + (L + L / 8) * CF + Plane<L>::ROWS * Plane<L>::STRIDE);
    CK(cudaFuncSetAttribute(planes<L>, cudaFuncAttributeMaxDynamicSharedMemorySize, fsmem));
    if (K > 8) CK(cudaFuncSetAttribute(planes<L>, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
    auto fused = [&] { planes<L><<<L * K, CF * L / 8, fsmem>>>(v, fqf, tw, scale); };

    // correctness: both from the same data
    CK(cudaMemcpy(v, v0, nv * 8, cudaMemcpyDeviceToDevice));
    CK(cudaMemset(w, 0, nw * 8));
    to_today<<<1024, 256>>>(w, v, N);
    today();
    fused();
    CK(cudaDeviceSynchronize());
    std::vector<float2> hv(nv), hw(nw);
    CK(cudaMemcpy(hv.data(), v, nv * 8, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(hw.data(), w, nw * 8, cudaMemcpyDeviceToHost));
    double err = 0, norm = 0;
    for (long long i = 0; i < nv; i++) {
        long long kx = i / ((long long)N * N), z = (i / N) % N, y = i % N;
        float2 b = hw[(z * L + y) * L + kx], a = hv[i];
        err += (a.x - b.x) * (a.x - b.x) + (a.y - b.y) * (a.y - b.y);
        norm += b.x * b.x + b.y * b.y;
    }
    printf("L=%d K=%d C=%d smem=%d: fused vs today relative error %.3e\n", L, K, CF, fsmem, sqrt(err / norm));

    cudaEvent_t e0, e1;
    cudaEventCreate(&e0); cudaEventCreate(&e1);
    auto columns = [&] { z_kernel<<<(unsigned)(plane / zC), zC * L / zP, zsmem>>>(w, fqt, tw, plane, N, scale); };
    const char* names[3] = {"today", "fused", "z columns"};
    for (int round = 0; round < 3; round++) {
        for (int which = 0; which < 3; which++) {
            auto run = [&] { which == 0 ? today() : which == 1 ? fused() : columns(); };
            for (int i = 0; i < 3; i++) run();
            cudaEventRecord(e0);
            const int reps = 20;
            for (int i = 0; i < reps; i++) run();
            cudaEventRecord(e1);
            CK(cudaEventSynchronize(e1));
            float ms;
            cudaEventElapsedTime(&ms, e0, e1);
            printf("round %d %s: %.3f ms\n", round, names[which], ms / reps);
        }
    }
    CK(cudaGetLastError());
}
