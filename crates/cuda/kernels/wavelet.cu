// The wavelet prior's primitives (recon_core::Backend's dwt, roll and
// shrink_outside; the CPU's are in recon-core's cpu/wavelet.rs, which this
// file mirrors). Complex vectors are float2 (re, im), images x-fastest.
// Every kernel is a grid-stride loop over voxels.

#define FOR_EACH(i, n) \
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < (n); i += (long long)gridDim.x * blockDim.x)

// Daubechies' orthonormal 4-tap filters, h and its mirror g_j = (-1)^j h_{3-j}
// (recon_core::cpu::wavelet::daubechies2), in double.
#define S3 1.7320508075688772
#define D4 5.656854249492381
__device__ const double DAU_H[4] = {(1.0 + S3) / D4, (3.0 + S3) / D4, (3.0 - S3) / D4, (1.0 - S3) / D4};
__device__ const double DAU_G[4] = {(1.0 - S3) / D4, -(3.0 - S3) / D4, (3.0 + S3) / D4, -(1.0 + S3) / D4};

// One level along `axis` of the corner (ex, ey, ez): forward, lo then hi
// halves; inverse, the synthesis. Outside the corner out = x.
extern "C" __global__ void dwt(float2* out, const float2* __restrict__ x, int nx, int ny, int nz,
                               int ex, int ey, int ez, int axis, int inverse)
{
    const long long plane = (long long)nx * ny, len = plane * nz;
    FOR_EACH(i, len) {
        const int c[3] = {(int)(i % nx), (int)((i / nx) % ny), (int)(i / plane)};
        const int e3[3] = {ex, ey, ez};
        if (c[0] >= ex || c[1] >= ey || c[2] >= ez) {
            out[i] = x[i];
            continue;
        }
        const long long stride = axis == 0 ? 1 : (axis == 1 ? (long long)nx : plane);
        const int p = c[axis], e = e3[axis], half = e / 2;
        const float2* line = x + (i - p * stride);
        double re = 0.0, im = 0.0;
        if (!inverse) {
            const double* f = p < half ? DAU_H : DAU_G;
            const int k = p < half ? p : p - half;
            for (int j = 0; j < 4; ++j) {
                const float2 v = line[(long long)((2 * k + j) % e) * stride];
                re += f[j] * v.x;
                im += f[j] * v.y;
            }
        } else {
            for (int j = p % 2; j < 4; j += 2) {
                const int k = ((p + e - j % e) % e) / 2;
                const float2 lo = line[(long long)k * stride], hi = line[(long long)(half + k) * stride];
                re += DAU_H[j] * lo.x + DAU_G[j] * hi.x;
                im += DAU_H[j] * lo.y + DAU_G[j] * hi.y;
            }
        }
        out[i] = make_float2((float)re, (float)im);
    }
}

// out[(c + shift) mod n] = x[c] (shifts already reduced mod n).
extern "C" __global__ void roll(float2* out, const float2* __restrict__ x, int nx, int ny, int nz,
                                int sx, int sy, int sz)
{
    const long long plane = (long long)nx * ny, len = plane * nz;
    FOR_EACH(i, len) {
        const int cx = (int)(i % nx), cy = (int)((i / nx) % ny), cz = (int)(i / plane);
        const int fx = (cx + nx - sx) % nx, fy = (cy + ny - sy) % ny, fz = (cz + nz - sz) % nz;
        out[i] = x[((long long)fz * ny + fy) * nx + fx];
    }
}

// v = max(0, 1 - t/|v|) v outside the corner (kx, ky, kz) of each image of
// the `total` values.
extern "C" __global__ void shrink_outside(float2* x, long long total, int nx, int ny, int nz, int kx, int ky, int kz,
                                          double t)
{
    const long long plane = (long long)nx * ny, len = plane * nz;
    FOR_EACH(g, total) {
        const long long i = g % len;
        const int cx = (int)(i % nx), cy = (int)((i / nx) % ny), cz = (int)(i / plane);
        if (cx < kx && cy < ky && cz < kz) continue;
        const float2 v = x[g];
        const double norm = sqrt((double)v.x * v.x + (double)v.y * v.y);
        const float f = norm > t ? (float)(1.0 - t / norm) : 0.f;
        x[g] = make_float2(f * v.x, f * v.y);
    }
}
