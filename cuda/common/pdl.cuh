// Programmatic dependent launch (PDL, sm_90): a kernel launched with
// cudaLaunchAttributeProgrammaticStreamSerialization may start before the kernel ahead of it in
// the stream has finished; it must call pdl_wait() before touching anything that kernel reads or
// writes (it returns once that kernel has completed and its writes are visible). The kernel ahead
// may call pdl_trigger() to let the dependent launch begin before its own blocks exit. Both are
// no-ops without PDL and on older architectures.
#pragma once
#include "common/per_arch.cuh"

namespace baracuda {

__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void pdl_trigger() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

}  // namespace baracuda
