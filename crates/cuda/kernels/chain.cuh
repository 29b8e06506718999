// Kernels chained by programmatic dependent launch (launch.rs): a kernel
// launched so is set up while the kernel before it in the stream still
// runs, and starts as that one's last block exits, instead of after the
// driver has seen it finish. prior_grids(), such a kernel's first
// statement, waits until the kernel before has finished and its writes
// are visible; the kernel then runs as if launched after it. Launched
// plainly, or before sm_90, it is nothing.
#pragma once

__device__ __forceinline__ void prior_grids()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
