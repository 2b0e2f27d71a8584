// Math in a compute type A (float or double) under one name: libm's float or double function by the
// type, so that a kernel templated on its accumulator (the losses, f64 paths) writes cmath::exp(v)
// once. Half storage computes in float; a 16-bit fast path, where one pays, is the caller's
// (online_softmax.cuh's xexp).
#pragma once
#include <cuda_runtime.h>

#include <type_traits>

namespace baracuda::kernels::cmath {

template <class A> __device__ __forceinline__ A abs(A v) {
  if constexpr (std::is_same_v<A, double>) return ::fabs(v);
  else return ::fabsf(v);
}
template <class A> __device__ __forceinline__ A exp(A v) {
  if constexpr (std::is_same_v<A, double>) return ::exp(v);
  else return ::expf(v);
}
template <class A> __device__ __forceinline__ A log1p(A v) {
  if constexpr (std::is_same_v<A, double>) return ::log1p(v);
  else return ::log1pf(v);
}
template <class A> __device__ __forceinline__ A sqrt(A v) {
  if constexpr (std::is_same_v<A, double>) return ::sqrt(v);
  else return ::sqrtf(v);
}
template <class A> __device__ __forceinline__ A pow(A v, A e) {
  if constexpr (std::is_same_v<A, double>) return ::pow(v, e);
  else return ::powf(v, e);
}
template <class A> __device__ __forceinline__ A tanh(A v) {
  if constexpr (std::is_same_v<A, double>) return ::tanh(v);
  else return ::tanhf(v);
}
// max(v, 0) that keeps NaN (torch's clamp_min).
template <class A> __device__ __forceinline__ A relu_nan(A v) { return v > A(0) ? v : (v != v ? v : A(0)); }
// -1, 0 or 1 by the sign; NaN stays NaN.
template <class A> __device__ __forceinline__ A sgn(A v) {
  return v > A(0) ? A(1) : (v < A(0) ? A(-1) : (v != v ? v : A(0)));
}
// softplus(v) = log(1 + exp(v)), stably.
template <class A> __device__ __forceinline__ A softplus(A v) { return log1p(exp(-abs(v))) + relu_nan(v); }

}  // namespace baracuda::kernels::cmath
