// Ternary functors (where, clamp, lerp, addcmul, addcdiv, fma) and their derivatives.
#pragma once
#include "elementwise/functor_util.cuh"
#include "elementwise/ops.h"

namespace baracuda::elementwise::kern {

using namespace baracuda::kernels;  // the shared vocabulary (cuda/common)

using elementwise::TernaryKind;

template <class T>
struct WhereFn {
  template <int N>
  __device__ __forceinline__ void map(T (&y)[N], const bool (&c)[N], const T (&a)[N], const T (&b)[N]) const {
#pragma unroll
    for (int i = 0; i < N; ++i) y[i] = c[i] ? a[i] : b[i];
  }
};

template <class T>
struct TernaryFn {  // clamp, lerp, addcmul, addcdiv, fma
  TernaryKind kind;
  compute_t<T> value;  // addcmul / addcdiv scale
  template <int N>
  __device__ __forceinline__ void map(T (&y)[N], const T (&x0)[N], const T (&x1)[N], const T (&x2)[N]) const {
    using C = compute_t<T>;
    const C v = C(value);
    switch (kind) {
      case TernaryKind::Clamp:
        if constexpr (std::is_floating_point_v<C>)
          return each<N>(y, [](C x, C lo, C hi) { return x != x ? x : clamp_nan(x, lo, hi); }, x0, x1, x2);
        else
          return each<N>(y, [](C x, C lo, C hi) { return clamp_nan(x, lo, hi); }, x0, x1, x2);
      case TernaryKind::Lerp:
        return each<N>(y, [](C a, C b, C w) {
          return w < C(0.5) ? a + w * (b - a) : b - (b - a) * (C(1) - w);
        }, x0, x1, x2);
      case TernaryKind::Addcmul: return each<N>(y, [=](C x, C t1, C t2) { return x + v * t1 * t2; }, x0, x1, x2);
      case TernaryKind::Addcdiv: return each<N>(y, [=](C x, C t1, C t2) { return x + v * t1 / t2; }, x0, x1, x2);
      default:  // Fma
        if constexpr (std::is_floating_point_v<C>)
          return each<N>(y, [](C a, C b, C c) { return fma(a, b, c); }, x0, x1, x2);
        else
          return each<N>(y, [](C a, C b, C c) { return C(a * b + c); }, x0, x1, x2);
    }
  }
};

// where backward: the grad flows to a where cond holds, to b elsewhere.
template <class T, class Tout>
struct WhereBackwardFn {
  int wrt;  // 1: a, 2: b
  template <int N>
  __device__ __forceinline__ void map(Tout (&y)[N], const T (&g)[N], const bool (&c)[N]) const {
    using C = compute_t<T>;
#pragma unroll
    for (int i = 0; i < N; ++i)
      y[i] = from_compute<Tout>((c[i] == (wrt == 1)) ? to_compute(g[i]) : C(0));
  }
};

template <class T, class Tout>
struct TernaryBackwardFn {
  TernaryKind kind;
  compute_t<T> value;
  int wrt;  // 0, 1, 2
  template <int N>
  __device__ __forceinline__ void map(Tout (&y)[N], const T (&g)[N], const T (&x0)[N], const T (&x1)[N],
                                      const T (&x2)[N]) const {
    using C = compute_t<T>;
    const C v = C(value);
    const int w = wrt;
    switch (kind) {
      case TernaryKind::Clamp:  // as torch: x passes where lo <= x <= hi; lo gets x < lo; hi gets x > hi
        return each<N>(y, [=](C g, C x, C lo, C hi) {
          if (w == 0) return (x >= lo && x <= hi) ? g : C(0);
          if (w == 1) return (x < lo && lo <= hi) ? g : C(0);
          return (x > hi || lo > hi) ? g : C(0);
        }, g, x0, x1, x2);
      case TernaryKind::Lerp:
        return each<N>(y, [=](C g, C a, C b, C t) {
          return w == 0 ? g * (C(1) - t) : (w == 1 ? g * t : g * (b - a));
        }, g, x0, x1, x2);
      case TernaryKind::Addcmul:
        return each<N>(y, [=](C g, C, C t1, C t2) { return w == 0 ? g : (w == 1 ? g * v * t2 : g * v * t1); }, g, x0, x1, x2);
      case TernaryKind::Addcdiv:
        return each<N>(y, [=](C g, C, C t1, C t2) {
          return w == 0 ? g : (w == 1 ? g * v / t2 : -g * v * t1 / (t2 * t2));
        }, g, x0, x1, x2);
      default:  // Fma: a*b + c
        return each<N>(y, [=](C g, C a, C b, C) { return w == 0 ? g * b : (w == 1 ? g * a : g); }, g, x0, x1, x2);
    }
  }
};

}  // namespace baracuda::elementwise::kern
