// Device helpers of the loss family: exp / log in the compute type, online (max, sum) pairs,
// fixed-order warp and block reductions, 16-byte packs. Kept in the family (not borrowed from
// cuda/softmax) so the two families change independently.
#pragma once
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "common/block_reduce.cuh"
#include "common/dtype_traits.cuh"
#include "common/fast_exp.cuh"
#include "common/packed_vec.cuh"

namespace baracuda::loss::detail {
using namespace baracuda::kernels;

template <class T> using acc_of = std::conditional_t<std::is_same_v<T, double>, double, float>;

template <class C> __device__ __forceinline__ C ninf() { return -std::numeric_limits<C>::infinity(); }
template <class C> __device__ __forceinline__ C qnan() { return std::numeric_limits<C>::quiet_NaN(); }
// max that ignores a NaN operand (the NaN reaches the result through the sum of exps instead).
template <class C> __device__ __forceinline__ C cmax(C a, C b) {
  if constexpr (std::is_same_v<C, double>) return fmax(a, b);
  else return fmaxf(a, b);
}
// exp in the compute type: hardware exp for half storage (its error is far below a half ulp;
// results under 2^-126 are 0: common/fast_exp.cuh), libm's for f32 and f64.
template <class T, class C> __device__ __forceinline__ C xexp(C v) {
  if constexpr (std::is_same_v<C, double>) return exp(v);
  else if constexpr (is_half_v<T>) return exp_ftz(v);
  else return expf(v);
}
template <class C> __device__ __forceinline__ C xlog(C v) {
  if constexpr (std::is_same_v<C, double>) return log(v);
  else return logf(v);
}
// exp(v - m) where ml2 = m * log2(e) was computed once: one FFMA and one MUFU for half storage.
template <class T, class C> __device__ __forceinline__ C exp_shift(C v, C m, C ml2) {
  if constexpr (is_half_v<T>) return ex2_ftz(fmaf(v, kLog2e, -ml2));
  else return xexp<T>(v - m);
}

// Online (max, sum) pairs: s is the sum of exp(x - m). Pairs at equal maxima add (so -inf, 0
// pairs do not make inf - inf); NaN in a sum propagates.
template <class T, class C> __device__ __forceinline__ void combine(C& m, C& s, C m2, C s2) {
  const C mm = cmax(m, m2);
  const C a = m == mm ? C(1) : xexp<T>(m - mm);
  const C b = m2 == mm ? C(1) : xexp<T>(m2 - mm);
  s = s * a + s2 * b;
  m = mm;
}
// A maximum of +inf makes the row NaN (torch: inf - inf).
template <class C> __device__ __forceinline__ void poison_inf(C m, C& s) {
  if (m == std::numeric_limits<C>::infinity()) s = qnan<C>();
}

template <class T, class C> __device__ __forceinline__ void warp_combine(C& m, C& s) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const C m2 = __shfl_xor_sync(0xffffffffu, m, o);
    const C s2 = __shfl_xor_sync(0xffffffffu, s, o);
    combine<T>(m, s, m2, s2);
  }
}
template <class T, class C> __device__ __forceinline__ void block_combine(C& m, C& s, C* shm, C* shs) {
  warp_combine<T>(m, s);
  const int w = threadIdx.x >> 5, l = threadIdx.x & 31, nw = blockDim.x >> 5;
  __syncthreads();
  if (l == 0) {
    shm[w] = m;
    shs[w] = s;
  }
  __syncthreads();
  m = l < nw ? shm[l] : ninf<C>();
  s = l < nw ? shs[l] : C(0);
  warp_combine<T>(m, s);
}


}  // namespace baracuda::loss::detail
