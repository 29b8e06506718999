// lines.cu's kernels for one line length, all three modules (plain, the
// Toeplitz product's and CG's), run on the CPU (gpu.h) and compared with DFTs
// summed in double: prints each relative L2 error for lines.rs's test to
// check. Built as
//     c++ -std=c++20 -pthread -DLENGTH=L -DTOEPLITZ=L -DTOEPLITZ_DOT=L -DLINES_CU='"lines.cu"' lines.cpp
#include "gpu.h"
#include LINES_CU

#include <cmath>
#include <complex>
#include <cstdio>
#include <random>
#include <thread>
#include <vector>

#define NAME2(a, b) a##b
#define NAME(a, b) NAME2(a, b)

using cd = std::complex<double>;
const double TAU = 6.283185307179586;

// sum_j a[j] exp(s i 2pi k j / n)
cd dft(const std::vector<cd>& a, int k, double s)
{
    cd sum = 0;
    for (size_t j = 0; j < a.size(); j++) sum += a[j] * std::polar(1.0, s * TAU * double(k) * j / a.size());
    return sum;
}

// The relative L2 error of `count` lines of `out` (n_out points each)
// against the first n_out points of the DFTs of sign s, length L, of the
// lines of `in` (n_in points each, zero-padded to L).
double lines_error(const std::vector<float2>& out, int n_out, const std::vector<float2>& in, int n_in, int count,
                   int L, double s)
{
    double err = 0, norm = 0;
    for (int q = 0; q < count; q++) {
        std::vector<cd> a(L);
        for (int j = 0; j < n_in; j++) a[j] = cd(in[q * n_in + j].x, in[q * n_in + j].y);
        for (int k = 0; k < n_out; k++) {
            const cd want = dft(a, k, s), got(out[q * n_out + k].x, out[q * n_out + k].y);
            err += std::norm(got - want);
            norm += std::norm(want);
        }
    }
    return std::sqrt(err / norm);
}

int main()
{
    const int L = LENGTH, nz = L / 2;
    std::mt19937 gen(1);
    std::uniform_real_distribution<float> u(-0.5f, 0.5f);
    std::vector<float2> tw(L);
    for (int k = 0; k < L; k++) tw[k] = {(float)std::cos(TAU * k / L), (float)std::sin(TAU * k / L)};

    // toeplitz_columns: P = px py columns (a block and part of another)
    // of the lower halves z < nz; column = lower half of IFFT(multiplier
    // FFT(column)), the multiplier scale fq, then (with the stencil's
    // symbol, lam) scale fq + lam S, S(k) = sum_d 2 - 2 cos(2 pi k_d / L_d)
    // at column x = (x % px, x / px), frequency k; the symbol table holds
    // S_x + S_y per column.
    const int C = columns_for(L, true), threads = C * L / columns_points(L);
    const int px = 4, py = (C + 4) / px;
    const long long P = px * py;
    const int blocks = (int)((P + C - 1) / C);
    std::vector<float2> work0(nz * P);
    std::vector<float> fq(L * P), symbol(P);
    for (auto& v : work0) v = {u(gen), u(gen)};
    for (auto& v : fq) v = u(gen);
    auto stencil_symbol = [](int i, int n) { return 2 - 2 * std::cos(TAU * i / n); };
    for (int x = 0; x < P; x++) symbol[x] = (float)(stencil_symbol(x % px, px) + stencil_symbol(x / px, py));
    const float scale = 0.37f, lam = 0.21f;
    for (int stencil = 0; stencil < 2; stencil++) {
        std::vector<float2> work = work0;
        launch(blocks, threads, [&] {
            NAME(toeplitz_columns_, LENGTH)(work.data(), fq.data(), tw.data(), P, nz, scale,
                                            stencil ? symbol.data() : nullptr, lam);
        });
        double err = 0, norm = 0;
        for (long long x = 0; x < P; x++) {
            std::vector<cd> a(L), b(L);
            for (int z = 0; z < nz; z++) a[z] = cd(work0[z * P + x].x, work0[z * P + x].y);
            for (int k = 0; k < L; k++) {
                double f = double(scale) * double(fq[k * P + x]);
                if (stencil)
                    f += double(lam) * (stencil_symbol(x % px, px) + stencil_symbol(x / px, py) + stencil_symbol(k, L));
                b[k] = dft(a, k, -1.0) * f;
            }
            for (int z = 0; z < nz; z++) {
                const cd want = dft(b, z, 1.0), got(work[z * P + x].x, work[z * P + x].y);
                err += std::norm(got - want);
                norm += std::norm(want);
            }
        }
        std::printf("columns%s %.3e\n", stencil ? ", stencil" : "", std::sqrt(err / norm));
    }

    // fft_lines, forward: `count` lines one after another.
    const int count = 11, Cn = columns_for(L, false);
    std::vector<float2> src(count * L), dst(count * L);
    for (auto& v : src) v = {u(gen), u(gen)};
    const Map m{0, L, 1, 1 << 30, L, 0, 0, nullptr, nullptr};
    launch((count + Cn - 1) / Cn, Cn * L / 8,
           [&] { NAME(fft_lines_, LENGTH)(dst.data(), src.data(), m, m, count, tw.data(), -1.0f); });
    std::printf("lines %.3e\n", lines_error(dst, L, src, L, count, L, -1.0));

    // The Toeplitz product's pruned lines, `count` lines one after another:
    // forward from L/2 points each (zero-padded); inverse, the lower L/2
    // of each line written.
    const int h = L / 2;
    std::vector<float2> half(count * h), out(count * h);
    for (auto& x : half) x = {u(gen), u(gen)};
    const Map full{0, L, 1, 1 << 30, L, 0, 0, nullptr, nullptr};
    const Map first_half{0, h, 1, 1 << 30, h, 0, 0, nullptr, nullptr};
    launch((count + Cn - 1) / Cn, Cn * L / 8,
           [&] { NAME(fft_lines_pad_, LENGTH)(dst.data(), half.data(), full, first_half, count, tw.data(), -1.0f); });
    std::printf("pad %.3e\n", lines_error(dst, L, half, h, count, L, -1.0));

    launch((count + Cn - 1) / Cn, Cn * L / 8,
           [&] { NAME(fft_lines_crop_, LENGTH)(out.data(), src.data(), first_half, full, count, tw.data(), 1.0f); });
    std::printf("crop %.3e\n", lines_error(out, h, src, L, count, L, 1.0));

    // The padded forward with CG's updates (fft_lines_pad_update_L): each
    // point of p becomes r + d p and x gets c times the old p (c = a
    // s[1] / s[2], d = s[3] / s[1]), then the lines of the new p are
    // transformed as fft_lines_pad_L's. With s[0], the floor, above s[1]
    // both coefficients are 0: x stays, p becomes r.
    for (const double floor : {0.0, 1.0}) {
        const double sc[4] = {floor, 0.6, 1.5, 0.9}, a = -0.5;
        const double c = floor > 0 ? 0.0 : a * sc[1] / sc[2], d = floor > 0 ? 0.0 : sc[3] / sc[1];
        std::vector<float2> p(count * h), r(count * h), x(count * h);
        for (auto* v : {&p, &r, &x})
            for (auto& e : *v) e = {u(gen), u(gen)};
        std::vector<float2> p1 = p, x1 = x;
        launch((count + Cn - 1) / Cn, Cn * L / 8, [&] {
            NAME(fft_lines_pad_update_, LENGTH)(dst.data(), p1.data(), full, first_half, count, tw.data(), x1.data(),
                                                r.data(), a, sc, 1, 2, 3, 1, 0);
        });
        std::vector<float2> want_p(count * h);
        double ex = 0, nx = 0, ep = 0, np = 0;
        for (int i = 0; i < count * h; i++) {
            const cd pi(p[i].x, p[i].y), ri(r[i].x, r[i].y), xi(x[i].x, x[i].y);
            const cd wx = xi + c * pi, wp = ri + d * pi;
            want_p[i] = {(float)wp.real(), (float)wp.imag()};
            ex += std::norm(cd(x1[i].x, x1[i].y) - wx);
            nx += std::norm(wx);
            ep += std::norm(cd(p1[i].x, p1[i].y) - wp);
            np += std::norm(wp);
        }
        std::printf("pad and update, floor %.0f, x %.3e\n", floor, std::sqrt(ex / nx));
        std::printf("pad and update, floor %.0f, p %.3e\n", floor, std::sqrt(ep / np));
        std::printf("pad and update, floor %.0f, lines %.3e\n", floor, lines_error(dst, L, want_p, h, count, L, -1.0));
    }

    // The cropped inverse with CG's dot (fft_lines_crop_dot_L): an image of
    // h x ny x nz, its rows the lines; out = crop(IDFT(line)) - a b x, b
    // the voxel's faces (an axis of 1: both), and the partial sums add up
    // to Re <x, out>. With a = 0 (no prior) out is the crop alone.
    const int shapes[][2] = {{3, 4}, {1, 3}, {2, 1}};
    for (const auto& sh : shapes)
        for (const float a : {0.7f, 0.0f}) {
            const int ny = sh[0], nz = sh[1], rows = ny * nz, blocks = (rows + Cn - 1) / Cn;
            std::vector<float2> lines(rows * L), x(rows * h), got(rows * h);
            for (auto& v : lines) v = {u(gen), u(gen)};
            for (auto& v : x) v = {u(gen), u(gen)};
            std::vector<double> partial(blocks, 0.0);
            launch(blocks, Cn * L / 8, [&] {
                NAME(fft_lines_crop_dot_, LENGTH)(partial.data(), got.data(), lines.data(), first_half, full, rows,
                                                  tw.data(), x.data(), a, ny, nz);
            });
            double err = 0, norm = 0, dot = 0;
            for (int q = 0; q < rows; q++) {
                std::vector<cd> line(L);
                for (int j = 0; j < L; j++) line[j] = cd(lines[q * L + j].x, lines[q * L + j].y);
                const int y = q % ny, z = q / ny;
                for (int k = 0; k < h; k++) {
                    const int b = (k == 0) + (k == h - 1) + (y == 0) + (y == ny - 1) + (z == 0) + (z == nz - 1);
                    const cd xi(x[q * h + k].x, x[q * h + k].y);
                    const cd want = dft(line, k, 1.0) - double(a) * b * xi, g(got[q * h + k].x, got[q * h + k].y);
                    err += std::norm(g - want);
                    norm += std::norm(want);
                    dot += (std::conj(xi) * want).real();
                }
            }
            double sum = 0;
            for (double v : partial) sum += v;
            std::printf("crop and dot %dx%dx%d a %.1f, out %.3e\n", h, ny, nz, a, std::sqrt(err / norm));
            std::printf("crop and dot %dx%dx%d a %.1f, dot %.3e\n", h, ny, nz, a, std::abs(sum - dot) / std::abs(dot));
        }
}
