// The online-softmax vocabulary shared by softmax and the losses: exp / log / max in the compute
// type, and (max, sum-of-exp) pairs combined in a fixed order across lanes and blocks.
#pragma once
#include <cuda_runtime.h>

#include <cmath>
#include <limits>
#include <type_traits>

#include "common/dtype_traits.cuh"
#include "common/fast_exp.cuh"

namespace baracuda::kernels {

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

// Online (max, sum) pairs: s is the sum of exp(x - m). Pairs at equal maxima add (so -inf, 0
// pairs do not make inf - inf); NaN in a sum propagates.
template <class T, class C> __device__ __forceinline__ void combine(C& m, C& s, C m2, C s2) {
  const C mm = cmax(m, m2);
  const C a = m == mm ? C(1) : xexp<T>(m - mm);
  const C b = m2 == mm ? C(1) : xexp<T>(m2 - mm);
  s = s * a + s2 * b;
  m = mm;
}
template <class T, class C> __device__ __forceinline__ void online_add(C& m, C& s, C x) {
  if (x > m) {
    s = s * xexp<T>(m - x) + C(1);
    m = x;
  } else {
    s += (x == m && m == ninf<C>()) ? C(1) : xexp<T>(x - m);  // NaN x: exp(NaN) poisons s
  }
}
// A maximum of +inf makes the row NaN (torch: inf - inf in the sum).
template <class C> __device__ __forceinline__ void poison_inf(C m, C& s) {
  if (m == std::numeric_limits<C>::infinity()) s = qnan<C>();
}

// Across aligned groups of G lanes (a power of two, at most 32) of a full warp.
template <int G, class C> __device__ __forceinline__ C group_max(C v) {
#pragma unroll
  for (int o = G / 2; o > 0; o >>= 1) v = cmax(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
template <int G, class T, class C> __device__ __forceinline__ void group_combine(C& m, C& s) {
#pragma unroll
  for (int o = G / 2; o > 0; o >>= 1) {
    const C m2 = __shfl_xor_sync(0xffffffffu, m, o);
    const C s2 = __shfl_xor_sync(0xffffffffu, s, o);
    combine<T>(m, s, m2, s2);
  }
}
template <class T, class C> __device__ __forceinline__ void warp_combine(C& m, C& s) { group_combine<32, T>(m, s); }

// Block-wide through 32 shared slots; every thread gets the result; blockDim.x a multiple of 32.
template <class C> __device__ __forceinline__ C block_max(C v, C* sh) {
  v = group_max<32>(v);
  const int w = threadIdx.x >> 5, l = threadIdx.x & 31, nw = blockDim.x >> 5;
  __syncthreads();
  if (l == 0) sh[w] = v;
  __syncthreads();
  v = l < nw ? sh[l] : ninf<C>();
  return group_max<32>(v);
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

}  // namespace baracuda::kernels
