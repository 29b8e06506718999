// vector.cu's add_faces_dot_partial run on the CPU (gpu.h) for grids with
// axes of 1, 2 and more voxels, against the uniform stencil's faces and
// the dot summed voxel by voxel in double: prints, per grid, the relative
// errors of out and of the sum of the partial sums, for vector.rs's test
// to check. Built as
//     c++ -std=c++20 -pthread -DVECTOR_CU='"vector.cu"' faces.cpp
#include "gpu.h"
// vector.cu's reductions keep their block's sums in a __shared__ array:
// one array for the block's threads (blocks run one at a time).
#undef __shared__
#define __shared__ static
#include VECTOR_CU

#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

int main()
{
    const int shapes[][3] = {{5, 4, 3}, {1, 3, 4}, {4, 1, 3}, {3, 4, 1}, {2, 2, 2}, {1, 1, 1}, {7, 6, 9}};
    std::mt19937 gen(2);
    std::uniform_real_distribution<float> u(-0.5f, 0.5f);
    for (const auto& n : shapes) {
        const int nx = n[0], ny = n[1], nz = n[2], len = nx * ny * nz;
        std::vector<float2> x(len), out(len);
        for (auto& v : x) v = {u(gen), u(gen)};
        for (auto& v : out) v = {u(gen), u(gen)};
        const auto before = out;
        const float a = 0.7f;
        const int blocks = 3;
        std::vector<double> partial(blocks, 0.0);
        launch(blocks, REDUCE_THREADS, [&] { add_faces_dot_partial(partial.data(), out.data(), a, x.data(), nx, ny, nz); });
        // out - a b x, b = the voxel's faces; Re <x, out> after
        double err = 0, norm = 0, dot = 0;
        for (int z = 0; z < nz; z++)
            for (int y = 0; y < ny; y++)
                for (int X = 0; X < nx; X++) {
                    const int i = (z * ny + y) * nx + X;
                    const int b = (X == 0) + (X == nx - 1) + (y == 0) + (y == ny - 1) + (z == 0) + (z == nz - 1);
                    const double wr = before[i].x - double(a) * b * x[i].x, wi = before[i].y - double(a) * b * x[i].y;
                    err += (out[i].x - wr) * (out[i].x - wr) + (out[i].y - wi) * (out[i].y - wi);
                    norm += wr * wr + wi * wi;
                    dot += double(x[i].x) * wr + double(x[i].y) * wi;
                }
        double sum = 0;
        for (double v : partial) sum += v;
        std::printf("faces %dx%dx%d, out %.3e\n", nx, ny, nz, std::sqrt(err / norm));
        std::printf("faces %dx%dx%d, dot %.3e\n", nx, ny, nz, std::abs(sum - dot) / std::abs(dot));
    }
}
