// The z columns of the Toeplitz product with a warp per column (columns_w
// below) against lines.cu's toeplitz_columns_L, where a column's threads
// span the block and every pass ends at a block barrier: here the block
// stages its C columns (z < N) and C x L values of FFT(Q) in shared
// memory (one barrier), each warp transforms its column with warp
// barriers only (forward, product, inverse cropped), and the block writes
// the columns back after a second barrier. Both against a direct sum in
// double on a sample of columns, then timed. nvcc -DTOEPLITZ=L (256 or
// 512) [-DWBLOCKS=b, blocks an SM], -I crates/cuda/kernels. Also built on
// the CPU by the emulation (-DEMULATE, gpu.h).
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>
#ifdef EMULATE
#include "gpu.h"
#endif
#include "lines.cu"
#ifndef WBLOCKS
#define WBLOCKS 3
#endif

// Position of point i in a column's region (a row of padding after every
// R1 points: a first pass's writes, R1 apart, fall on distinct banks).
template <int R1>
__host__ __device__ constexpr int aw(int i) { return i + i / R1; }
// A column's region, float2: L points with padding, plus 4 so that the
// staging's 8 columns x 4 rows a warp fall on distinct bank pairs.
__host__ __device__ constexpr int stride_w(int L, int R1) { return L + L / R1 + 4; }

// One radix-R Stockham pass of a warp's column, P points a lane: as
// lines.cu's `pass`, with the column's region contiguous and __syncwarp.
template <int L, int P, int R, int NS, Place SRC, Place DST, bool PAD, bool CROP>
__device__ __forceinline__ void pass_w(float2* S, const float2* tw, int tj, float s, const float* f, float2* regs)
{
    constexpr int TC = L / P;
    constexpr int G = (P + R - 1) / R;
    constexpr int GROUPS = L / R;
    constexpr int STEP = L / (NS * R);
    constexpr int R1 = next_radix(L, P);
    static_assert(SRC != REGS || (NS == 1 && R == P), "registers hold the first pass's points");
    static_assert(DST != REGS || (NS * R == L && P % R == 0), "registers take the last pass's points");
    constexpr bool PADDED = PAD && SRC == SHARED && NS == 1;
    constexpr bool CROPPED = CROP && NS * R == L && R % 2 == 0;
    float2 v[G][R];
#pragma unroll
    for (int g = 0; g < G; g++) {
        const int j = tj + g * TC;
        if (j < GROUPS) {
            const int kstep = (j % NS) * STEP;
#pragma unroll
            for (int r = 0; r < (PADDED ? R / 2 : R); r++) {
                float2 a = SRC == REGS ? regs[r] : S[aw<R1>(j + r * GROUPS)];
                if (r > 0 && NS > 1) {
                    float2 w = tw[kstep * r];
                    a = cmul(a, make_float2(w.x, s * w.y));
                }
                v[g][r] = a;
            }
            if constexpr (PADDED)
                dft_pad<R>(v[g], s);
            else if constexpr (CROPPED)
                dft_crop<R>(v[g], s);
            else
                dft<R>(v[g], s);
        }
    }
    if (DST == SHARED) __syncwarp();
#pragma unroll
    for (int g = 0; g < G; g++) {
        const int j = tj + g * TC;
        if (j < GROUPS) {
            const int d = (j / NS) * NS * R + j % NS;
#pragma unroll
            for (int r = 0; r < (CROPPED ? R / 2 : R); r++) {
                float2 a = v[g][r];
                if (f) a = make_float2(f[g * R + r] * a.x, f[g * R + r] * a.y);
                if constexpr (DST == REGS)
                    regs[g + r * G] = a;
                else
                    S[aw<R1>(d + r * NS)] = a;
            }
        }
    }
    if (DST == SHARED) __syncwarp();
}

template <int L, int P, int NS, Place FIRST, Place LAST, bool PAD, bool CROP>
__device__ __forceinline__ void fft_w(float2* S, const float2* tw, int tj, float s, const float* f, float2* regs)
{
    if constexpr (NS < L) {
        constexpr int R = next_radix(L / NS, P);
        constexpr Place SRC = NS == 1 ? FIRST : SHARED;
        constexpr Place DST = NS * R == L ? LAST : SHARED;
        pass_w<L, P, R, NS, SRC, DST, PAD, CROP>(S, tw, tj, s, NS * R == L ? f : nullptr, regs);
        fft_w<L, P, NS * R, FIRST, LAST, PAD, CROP>(S, tw, tj, s, f, regs);
    }
}

template <int L, int C>
__device__ __forceinline__ void columns_w(float2* work, const float* __restrict__ fq,
                                          const float2* __restrict__ twiddles, long long Pl, float scale)
{
    constexpr int P = L / 32, N = L / 2, THREADS = C * 32;
    constexpr int R1 = next_radix(L, P);
    constexpr int STRIDE = stride_w(L, R1);
    constexpr int LF = L + 4;  // F's row: 8 columns x 4 rows a warp on distinct banks
    static_assert(hands_over(L, P), "the forward FFT hands over in registers");
    extern __shared__ float2 smem[];
    float2* tw = smem;
    float2* S = smem + L;
    float* F = (float*)(S + C * STRIDE);
    const unsigned t = threadIdx.x;
    for (unsigned i = t; i < L; i += THREADS) tw[i] = twiddles[i];
    const long long x0 = (long long)blockIdx.x * C;
    {
        // the block's C columns, z < N, and FFT(Q) at all L planes, read a
        // row of C at a time
        const int c = t % C;
        const bool in = x0 + c < Pl;
#pragma unroll
        for (int q = 0; q < N * C / THREADS; q++) {
            const int z = t / C + q * (THREADS / C);
            S[c * STRIDE + aw<R1>(z)] = in ? work[z * Pl + x0 + c] : make_float2(0.0f, 0.0f);
        }
#pragma unroll
        for (int q = 0; q < L * C / THREADS; q++) {
            const int k = t / C + q * (THREADS / C);
            F[c * LF + k] = in ? scale * fq[k * Pl + x0 + c] : 0.0f;
        }
    }
    __syncthreads();
    const int c = t / 32, lane = t % 32;
    float2* Sc = S + c * STRIDE;
    constexpr int RL = last_radix(L, P), G = (P + RL - 1) / RL;
    float f[G * RL];
#pragma unroll
    for (int g = 0; g < G; g++)
#pragma unroll
        for (int r = 0; r < RL; r++) {
            const int j = lane + g * 32;
            f[g * RL + r] = j < L / RL ? F[c * LF + j + r * (L / RL)] : 0.0f;
        }
    float2 regs[P];
    fft_w<L, P, 1, SHARED, REGS, true, false>(Sc, tw, lane, -1.0f, f, regs);
    fft_w<L, P, 1, REGS, SHARED, false, true>(Sc, tw, lane, 1.0f, nullptr, regs);
    __syncthreads();
    {
        const int c2 = t % C;
        if (x0 + c2 < Pl) {
#pragma unroll
            for (int q = 0; q < N * C / THREADS; q++) {
                const int z = t / C + q * (THREADS / C);
                work[z * Pl + x0 + c2] = S[c2 * STRIDE + aw<R1>(z)];
            }
        }
    }
}

constexpr int WC = 8;
__host__ __device__ constexpr int smem_w(int L)
{
    return 8 * (L + WC * stride_w(L, next_radix(L, L / 32))) + 4 * WC * (L + 4);
}

extern "C" __global__ void __launch_bounds__(WC * 32, WBLOCKS)
    columns_warp(float2* work, const float* __restrict__ fq, const float2* __restrict__ tw, long long P, int nz, float scale)
{
    columns_w<TOEPLITZ, WC>(work, fq, tw, P, scale);
}

#ifndef EMULATE
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("%s: %s\n", #x, cudaGetErrorString(e)); exit(1); } } while (0)
__global__ void fill(float* a, long long n, unsigned seed, float lo)
{
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
        unsigned h = (unsigned)i * 2654435761u + seed * 97u;
        h ^= h >> 15; h *= 2246822519u; h ^= h >> 13; h *= 3266489917u; h ^= h >> 16;
        a[i] = lo + (h & 0xffffff) / 16777216.f;
    }
}
#define NAME2(a, b) a##b
#define NAME(a, b) NAME2(a, b)

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
    const int zC = columns_for(L, true), zP = columns_points(L), zR1 = next_radix(L, zP);
    const int zsmem = 8 * (L + (zC >= 16 ? L : L + L / zR1) * zC);
    const int wsmem = smem_w(L);
    CK(cudaFuncSetAttribute(columns_warp, cudaFuncAttributeMaxDynamicSharedMemorySize, wsmem));
    auto today = [&](float2* w) { NAME(toeplitz_columns_, TOEPLITZ)<<<(unsigned)(P / zC), zC * L / zP, zsmem>>>(w, fq, tw, P, N, scale); };
    auto warp = [&](float2* w) { columns_warp<<<(unsigned)((P + WC - 1) / WC), WC * 32, wsmem>>>(w, fq, tw, P, N, scale); };
    printf("L=%d: columns C=%d P=%d %d threads %d smem; warp C=%d %d threads %d smem, %d blocks an SM\n", L, zC, zP,
           zC * L / zP, zsmem, WC, WC * 32, wsmem, WBLOCKS);
    CK(cudaMemcpy(wa, w0, nw * 8, cudaMemcpyDeviceToDevice));
    CK(cudaMemcpy(wb, w0, nw * 8, cudaMemcpyDeviceToDevice));
    today(wa);
    warp(wb);
    CK(cudaDeviceSynchronize());
    CK(cudaGetLastError());
    std::vector<float2> h0(nw), ha(nw), hb(nw);
    std::vector<float> hq(nq);
    CK(cudaMemcpy(h0.data(), w0, nw * 8, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(ha.data(), wa, nw * 8, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(hb.data(), wb, nw * 8, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(hq.data(), fq, nq * 4, cudaMemcpyDeviceToHost));
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
    printf("against the direct sum (97 columns): columns %.3e, warp %.3e; warp against columns (all) %.3e\n",
           sqrt(ea / norm), sqrt(eb / norm), sqrt(eab / nab));
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0); cudaEventCreate(&e1);
    for (int round = 0; round < 3; round++) {
        for (int which = 0; which < 2; which++) {
            auto run = [&] { which == 0 ? today(wa) : warp(wb); };
            for (int i = 0; i < 3; i++) run();
            cudaEventRecord(e0);
            const int reps = 20;
            for (int i = 0; i < reps; i++) run();
            cudaEventRecord(e1);
            CK(cudaEventSynchronize(e1));
            float ms;
            cudaEventElapsedTime(&ms, e0, e1);
            printf("round %d %s: %.3f ms\n", round, which == 0 ? "columns" : "warp", ms / reps);
        }
    }
    CK(cudaGetLastError());
}
#else
// The emulation: a few columns against the direct sum (prints the error).
#include <complex>
#include <random>
int main()
{
    constexpr int L = TOEPLITZ, N = L / 2;
    const long long P = 2 * WC + 3;
    std::mt19937 gen(1);
    std::uniform_real_distribution<float> u(-0.5f, 0.5f);
    std::vector<float2> tw(L), work(N * P);
    std::vector<float> fq(L * P);
    for (int k = 0; k < L; k++) tw[k] = {(float)std::cos(2 * M_PI * k / L), (float)std::sin(2 * M_PI * k / L)};
    for (auto& v : work) v = {u(gen), u(gen)};
    for (auto& v : fq) v = u(gen);
    const auto before = work;
    const float scale = 0.37f;
    launch((P + WC - 1) / WC, WC * 32, [&] { columns_warp(work.data(), fq.data(), tw.data(), P, N, scale); });
    using cd = std::complex<double>;
    double err = 0, norm = 0;
    for (long long x = 0; x < P; x++) {
        std::vector<cd> b(L);
        for (int k = 0; k < L; k++) {
            cd s = 0;
            for (int z = 0; z < N; z++) s += cd(before[z * P + x].x, before[z * P + x].y) * std::polar(1.0, -2 * M_PI * k * z / L);
            b[k] = s * double(scale) * double(fq[k * P + x]);
        }
        for (int z = 0; z < N; z++) {
            cd s = 0;
            for (int k = 0; k < L; k++) s += b[k] * std::polar(1.0, 2 * M_PI * k * z / L);
            err += std::norm(cd(work[z * P + x].x, work[z * P + x].y) - s);
            norm += std::norm(s);
        }
    }
    std::printf("warp columns %.3e\n", std::sqrt(err / norm));
}
#endif
