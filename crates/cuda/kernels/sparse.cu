// The sparse priors' primitives (recon_core::Backend's grad, grad_adjoint,
// group_prox and project_off; the CPU's are in recon-core's cpu/sparse.rs).
// Complex vectors are float2 (re, im). A field of g components holds them
// one whole image after another: component a of voxel i at a * len + i.
// Every kernel is a grid-stride loop over voxels (or groups).

#define FOR_EACH(i, n) \
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < (n); i += (long long)gridDim.x * blockDim.x)

__device__ float2 sub2(float2 a, float2 b) { return make_float2(a.x - b.x, a.y - b.y); }

// out[a][i] = x[i + e_a] - x[i], 0 on the last plane along a.
extern "C" __global__ void grad3(float2* out, const float2* __restrict__ x, int nx, int ny, int nz)
{
    const long long plane = (long long)nx * ny, len = plane * nz;
    FOR_EACH(i, len) {
        const int cx = (int)(i % nx), cy = (int)((i / nx) % ny), cz = (int)(i / plane);
        const float2 v = x[i], zero = make_float2(0.f, 0.f);
        out[i] = cx + 1 < nx ? sub2(x[i + 1], v) : zero;
        out[len + i] = cy + 1 < ny ? sub2(x[i + nx], v) : zero;
        out[2 * len + i] = cz + 1 < nz ? sub2(x[i + plane], v) : zero;
    }
}

// out[i] = sum_a y[a][i - e_a] - y[a][i], each term where its difference exists.
extern "C" __global__ void grad3_adjoint(float2* out, const float2* __restrict__ y, int nx, int ny, int nz)
{
    const long long plane = (long long)nx * ny, len = plane * nz;
    FOR_EACH(i, len) {
        const int c[3] = {(int)(i % nx), (int)((i / nx) % ny), (int)(i / plane)};
        const int n[3] = {nx, ny, nz};
        const long long stride[3] = {1, nx, plane};
        float2 acc = make_float2(0.f, 0.f);
        for (int a = 0; a < 3; ++a) {
            const float2* ya = y + a * len;
            if (c[a] > 0) {
                const float2 w = ya[i - stride[a]];
                acc.x += w.x;
                acc.y += w.y;
            }
            if (c[a] + 1 < n[a]) acc = sub2(acc, ya[i]);
        }
        out[i] = acc;
    }
}

// Per group v of `components` values (groups of them): shrink (project = 0),
// v = max(0, 1 - t/|v|) v; project (project = 1), v = min(1, t/|v|) v.
// Mirrors recon_core::cpu::sparse::group_factor.
extern "C" __global__ void group_prox(float2* x, double t, int components, int project, long long groups)
{
    FOR_EACH(i, groups) {
        double norm2 = 0.0;
        for (int a = 0; a < components; ++a) {
            const float2 v = x[a * groups + i];
            norm2 += (double)v.x * v.x + (double)v.y * v.y;
        }
        const double norm = sqrt(norm2);
        double f;
        if (project) f = norm > t ? t / norm : 1.0;
        else f = norm > t ? 1.0 - t / norm : 0.0;
        const float ff = (float)f;
        for (int a = 0; a < components; ++a) {
            const float2 v = x[a * groups + i];
            x[a * groups + i] = make_float2(ff * v.x, ff * v.y);
        }
    }
}

// Per voxel, v = v - xi (xi . v), xi real (its imaginary parts unused).
extern "C" __global__ void project_off(float2* v, const float2* __restrict__ xi, long long len)
{
    FOR_EACH(i, len) {
        const float e[3] = {xi[i].x, xi[len + i].x, xi[2 * len + i].x};
        float2 w[3] = {v[i], v[len + i], v[2 * len + i]};
        float2 p = make_float2(0.f, 0.f);
        for (int a = 0; a < 3; ++a) {
            p.x += e[a] * w[a].x;
            p.y += e[a] * w[a].y;
        }
        for (int a = 0; a < 3; ++a) v[a * len + i] = make_float2(w[a].x - p.x * e[a], w[a].y - p.y * e[a]);
    }
}
