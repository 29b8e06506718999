// nufft.cu's shared-memory spreadings (float and fixed point) and its two
// interpolations (from the fine grid, and from shared-memory copies of
// the bins) for one kernel width, run on the CPU (gpu.h) and compared
// with the same sums taken point by point in double: prints "spread BINS
// GRID error", "spread-fixed-point BINS GRID error", "interpolate BINS
// GRID error" and "interpolate-shared BINS GRID error" per case for
// nufft.rs's test to check, and "nan-kept BINS GRID fraction" (and
// -fixed-point): with one strength NaN, the fraction of its footprint's
// cells that are not NaN, 0 when it reached them all. The points are
// sorted and cut into subproblems here as the plan's kernels do on the
// device. Built as
//     c++ -std=c++20 -pthread -DSPREAD_SHARED=W -DNUFFT_CU='"nufft.cu"' nufft.cpp
#include "gpu.h"
alignas(16) float shw[1 << 15];
#include NUFFT_CU

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <random>
#include <utility>
#include <vector>

// Before each block of a shared-memory kernel: shared memory as a GPU may
// leave it, here all NaN, so that a kernel that reads a cell it never
// wrote (even with weight 0) shows it in its sums.
void stale_shared()
{
    std::fill(std::begin(shw), std::end(shw), std::numeric_limits<float>::quiet_NaN());
}

#define NAME2(a, b) a##b
#define NAME(a, b) NAME2(a, b)

const int W = SPREAD_SHARED;

// Relative L2 error of the kernel's spreading of m random points onto a
// fine grid n in bins bs, subproblems of at most maxsub points, and of its
// interpolation of a random fine grid at the same points.
struct Errors {
    double spread, spread_fixed, interpolate, interpolate_shared;
    // With one strength NaN: the fraction of its footprint's cells that
    // each spreading left a number (0 when the NaN reached them all).
    double nan_lost, nan_lost_fixed;
};

Errors errors(const int n[3], const int bins[3], const int tiles[3], int m, int maxsub,
                                 unsigned seed)
{
    std::mt19937 gen(seed);
    std::uniform_real_distribution<double> u(-3 * M_PI, 3 * M_PI);
    std::uniform_real_distribution<float> v(-0.5f, 0.5f);
    std::vector<double> x(3 * m);
    for (auto& p : x) p = u(gen);
    // A cluster in one corner: bins of many subproblems, footprints wrapping.
    for (int i = 0; i < m / 3; i++)
        for (int d = 0; d < 3; d++) x[3 * i + d] = M_PI - 0.05 * (u(gen) + 3 * M_PI);
    std::vector<float2> c(m);
    for (auto& s : c) s = {v(gen), v(gen)};

    Geometry g;
    for (int d = 0; d < 3; d++) {
        g.n[d] = n[d];
        g.bs[d] = std::min(bins[d], n[d]);
        g.nb[d] = (n[d] + g.bs[d] - 1) / g.bs[d];
        g.bt[d] = std::min(tiles[d], g.nb[d]);
    }
    const int nbins = g.nb[0] * g.nb[1] * g.nb[2];
    // The sort key is a bijection of the bins onto 0 .. nbins - 1, and
    // key_bin its inverse.
    std::vector<char> seen(nbins, 0);
    for (int bz = 0; bz < g.nb[2]; bz++)
        for (int by = 0; by < g.nb[1]; by++)
            for (int bx = 0; bx < g.nb[0]; bx++) {
                const int k = bin_key(bx, by, bz, g);
                int b[3];
                if (k >= 0 && k < nbins) key_bin(b, k, g);
                if (k < 0 || k >= nbins || seen[k]++ || b[0] != bx || b[1] != by || b[2] != bz) {
                    fprintf(stderr, "bin (%d, %d, %d) has key %d, not a bijection's\n", bx, by, bz, k);
                    exit(1);
                }
            }
    // Sort by bin, as nufft_count, nufft_scan and nufft_place do (here in
    // the points' order within a bin; there in the atomics').
    std::vector<int> bin(m), count(nbins, 0), start(nbins + 1, 0);
    for (int i = 0; i < m; i++) count[bin[i] = bin_of_point(x.data(), i, g)]++;
    for (int b = 0; b < nbins; b++) start[b + 1] = start[b] + count[b];
    std::vector<int> first(3 * m), fill(start.begin(), start.end() - 1);
    std::vector<float> frac(3 * m);
    std::vector<unsigned> perm(m);
    for (int i = 0; i < m; i++) {
        const int s = fill[bin[i]]++;
        perm[s] = i;
        for (int d = 0; d < 3; d++) {
            float a;
            first[3 * s + d] = footprint_first(fine_coord(x[3 * i + d], n[d]), W, &a);
            frac[3 * s + d] = a;
        }
    }
    std::vector<int4> sub;
    std::vector<int> sub_first;
    for (int b = 0; b < nbins; b++)
        for (int k = start[b]; k < start[b + 1]; k += maxsub) {
            int at[3];
            key_bin(at, b, g);
            sub.push_back(make_int4(at[0], at[1], at[2], std::min(maxsub, start[b + 1] - k)));
            sub_first.push_back(k);
        }

    // The block's shared memory, as nufft.rs's spreading_method counts it,
    // must fit the emulation's.
    const int copy = (g.bs[0] + W) * (g.bs[1] + W) * (g.bs[2] + W), rows = (g.bs[1] + W) * (g.bs[2] + W);
    const size_t points = 4 * (((3 * W * maxsub + 1) & ~1) + 4 * maxsub);
    // (the fixed-point copy's, and interpolate_shared's, rows of pairs from an even x)
    const size_t pair_rows = 16 * (size_t)rows * interpolate_pitch<W>((g.bs[0] + W + 2) / 2);
    // (the fixed-point copy's rows 2 pairs long, the most where its first x is odd)
    const int fixed_row = 2 * ((g.bs[0] + W + 2) / 2);
    const size_t fixed_copy = 8 * (size_t)(g.bs[2] + W) * fixed_plane<FixedPoint<W>::G>(fixed_row * (g.bs[1] + W));
    const size_t fixed_points = FixedPoint<W>::point_bytes * (size_t)maxsub + 4;
    if (8 * (size_t)copy + std::max(points, 8 * (size_t)rows) > sizeof shw ||
        fixed_copy + std::max(fixed_points, 8 * (size_t)rows) > sizeof shw || pair_rows + 16 > sizeof shw) {
        fprintf(stderr, "a subproblem needs more shared memory than the emulation has\n");
        exit(1);
    }
    const long long cells = (long long)n[0] * n[1] * n[2];
    const float beta = 2.3f * W;
    // Both shared-memory spreadings: in float (spread_shared) and in fixed
    // point (spread_fixed_point).
    std::vector<float2> fine(cells, make_float2(0, 0)), fixed(cells, make_float2(0, 0));
    launch((int)sub.size(), SPREAD_THREADS, [&] {
        NAME(nufft_spread_shared_, SPREAD_SHARED)(fine.data(), c.data(), first.data(), frac.data(), perm.data(),
                                                  sub.data(), sub_first.data(), maxsub, beta, g);
    }, stale_shared);
    launch((int)sub.size(), SPREAD_THREADS, [&] {
        spread_fixed_point<W>(fixed.data(), c.data(), first.data(), frac.data(), perm.data(), sub.data(),
                              sub_first.data(), maxsub, beta, g);
    }, stale_shared);

    // Sorted point s's footprint, cell by cell: f(cell, weight in double
    // from the kernel's float32 values).
    auto footprint = [&](int s, auto f) {
        float k[3][W];
        for (int d = 0; d < 3; d++) kernel_values<W>(k[d], frac[3 * s + d], beta);
        for (int jz = 0; jz < W; jz++)
            for (int jy = 0; jy < W; jy++)
                for (int jx = 0; jx < W; jx++)
                    f(((long long)wrap(first[3 * s + 2] + jz, n[2]) * n[1] + wrap(first[3 * s + 1] + jy, n[1])) * n[0] +
                          wrap(first[3 * s] + jx, n[0]),
                      (double)k[0][jx] * k[1][jy] * k[2][jz]);
    };

    // Point by point in double.
    std::vector<double> want(2 * cells, 0.0);
    for (int s = 0; s < m; s++) {
        const float2 cs = c[perm[s]];
        footprint(s, [&](long long at, double w) {
            want[2 * at] += w * cs.x;
            want[2 * at + 1] += w * cs.y;
        });
    }
    auto spread_error = [&](const std::vector<float2>& got) {
        double num = 0, den = 0;
        for (long long i = 0; i < cells; i++) {
            const double dr = got[i].x - want[2 * i], di = got[i].y - want[2 * i + 1];
            num += dr * dr + di * di;
            den += want[2 * i] * want[2 * i] + want[2 * i + 1] * want[2 * i + 1];
        }
        return std::sqrt(num / den);
    };
    const double spread = spread_error(fine), spread_fixed = spread_error(fixed);

    // A NaN strength reaches every cell of its footprint, in both
    // spreadings (not dropped by fixed point's scaling).
    std::vector<float2> c_nan = c;
    c_nan[perm[0]].x = NAN;
    auto nan_lost = [&](auto spread_kernel) {
        std::vector<float2> grid(cells, make_float2(0, 0));
        launch((int)sub.size(), SPREAD_THREADS, [&] { spread_kernel(grid.data(), c_nan.data()); }, stale_shared);
        int kept = 0, all = 0;
        footprint(0, [&](long long at, double) {
            all++;
            kept += !std::isnan(grid[at].x);
        });
        return (double)kept / all;
    };
    const double lost = nan_lost([&](float2* grid, const float2* cs) {
        NAME(nufft_spread_shared_, SPREAD_SHARED)(grid, cs, first.data(), frac.data(), perm.data(), sub.data(),
                                                  sub_first.data(), maxsub, beta, g);
    });
    const double lost_fixed = nan_lost([&](float2* grid, const float2* cs) {
        spread_fixed_point<W>(grid, cs, first.data(), frac.data(), perm.data(), sub.data(), sub_first.data(), maxsub,
                              beta, g);
    });

    // Interpolation of a random fine grid, thread per sorted point.
    for (auto& f : fine) f = {v(gen), v(gen)};
    std::vector<float2> got(m);
    launch((m + 255) / 256, 256, [&] {
        interpolate<W>(got.data(), fine.data(), first.data(), frac.data(), perm.data(), m, beta, g);
    });
    // And from shared-memory copies of the bins, a block per subproblem.
    std::vector<float2> got_shared(m);
    launch((int)sub.size(), INTERP_THREADS, [&] {
        interpolate_shared<W>(got_shared.data(), fine.data(), first.data(), frac.data(), perm.data(), sub.data(),
                              sub_first.data(), beta, g);
    }, stale_shared);
    auto interpolate_error = [&](const std::vector<float2>& out) {
        double num = 0, den = 0;
        for (int s = 0; s < m; s++) {
            double re = 0, im = 0;
            footprint(s, [&](long long at, double w) {
                re += w * fine[at].x;
                im += w * fine[at].y;
            });
            const float2 o = out[perm[s]];
            num += (o.x - re) * (o.x - re) + (o.y - im) * (o.y - im);
            den += re * re + im * im;
        }
        return std::sqrt(num / den);
    };
    return {spread, spread_fixed, interpolate_error(got), interpolate_error(got_shared), lost, lost_fixed};
}

int main()
{
    // The default bins and tiles on a grid of several bins per axis; small
    // bins on a grid smaller than a bin's copy (its rows wrap more than
    // once) with subproblems of 16, tiles cut short at the grid's end; bins
    // odd along x, one tile; a flat z (2-D: one fine plane); tiles cut
    // short along every axis.
    struct Case {
        int n[3], bins[3], tiles[3], m, maxsub;
    } cases[] = {
        {{48, 32, 24}, {16, 8, 8}, {4, 8, 8}, 2000, 128},
        {{12, 10, 8}, {4, 4, 4}, {2, 2, 2}, 600, 16},
        {{30, 34, 20}, {15, 12, 16}, {256, 256, 256}, 1500, 128},
        {{32, 24, 1}, {16, 8, 8}, {4, 8, 8}, 800, 128},
        {{40, 36, 28}, {4, 4, 4}, {3, 2, 3}, 2000, 32},
    };
    unsigned seed = 1;
    for (const Case& k : cases) {
        const auto [spread, spread_fixed, interpolate, interpolate_shared, lost, lost_fixed] =
            errors(k.n, k.bins, k.tiles, k.m, k.maxsub, seed++);
        printf("spread %dx%dx%d %dx%dx%d %.3e\n", k.bins[0], k.bins[1], k.bins[2], k.n[0], k.n[1], k.n[2], spread);
        printf("spread-fixed-point %dx%dx%d %dx%dx%d %.3e\n", k.bins[0], k.bins[1], k.bins[2], k.n[0], k.n[1], k.n[2],
               spread_fixed);
        printf("interpolate %dx%dx%d %dx%dx%d %.3e\n", k.bins[0], k.bins[1], k.bins[2], k.n[0], k.n[1], k.n[2],
               interpolate);
        printf("interpolate-shared %dx%dx%d %dx%dx%d %.3e\n", k.bins[0], k.bins[1], k.bins[2], k.n[0], k.n[1],
               k.n[2], interpolate_shared);
        printf("nan-kept %dx%dx%d %dx%dx%d %.3e\n", k.bins[0], k.bins[1], k.bins[2], k.n[0], k.n[1], k.n[2], lost);
        printf("nan-kept-fixed-point %dx%dx%d %dx%dx%d %.3e\n", k.bins[0], k.bins[1], k.bins[2], k.n[0], k.n[1],
               k.n[2], lost_fixed);
    }
}
