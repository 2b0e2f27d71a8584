// Helpers shared by the elementwise functors: apply a scalar lambda over N lanes in the
// compute type, and the math constants the activations use.
#pragma once
#include <cuda/std/limits>
#include <type_traits>
#include <utility>

#include "common/dtype_traits.cuh"

namespace baracuda::elementwise::kern {

using namespace baracuda::kernels;  // the shared vocabulary (cuda/common)

// y[i] = round(f(x0[i], x1[i], ...)) with every operand widened to its compute type.
template <int N, class Tout, class F, class... Tin>
__device__ __forceinline__ void each(Tout (&y)[N], F f, const Tin (&... x)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) y[i] = from_compute<Tout>(f(to_compute(x[i])...));
}

// Call f(std::integral_constant<int, kind>) if `kind` is in the constexpr array Arr; false if not.
template <const auto& Arr, class F, size_t... I>
bool dispatch_hot_impl(int kind, F&& f, std::index_sequence<I...>) {
  return ((kind == int(Arr[I]) ? (f(std::integral_constant<int, int(Arr[I])>{}), true) : false) || ...);
}
template <const auto& Arr, class F> bool dispatch_hot(int kind, F&& f) {
  return dispatch_hot_impl<Arr>(kind, f, std::make_index_sequence<sizeof(Arr) / sizeof(Arr[0])>{});
}

template <class C> __device__ __forceinline__ C nan_of() { return cuda::std::numeric_limits<C>::quiet_NaN(); }
template <class C> __device__ __forceinline__ bool is_nan(C v) {
  if constexpr (std::is_floating_point_v<C>) return v != v; else return false;
}

template <class C> struct Consts {
  static constexpr C kSqrt1_2 = C(0.70710678118654752440);       // 1/sqrt(2)
  static constexpr C kSqrt2OverPi = C(0.79788456080286535588);   // sqrt(2/pi)
  static constexpr C kInvSqrt2Pi = C(0.39894228040143267794);    // 1/sqrt(2*pi)
  static constexpr C k2OverSqrtPi = C(1.12837916709551257390);   // 2/sqrt(pi)
  static constexpr C kSqrtPiOver2 = C(0.88622692545275801365);   // sqrt(pi)/2
  static constexpr C kLn2 = C(0.69314718055994530942);
  static constexpr C kLn10 = C(2.30258509299404568402);
  static constexpr C kGeluTanhCoef = C(0.044715);
  static constexpr C kSeluAlpha = C(1.6732632423543772848170429916717);
  static constexpr C kSeluScale = C(1.0507009873554804934193349852946);
};

template <class C> __device__ __forceinline__ C sigmoid_of(C v) { return C(1) / (C(1) + exp(-v)); }
template <class C> __device__ __forceinline__ C gelu_of(C v) {
  return C(0.5) * v * (C(1) + erf(v * Consts<C>::kSqrt1_2));
}
template <class C> __device__ __forceinline__ C gelu_tanh_of(C v) {
  C inner = Consts<C>::kSqrt2OverPi * (v + Consts<C>::kGeluTanhCoef * v * v * v);
  return C(0.5) * v * (C(1) + tanh(inner));
}
template <class C> __device__ __forceinline__ C gelu_grad(C v) {  // d/dv gelu(v)
  C cdf = C(0.5) * (C(1) + erf(v * Consts<C>::kSqrt1_2));
  C pdf = Consts<C>::kInvSqrt2Pi * exp(C(-0.5) * v * v);
  return cdf + v * pdf;
}
template <class C> __device__ __forceinline__ C gelu_tanh_grad(C v) {
  const C k = Consts<C>::kSqrt2OverPi, c = Consts<C>::kGeluTanhCoef;
  C inner = k * (v + c * v * v * v);
  // 1 + tanh and 1 - tanh^2 from e = exp(-2|inner|): computed from a rounded tanh they cancel
  // near |tanh| = 1 (|v| around 4-5 in f32), where the true values are small but not negligible.
  C e = exp(C(-2) * fabs(inner));
  C r = C(1) / (C(1) + e);
  C one_plus_t = inner >= C(0) ? C(1) + (C(1) - e) * r : C(2) * e * r;
  C sech2 = C(4) * e * r * r;
  return C(0.5) * one_plus_t + C(0.5) * v * sech2 * k * (C(1) + C(3) * c * v * v);
}
template <class C> __device__ __forceinline__ C silu_grad(C v) {
  C s = sigmoid_of(v);
  return s * (C(1) + v * (C(1) - s));
}
// NaN-propagating clamp into [lo, hi]; lo > hi gives hi, as torch.clamp does.
template <class C> __device__ __forceinline__ C clamp_nan(C v, C lo, C hi) {
  C r = v < lo ? lo : v;
  return r > hi ? hi : r;
}

}  // namespace baracuda::elementwise::kern
