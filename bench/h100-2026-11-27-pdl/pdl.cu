// Prototype (issue 29): the Toeplitz product's six launches (x lines
// padded, y lines padded, z columns with FFT(Q), y lines cropped, x lines
// cropped with CG's dot, its partial sums added) chained by programmatic
// dependent launch (PDL) against plain launches, on the same data.
// Built and run on the GPU machine by run.sh, which passes a copy of
// stockham.cuh whose block() (every line kernel's start) triggers the
// next launch and waits for the one before after copying its twiddles:
//     nvcc -O3 -std=c++17 -arch=sm_90 -I<copy> -I crates/cuda/kernels \
//          -DTOEPLITZ=L -DTOEPLITZ_DOT=L pdl.cu
// Without the PDL launch attribute griddepcontrol.wait returns at once,
// so the plain launches run the same kernels.
#include "lines.cu"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <algorithm>

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("%s: %s\n", #x, cudaGetErrorString(e)); exit(1); } } while (0)

__global__ void fill(float* v, long long n, unsigned seed)
{
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
        unsigned h = (unsigned)i * 2654435761u ^ seed;
        h ^= h >> 13; h *= 0x5bd1e995u; h ^= h >> 15;
        v[i] = (float)(h & 0xffff) / 65536.0f - 0.5f;
    }
}

// The blocks' parts summed in one block (sum.cu's sum_partials' role),
// waiting for the pass that wrote them.
__global__ void add_parts(double* out, const double* parts, int n)
{
#if __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
    __shared__ double s[256];
    double a = 0;
    for (int i = threadIdx.x; i < n; i += 256) a += parts[i];
    s[threadIdx.x] = a;
    __syncthreads();
    for (int h = 128; h > 0; h /= 2) {
        if (threadIdx.x < h) s[threadIdx.x] += s[threadIdx.x + h];
        __syncthreads();
    }
    if (threadIdx.x == 0) out[0] = s[0];
}

static bool use_pdl = false;

template <typename... Params, typename... Args>
void launch(void (*k)(Params...), unsigned grid, unsigned block, unsigned smem, Args... args)
{
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(grid);
    cfg.blockDim = dim3(block);
    cfg.dynamicSmemBytes = smem;
    cfg.stream = 0;
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = at;
    cfg.numAttrs = use_pdl ? 1 : 0;
    CK(cudaLaunchKernelEx(&cfg, k, args...));
}

static int shared_bytes(int L, int c, int r1) { return 8 * (L + (c >= 16 ? L : L + L / r1) * c); }

int main()
{
    constexpr int L = TOEPLITZ, N = L / 2;
    const long long plane = (long long)L * L;
    std::vector<float2> twh(L);
    for (int k = 0; k < L; k++) twh[k] = make_float2(cos(2 * M_PI * k / L), sin(2 * M_PI * k / L));
    float2 *tw, *p, *out, *work;
    float* fq;
    double *parts, *dot;
    const long long np = (long long)N * N * N, nw = plane * N, nq = plane * L;
    CK(cudaMalloc(&tw, L * 8));
    CK(cudaMemcpy(tw, twh.data(), L * 8, cudaMemcpyHostToDevice));
    CK(cudaMalloc(&p, np * 8)); CK(cudaMalloc(&out, np * 8));
    CK(cudaMalloc(&work, nw * 8)); CK(cudaMalloc(&fq, nq * 4));
    fill<<<1024, 256>>>((float*)p, 2 * np, 7);
    fill<<<1024, 256>>>(fq, nq, 11);
    const float scale = 1.0f / (float)(plane * L);

    // lines.rs's launch shapes and toeplitz.rs's maps (Map: b d step a n centred coil f s)
    const int Cx = columns_for(L, false), Cy = columns_for(L, true);
    const int zC = columns_for(L, true), zP = columns_points(L), zR1 = next_radix(L, zP);
    const long long xcount = (long long)N * N, ycount = (long long)L * N;
    const Map image{0, N, 1, 1 << 30, N, 0, 0, nullptr, nullptr};          // rows(nx, nx)
    const Map work_x{4LL * N * N, L, 1, N, L, 0, 0, nullptr, nullptr};      // work_rows(n, px)
    const Map ys_full{plane, 1, L, L, L, 0, 0, nullptr, nullptr};           // work_ys(py)
    Map ys_half = ys_full; ys_half.n = N;                                     // work_ys(ny)
    const unsigned xblocks = (unsigned)((xcount + Cx - 1) / Cx);
    CK(cudaMalloc(&parts, xblocks * 8)); CK(cudaMalloc(&dot, 8));
    auto xpad = TOEPLITZ_XPAD; auto ypad = TOEPLITZ_YPAD; auto zcol = TOEPLITZ_Z;
    auto ycrop = TOEPLITZ_YCROP; auto xdot = TOEPLITZ_XDOT;
    const int sx = shared_bytes(L, Cx, 8), sy = shared_bytes(L, Cy, 8), sz = shared_bytes(L, zC, zR1);
    for (auto f : {(const void*)xpad, (const void*)ypad, (const void*)ycrop, (const void*)xdot})
        CK(cudaFuncSetAttribute(f, cudaFuncAttributeMaxDynamicSharedMemorySize, std::max(sx, sy)));
    CK(cudaFuncSetAttribute((const void*)zcol, cudaFuncAttributeMaxDynamicSharedMemorySize, sz));
    auto product = [&] {
        launch(xpad, xblocks, Cx * L / 8, sx, work, (const float2*)p, work_x, image, (int)xcount, (const float2*)tw, -1.0f);
        launch(ypad, (unsigned)(ycount / Cy), Cy * L / 8, sy, work, (const float2*)nullptr, ys_full, ys_half, (int)ycount,
               (const float2*)tw, -1.0f);
        launch(zcol, (unsigned)(plane / zC), zC * L / zP, sz, work, (const float*)fq, (const float2*)tw, plane, N, scale,
               (const float*)nullptr, 0.0f);
        launch(ycrop, (unsigned)(ycount / Cy), Cy * L / 8, sy, work, (const float2*)nullptr, ys_half, ys_full, (int)ycount,
               (const float2*)tw, 1.0f);
        launch(xdot, xblocks, Cx * L / 8, sx, parts, out, (const float2*)work, image, work_x, (int)xcount,
               (const float2*)tw, (const float2*)p, 0.0f, N, N);
        launch(add_parts, 1u, 256u, 0u, dot, (const double*)parts, (int)xblocks);
    };

    // the same bits either way
    std::vector<float2> a(np), b(np);
    double da, db;
    use_pdl = false; product(); CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(a.data(), out, np * 8, cudaMemcpyDeviceToHost)); CK(cudaMemcpy(&da, dot, 8, cudaMemcpyDeviceToHost));
    use_pdl = true; for (int i = 0; i < 5; i++) product(); CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(b.data(), out, np * 8, cudaMemcpyDeviceToHost)); CK(cudaMemcpy(&db, dot, 8, cudaMemcpyDeviceToHost));
    long long differ = 0;
    for (long long i = 0; i < np; i++) differ += a[i].x != b[i].x || a[i].y != b[i].y;
    printf("L=%d: PDL against plain launches: %lld values differ, dots %.17g and %.17g\n", L, differ, da, db);

    cudaEvent_t e0, e1;
    cudaEventCreate(&e0); cudaEventCreate(&e1);
    const int reps = 50;
    for (int round = 0; round < 4; round++)
        for (int mode = 0; mode < 2; mode++) {
            use_pdl = mode == 1;
            for (int i = 0; i < 3; i++) product();
            cudaEventRecord(e0);
            for (int i = 0; i < reps; i++) product();
            cudaEventRecord(e1);
            CK(cudaEventSynchronize(e1));
            float ms;
            cudaEventElapsedTime(&ms, e0, e1);
            printf("L=%d round %d %s: %.1f us a product (6 launches)\n", L, round, use_pdl ? "PDL  " : "plain", 1000 * ms / reps);
        }
    CK(cudaGetLastError());
}
