// The z columns of the Toeplitz product (toeplitz_columns_L of LINES_CU,
// L = TOEPLITZ) as CG's folded map runs them: the multiplier scale FFT(Q)
// + lam S (the uniform stencil's symbol), with (-DSUMS, lines.cu of
// f54e1f0 and its variants) the blocks' sums of multiplier
// |FFT(column)|^2; checked against direct sums in double on the columns of
// 61 blocks, then timed (mean of 20 launches after 3, three rounds).
// -DOFF: the kernel given a null symbol (and sums: the plain product's
// call); -DOLD: an earlier lines.cu, whose kernel has neither.
// nvcc -DTOEPLITZ=L -DLINES_CU=... [-DSUMS] [-DOFF | -DOLD].
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

int main()
{
    constexpr int L = TOEPLITZ, N = L / 2, px = L;
    const long long P = (long long)L * L;
    const long long nw = P * N, nq = P * L;
    std::vector<float2> twh(L);
    for (int k = 0; k < L; k++) twh[k] = make_float2(cos(2 * M_PI * k / L), sin(2 * M_PI * k / L));
    std::vector<float> sym(3 * L);
    for (int a = 0; a < 3; a++)
        for (int i = 0; i < L; i++) sym[a * L + i] = (float)(2 - 2 * cos(2 * M_PI * i / L));
    float2 *tw, *w0, *wa;
    std::vector<float> symcol(P);
    for (long long x = 0; x < P; x++) symcol[x] = sym[x % px] + sym[L + x / px];
    float *fq, *symbol, *symbol_columns;
    double* partial;
    constexpr int zC = columns_for(L, true), zP = columns_points(L), zR1 = next_radix(L, zP);
    const int blocks = (int)(P / zC);
    CK(cudaMalloc(&tw, L * 8));
    CK(cudaMemcpy(tw, twh.data(), L * 8, cudaMemcpyHostToDevice));
    CK(cudaMalloc(&symbol, 3 * L * 4));
    CK(cudaMemcpy(symbol, sym.data(), 3 * L * 4, cudaMemcpyHostToDevice));
    CK(cudaMalloc(&symbol_columns, P * 4));
    CK(cudaMemcpy(symbol_columns, symcol.data(), P * 4, cudaMemcpyHostToDevice));
    CK(cudaMalloc(&partial, blocks * 8));
    CK(cudaMalloc(&w0, nw * 8)); CK(cudaMalloc(&wa, nw * 8));
    CK(cudaMalloc(&fq, nq * 4));
    fill<<<1024, 256>>>((float*)w0, 2 * nw, 1, -0.5f);
    fill<<<1024, 256>>>(fq, nq, 2, 0.5f);
    const float scale = 1.0f / (float)L, lam = 0.3f / (float)L;
    const int zsmem = 8 * (L + (zC >= 16 ? L : L + L / zR1) * zC);
    CK(cudaFuncSetAttribute(COLUMNS, cudaFuncAttributeMaxDynamicSharedMemorySize, zsmem));
#if defined(OLD)
    auto columns = [&](float2* w) { COLUMNS<<<blocks, zC * L / zP, zsmem>>>(w, fq, tw, P, N, scale); };
    const bool folded = false;
#elif defined(SUMS) && defined(OFF)
    auto columns = [&](float2* w) { COLUMNS<<<blocks, zC * L / zP, zsmem>>>(w, fq, tw, P, N, scale, nullptr, px, 0.f, nullptr); };
    const bool folded = false;
#elif defined(SUMS)
    auto columns = [&](float2* w) { COLUMNS<<<blocks, zC * L / zP, zsmem>>>(w, fq, tw, P, N, scale, symbol, px, lam, partial); };
    const bool folded = true;
#elif defined(OFF)
    auto columns = [&](float2* w) { COLUMNS<<<blocks, zC * L / zP, zsmem>>>(w, fq, tw, P, N, scale, nullptr, 0.f); };
    const bool folded = false;
#else
    // the symbol as S_x + S_y per column
    auto columns = [&](float2* w) { COLUMNS<<<blocks, zC * L / zP, zsmem>>>(w, fq, tw, P, N, scale, symbol_columns, lam); };
    const bool folded = true;
#endif
#ifdef SUMS
    const bool sums = folded;
#else
    const bool sums = false;
#endif
    printf("L=%d: columns C=%d P=%d, %d threads %d smem, %s\n", L, zC, zP, zC * L / zP, zsmem, folded ? "folded" : "plain");

    CK(cudaMemcpy(wa, w0, nw * 8, cudaMemcpyDeviceToDevice));
    columns(wa);
    CK(cudaDeviceSynchronize());
    CK(cudaGetLastError());
    std::vector<float2> h0(nw), ha(nw);
    std::vector<float> hq(nq);
    std::vector<double> hp(blocks);
    CK(cudaMemcpy(h0.data(), w0, nw * 8, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(ha.data(), wa, nw * 8, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(hq.data(), fq, nq * 4, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(hp.data(), partial, blocks * 8, cudaMemcpyDeviceToHost));
    // direct sums on the 8 columns of 61 blocks spread over the plane
    double ea = 0, norm = 0, eb = 0, nb = 0;
    for (int s = 0; s < 61; s++) {
        const long long blk = (long long)s * 7919 % blocks;
        double energy = 0;
        for (int c = 0; c < zC; c++) {
            const long long x = blk * zC + c;
            std::vector<double> yr(N, 0), yi(N, 0);
            for (int k = 0; k < L; k++) {
                double xr = 0, xi = 0;
                for (int z = 0; z < N; z++) {
                    const double a = -2 * M_PI * (double)k * z / L;
                    const float2 v = h0[z * P + x];
                    xr += v.x * cos(a) - v.y * sin(a);
                    xi += v.x * sin(a) + v.y * cos(a);
                }
                double f = scale * hq[k * P + x];
                if (folded) f += lam * ((double)sym[x % px] + sym[L + x / px] + sym[2 * L + k]);
                energy += f * (xr * xr + xi * xi);
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
        eb += (hp[blk] - energy) * (hp[blk] - energy);
        nb += energy * energy;
    }
    printf("against the direct sums (61 blocks): columns %.3e, block sums %.3e\n", sqrt(ea / norm),
           sums ? sqrt(eb / nb) : 0.0);

    cudaEvent_t e0, e1;
    cudaEventCreate(&e0); cudaEventCreate(&e1);
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < 3; i++) columns(wa);
        cudaEventRecord(e0);
        const int reps = 20;
        for (int i = 0; i < reps; i++) columns(wa);
        cudaEventRecord(e1);
        CK(cudaEventSynchronize(e1));
        float ms;
        cudaEventElapsedTime(&ms, e0, e1);
        printf("round %d columns: %.3f ms\n", round, ms / reps);
    }
    CK(cudaGetLastError());
}
