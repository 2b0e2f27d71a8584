// 16-byte (and 4- / 8-byte) global -> shared copies through cp.async (sm_80+; a plain copy before), one PTX
// instruction each, so that a caller's base pointer plus a constant offset stays one register
// and an immediate (the __pipeline_memcpy_async intrinsics let NVVM fold the offset into a
// 64-bit multiply per copy, and branch around each conditional copy).
#pragma once
#include <cuda_runtime.h>

#include <type_traits>

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

// The copy when `pred`, else 16 zero bytes (nothing is read; `gmem` must still be a valid address).
__device__ __forceinline__ void cp_async16_zfill(void* smem, const void* gmem, bool pred) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem), "r"(pred ? 16 : 0)
               : "memory");
#else
  *static_cast<uint4*>(smem) = pred ? *static_cast<const uint4*>(gmem) : make_uint4(0, 0, 0, 0);
#endif
}
// A 4- or 8-byte copy when `pred`, else N zero bytes (cp.async.ca: copies under 16 bytes go
// through L1).
template <int N> __device__ __forceinline__ void cp_async_small_zfill(void* smem, const void* gmem, bool pred) {
  static_assert(N == 4 || N == 8, "cp.async.ca copies 4, 8 or 16 bytes");
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n" ::"r"(s), "l"(gmem), "n"(N), "r"(pred ? N : 0)
               : "memory");
#else
  using Word = std::conditional_t<N == 4, unsigned, unsigned long long>;
  *static_cast<Word*>(smem) = pred ? *static_cast<const Word*>(gmem) : Word(0);
#endif
}
__device__ __forceinline__ void cp_async4_zfill(void* smem, const void* gmem, bool pred) {
  cp_async_small_zfill<4>(smem, gmem, pred);
}
__device__ __forceinline__ void cp_async8_zfill(void* smem, const void* gmem, bool pred) {
  cp_async_small_zfill<8>(smem, gmem, pred);
}
// Closes the group of copies issued since the last commit.
__device__ __forceinline__ void cp_async_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}
// Waits until at most N committed groups are still in flight (this thread's copies only).
template <int N> __device__ __forceinline__ void cp_async_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
#endif
}

}  // namespace baracuda::kernels
