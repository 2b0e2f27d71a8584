// Warp-level tensor-core vocabulary (sm_80+): mma.sync m16n8k16 with f32 accumulators, ldmatrix,
// and packing two floats into one 16-bit pair register.
//
// Fragment layouts (lane = 4 * g + t): A (16 x 16, row-major) a0 = row g, cols 2t..2t+1; a1 = row
// g + 8; a2 = row g, cols 2t + 8..; a3 = row g + 8, cols 2t + 8... B (16 x 8, k-major) b0 = k rows
// 2t..2t+1 of col g; b1 = k rows 2t + 8... C (16 x 8) c0, c1 = row g, cols 2t..2t+1; c2, c3 = row
// g + 8. So the C fragments of two adjacent n-tiles are the A fragment of one 16-wide k-step.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

#include "common/dtype_traits.cuh"

namespace baracuda::kernels {

// c += A * B, m16n8k16, 16-bit inputs (T = bf16 or f16), f32 accumulate.
template <class T>
__device__ __forceinline__ void mma16816(float (&c)[4], unsigned a0, unsigned a1, unsigned a2, unsigned a3,
                                         unsigned b0, unsigned b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if constexpr (std::is_same_v<T, bf16>) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, "
        "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  } else {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, "
        "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  }
#else
  (void)c; (void)a0; (void)a1; (void)a2; (void)a3; (void)b0; (void)b1;
  __trap();  // the build targets sm_80+; plans never route older devices here
#endif
}
template <class T>
__device__ __forceinline__ void mma16816(float (&c)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
  mma16816<T>(c, a[0], a[1], a[2], a[3], b0, b1);
}

// Four 8 x 8 16-bit matrices from shared memory; lane l gives the address of row l % 8 of matrix
// l / 8. .trans delivers each matrix transposed (k-major B operands from row-major tiles).
__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4], const void* smem) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(s));
#else
  (void)r; (void)smem;
  __trap();
#endif
}
__device__ __forceinline__ void ldmatrix_x4_trans(unsigned (&r)[4], const void* smem) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(s));
#else
  (void)r; (void)smem;
  __trap();
#endif
}

// Two floats rounded to one register of two 16-bit values, `lo` in the low half (the lower column).
template <class T> __device__ __forceinline__ unsigned pack2(float lo, float hi) {
  if constexpr (std::is_same_v<T, bf16>) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const unsigned*>(&v);
  } else {
    const __half2 v = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<const unsigned*>(&v);
  }
}

}  // namespace baracuda::kernels
