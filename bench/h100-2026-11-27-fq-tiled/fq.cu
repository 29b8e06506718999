// The z columns of the Toeplitz product (toeplitz_columns_L of LINES_CU,
// L = TOEPLITZ) with FFT(Q) in the tree's layout (plane after plane, as
// the grid) or tiled (-DTILED: a block's C columns contiguous, point k of
// column x at ((x / C) L + k) C + x % C, so that a block reads one run of
// L C values). Checked against a direct sum in double on 97 columns, then
// timed (mean of 20 launches after 3, three rounds), beside a kernel that
// only moves the columns' bytes, reading FFT(Q) in either layout.
// nvcc -DTOEPLITZ=L -DLINES_CU=... [-DTILED].
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include LINES_CU

#define CAT2(a, b) a##b
#define CAT(a, b) CAT2(a, b)
#define COLUMNS CAT(toeplitz_columns_, TOEPLITZ)
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("%s: %s\n", #x, cudaGetErrorString(e)); exit(1); } } while (0)

__global__ void fill(float* a, long long n, unsigned seed, float lo)
{
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
        unsigned h = (unsigned)i * 2654435761u + seed * 97u;
        h ^= h >> 15; h *= 2246822519u; h ^= h >> 13; h *= 3266489917u; h ^= h >> 16;
        a[i] = lo + (h & 0xffffff) / 16777216.f;
    }
}

// tiled[((x / C) L + k) C + x % C] = plain[k P + x]
template <int C>
__global__ void tile(float* tiled, const float* __restrict__ plain, long long P, int L)
{
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < P * L; i += (long long)gridDim.x * blockDim.x) {
        const long long k = i / P, x = i % P;
        tiled[((x / C) * L + k) * C + x % C] = plain[i];
    }
}

// The columns' memory traffic without their FFTs: a block of CC columns,
// L / 8 threads a column, each reading its 4 points of z < N and the 8
// values of FFT(Q) at its frequencies (plain or tiled), writing 4 points.
template <int L, int CC, bool TILE>
__global__ void __launch_bounds__(CC * L / 8) columns_copy(float2* work, const float* __restrict__ fq, long long P, float scale)
{
    const int t = threadIdx.x, c = t % CC, tj = t / CC;
    const long long x = (long long)blockIdx.x * CC + c;
    if (x >= P) return;
    float f = 0;
#pragma unroll
    for (int r = 0; r < 8; r++) {
        const long long k = tj + r * (L / 8);
        f += TILE ? fq[((long long)blockIdx.x * L + k) * CC + c] : fq[k * P + x];
    }
    float2 v[4];
#pragma unroll
    for (int r = 0; r < 4; r++) v[r] = work[(long long)(tj + r * (L / 8)) * P + x];
#pragma unroll
    for (int r = 0; r < 4; r++) work[(long long)(tj + r * (L / 8)) * P + x] = make_float2(scale * f * v[r].x, scale * f * v[r].y);
}

int main()
{
    constexpr int L = TOEPLITZ, N = L / 2;
    const long long P = (long long)L * L;
    const long long nw = P * N, nq = P * L;
    std::vector<float2> twh(L);
    for (int k = 0; k < L; k++) twh[k] = make_float2(cos(2 * M_PI * k / L), sin(2 * M_PI * k / L));
    float2 *tw, *w0, *wa;
    float *fq, *fqt;
    CK(cudaMalloc(&tw, L * 8));
    CK(cudaMemcpy(tw, twh.data(), L * 8, cudaMemcpyHostToDevice));
    CK(cudaMalloc(&w0, nw * 8)); CK(cudaMalloc(&wa, nw * 8));
    CK(cudaMalloc(&fq, nq * 4)); CK(cudaMalloc(&fqt, nq * 4));
    fill<<<1024, 256>>>((float*)w0, 2 * nw, 1, -0.5f);
    fill<<<1024, 256>>>(fq, nq, 2, 0.5f);
    const float scale = 1.0f / (float)L;

    constexpr int zC = columns_for(L, true), zP = columns_points(L), zR1 = next_radix(L, zP);
    tile<zC><<<1024, 256>>>(fqt, fq, P, L);
#ifdef TILED
    const float* kq = fqt;
    const char* layout = "tiled";
#else
    const float* kq = fq;
    const char* layout = "plain";
#endif
    const int zsmem = 8 * (L + (zC >= 16 ? L : L + L / zR1) * zC);
    CK(cudaFuncSetAttribute(COLUMNS, cudaFuncAttributeMaxDynamicSharedMemorySize, zsmem));
    auto columns = [&](float2* w) { COLUMNS<<<(unsigned)(P / zC), zC * L / zP, zsmem>>>(w, kq, tw, P, N, scale); };
    printf("L=%d: columns C=%d P=%d, %d threads %d smem, FFT(Q) %s\n", L, zC, zP, zC * L / zP, zsmem, layout);

    CK(cudaMemcpy(wa, w0, nw * 8, cudaMemcpyDeviceToDevice));
    columns(wa);
    CK(cudaDeviceSynchronize());
    CK(cudaGetLastError());
    std::vector<float2> h0(nw), ha(nw);
    std::vector<float> hq(nq);
    CK(cudaMemcpy(h0.data(), w0, nw * 8, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(ha.data(), wa, nw * 8, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(hq.data(), fq, nq * 4, cudaMemcpyDeviceToHost));
    // the direct sums on 97 columns spread over the plane (plain FFT(Q))
    double ea = 0, norm = 0;
    for (int s = 0; s < 97; s++) {
        const long long x = (long long)s * 2699 % P;
        std::vector<double> yr(N, 0), yi(N, 0);
        for (int k = 0; k < L; k++) {
            double xr = 0, xi = 0;
            for (int z = 0; z < N; z++) {
                const double a = -2 * M_PI * (double)k * z / L;
                const float2 v = h0[z * P + x];
                xr += v.x * cos(a) - v.y * sin(a);
                xi += v.x * sin(a) + v.y * cos(a);
            }
            const double f = scale * hq[k * P + x];
            xr *= f; xi *= f;
            for (int z = 0; z < N; z++) {
                const double a = 2 * M_PI * (double)k * z / L;
                yr[z] += xr * cos(a) - xi * sin(a);
                yi[z] += xr * sin(a) + xi * cos(a);
            }
        }
        for (int z = 0; z < N; z++) {
            const float2 a = ha[z * P + x];
            ea += (a.x - yr[z]) * (a.x - yr[z]) + (a.y - yi[z]) * (a.y - yi[z]);
            norm += yr[z] * yr[z] + yi[z] * yi[z];
        }
    }
    printf("against the direct sum (97 columns): %.3e\n", sqrt(ea / norm));

    cudaEvent_t e0, e1;
    cudaEventCreate(&e0); cudaEventCreate(&e1);
    const char* names[3] = {"columns", "copy, FFT(Q) plain", "copy, FFT(Q) tiled"};
    for (int round = 0; round < 3; round++) {
        for (int which = 0; which < 3; which++) {
            auto run = [&] {
                if (which == 0) columns(wa);
                else if (which == 1) columns_copy<L, zC, false><<<(unsigned)(P / zC), zC * L / 8>>>(wa, fq, P, scale);
                else columns_copy<L, zC, true><<<(unsigned)(P / zC), zC * L / 8>>>(wa, fqt, P, scale);
            };
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
