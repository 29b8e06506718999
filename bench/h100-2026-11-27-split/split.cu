// The z columns of the Toeplitz product at L = 512 (toeplitz_columns_512 of
// LINES_CU, ZC columns a block), with -DSPLIT toeplitz_split_512 beside
// it (each column's transforms of length L as four of length L/2; lines.cu
// with split.diff applied), both against a direct sum in double on a
// sample of columns; then each timed alone, with a kernel that moves the
// columns' bytes and does no FFT (8 and 16 columns a block).
// nvcc -DTOEPLITZ=512 [-DLINES_CU=...] [-DZC=...] [-DSPLIT].
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>
#ifndef LINES_CU
#define LINES_CU "lines.cu"
#endif
#include LINES_CU
#ifndef ZC
#define ZC columns_for(512, true)
#endif

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("%s: %s\n", #x, cudaGetErrorString(e)); exit(1); } } while (0)

__global__ void fill(float* a, long long n, unsigned seed, float lo)
{
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
        unsigned h = (unsigned)i * 2654435761u + seed * 97u;
        h ^= h >> 15; h *= 2246822519u; h ^= h >> 13; h *= 3266489917u; h ^= h >> 16;
        a[i] = lo + (h & 0xffffff) / 16777216.f;
    }
}

// The columns' memory traffic without their FFTs: a block of CC columns,
// L / 8 threads a column, each reading its 4 points of z < N and the 8
// values of FFT(Q) at its frequencies, writing 4 points.
template <int L, int CC>
__global__ void __launch_bounds__(CC * L / 8) columns_copy(float2* work, const float* __restrict__ fq, long long P, float scale)
{
    const int t = threadIdx.x, c = t % CC, tj = t / CC;
    const long long x = (long long)blockIdx.x * CC + c;
    if (x >= P) return;
    float f = 0;
#pragma unroll
    for (int r = 0; r < 8; r++) f += fq[(long long)(tj + r * (L / 8)) * P + x];
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
    float2 *tw, *w0, *wa, *wb;
    float* fq;
    CK(cudaMalloc(&tw, L * 8));
    CK(cudaMemcpy(tw, twh.data(), L * 8, cudaMemcpyHostToDevice));
    CK(cudaMalloc(&w0, nw * 8)); CK(cudaMalloc(&wa, nw * 8)); CK(cudaMalloc(&wb, nw * 8));
    CK(cudaMalloc(&fq, nq * 4));
    fill<<<1024, 256>>>((float*)w0, 2 * nw, 1, -0.5f);
    fill<<<1024, 256>>>(fq, nq, 2, 0.5f);
    const float scale = 1.0f / (float)L;

    const int zC = ZC, zP = columns_points(L), zR1 = next_radix(L, zP);
    const int zsmem = 8 * (L + (zC >= 16 ? L : L + L / zR1) * zC);
    CK(cudaFuncSetAttribute(toeplitz_columns_512, cudaFuncAttributeMaxDynamicSharedMemorySize, zsmem));
#ifdef SPLIT
    const int V = 2 * zC, sP = split_points(N), sR1 = next_radix(N, sP);
    const int ssmem = 8 * (L + N + (V >= 16 ? N : N + N / sR1) * V);
    const int sthreads = SPLIT_THREADS(L);
    CK(cudaFuncSetAttribute(toeplitz_split_512, cudaFuncAttributeMaxDynamicSharedMemorySize, ssmem));
    auto split = [&](float2* w) { toeplitz_split_512<<<(unsigned)(P / zC), sthreads, ssmem>>>(w, fq, tw, P, N, scale); };
#else
    const int sthreads = 0, ssmem = 0;
    auto split = [&](float2* w) { toeplitz_columns_512<<<(unsigned)(P / zC), zC * L / zP, zsmem>>>(w, fq, tw, P, N, scale); };
#endif
    auto today = [&](float2* w) { toeplitz_columns_512<<<(unsigned)(P / zC), zC * L / zP, zsmem>>>(w, fq, tw, P, N, scale); };
    printf("L=%d: columns C=%d P=%d, %d threads %d smem; split %d threads %d smem\n", L, zC, zP, zC * L / zP, zsmem, sthreads, ssmem);

    CK(cudaMemcpy(wa, w0, nw * 8, cudaMemcpyDeviceToDevice));
    CK(cudaMemcpy(wb, w0, nw * 8, cudaMemcpyDeviceToDevice));
    today(wa);
    split(wb);
    CK(cudaDeviceSynchronize());
    CK(cudaGetLastError());
    std::vector<float2> h0(nw), ha(nw), hb(nw);
    std::vector<float> hq(nq);
    CK(cudaMemcpy(h0.data(), w0, nw * 8, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(ha.data(), wa, nw * 8, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(hb.data(), wb, nw * 8, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(hq.data(), fq, nq * 4, cudaMemcpyDeviceToHost));
    // the direct sums on 97 columns spread over the plane, and the two
    // kernels against each other everywhere
    double ea = 0, eb = 0, norm = 0, eab = 0, nab = 0;
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
            const float2 a = ha[z * P + x], b = hb[z * P + x];
            ea += (a.x - yr[z]) * (a.x - yr[z]) + (a.y - yi[z]) * (a.y - yi[z]);
            eb += (b.x - yr[z]) * (b.x - yr[z]) + (b.y - yi[z]) * (b.y - yi[z]);
            norm += yr[z] * yr[z] + yi[z] * yi[z];
        }
    }
    for (long long i = 0; i < nw; i++) {
        eab += (double)(ha[i].x - hb[i].x) * (ha[i].x - hb[i].x) + (double)(ha[i].y - hb[i].y) * (ha[i].y - hb[i].y);
        nab += (double)ha[i].x * ha[i].x + (double)ha[i].y * ha[i].y;
    }
    printf("against the direct sum (97 columns): columns %.3e, split %.3e; split against columns (all) %.3e\n",
           sqrt(ea / norm), sqrt(eb / norm), sqrt(eab / nab));

    cudaEvent_t e0, e1;
    cudaEventCreate(&e0); cudaEventCreate(&e1);
    const char* names[4] = {"columns", "split", "copy C=8", "copy C=16"};
    for (int round = 0; round < 3; round++) {
        for (int which = 0; which < 4; which++) {
            auto run = [&] {
                if (which == 0) today(wa);
                else if (which == 1) split(wb);
                else if (which == 2) columns_copy<L, 8><<<(unsigned)(P / 8), 8 * L / 8>>>(wb, fq, P, scale);
                else columns_copy<L, 16><<<(unsigned)(P / 16), 16 * L / 8>>>(wb, fq, P, scale);
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
