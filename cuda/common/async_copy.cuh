// 16-byte global -> shared copies through cp.async (sm_80+; a plain copy before), one PTX
// instruction each, so that a caller's base pointer plus a constant offset stays one register
// and an immediate (the __pipeline_memcpy_async intrinsics let NVVM fold the offset into a
// 64-bit multiply per copy, and branch around each conditional copy).
#pragma once
#include <cuda_runtime.h>

namespace baracuda::kernels {

__device__ __forceinline__ void cp_async16(void* smem, const void* gmem) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(gmem) : "memory");
#else
  *static_cast<uint4*>(smem) = *static_cast<const uint4*>(gmem);
#endif
}
// The copy when `pred` (a predicated instruction, no branch); nothing is read otherwise.
__device__ __forceinline__ void cp_async16_if(void* smem, const void* gmem, bool pred) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile(
      "{\n .reg .pred p;\n setp.ne.b32 p, %2, 0;\n @p cp.async.cg.shared.global [%0], [%1], 16;\n}\n" ::"r"(s),
      "l"(gmem), "r"(int(pred))
      : "memory");
#else
  if (pred) *static_cast<uint4*>(smem) = *static_cast<const uint4*>(gmem);
#endif
}

}  // namespace baracuda::kernels
