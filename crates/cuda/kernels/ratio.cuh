// CG's coefficients from its scalars on the device, for vector.cu's
// updates and lines.cu's x lines that make them on the Toeplitz product's
// first read (NVRTC gets it as a header, kernels.rs).
#pragma once

// A CG coefficient s[num] / s[den] from scalars on the device; 0 unless
// s[num] is finite and above s[floor] and s[den] is finite and positive.
// Mirrors recon_core::Ratio::of. A null s gives 1.
__device__ __forceinline__ double ratio(const double* __restrict__ s, int num, int den, int floor)
{
    if (!s) return 1.0;
    const double a = s[num], b = s[den];
    return (isfinite(a) && a > s[floor] && isfinite(b) && b > 0.0) ? a / b : 0.0;
}

// cg_update's coefficients, c = a ratio(s; step) for x and d = ratio(s;
// beta) for p, shared by vector.cu's pass and lines.cu's first read of p.
struct CgCoefficients {
    float c, d;
};
__device__ __forceinline__ CgCoefficients cg_coefficients(double a, const double* __restrict__ s, int step_num,
                                                          int step_den, int beta_num, int beta_den, int floor)
{
    return {(float)(a * ratio(s, step_num, step_den, floor)), (float)ratio(s, beta_num, beta_den, floor)};
}

// cg_update's arithmetic at one point, shared by vector.cu's pass and
// lines.cu's first read of p, so that both give the same bits: the new x
// = x + c p and the new p = r + d p.
struct CgStepped {
    float2 x, p;
};
__device__ __forceinline__ CgStepped cg_step(float2 x, float2 p, float2 r, float c, float d)
{
    return {make_float2(fmaf(c, p.x, x.x), fmaf(c, p.y, x.y)), make_float2(fmaf(d, p.x, r.x), fmaf(d, p.y, r.y))};
}
