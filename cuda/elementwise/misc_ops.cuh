// Cast and gated-activation functors.
#pragma once
#include "elementwise/functor_util.cuh"
#include "elementwise/ops.h"

namespace baracuda::elementwise::kern {

using namespace baracuda::kernels;  // the shared vocabulary (cuda/common)

using elementwise::GatedKind;

// One conversion, one rounding. fp8 targets saturate to the largest finite value unless
// `saturate` is false (then overflow gives NaN for e4m3 / inf for e5m2, as torch does).
template <class Tin, class Tout>
__device__ __forceinline__ Tout convert(Tin x, bool saturate) {
  if constexpr (std::is_same_v<Tout, bool>) {
    return to_compute(x) != compute_t<Tin>(0);
  } else if constexpr (is_fp8_v<Tout>) {
    fp8_needs_per_arch_ptx<Tout>();
    constexpr __nv_fp8_interpretation_t kInterp = std::is_same_v<Tout, e4m3> ? __NV_E4M3 : __NV_E5M2;
    const __nv_saturation_t sat = saturate ? __NV_SATFINITE : __NV_NOSAT;
    __nv_fp8_storage_t s;
    if constexpr (std::is_same_v<Tin, double>) s = __nv_cvt_double_to_fp8(x, sat, kInterp);
    else s = __nv_cvt_float_to_fp8(static_cast<float>(to_compute(x)), sat, kInterp);
    Tout r;
    r.__x = s;
    return r;
  } else if constexpr (std::is_same_v<Tin, double> && std::is_same_v<Tout, f16>) {
    return __double2half(x);
  } else if constexpr (std::is_same_v<Tin, double> && std::is_same_v<Tout, bf16>) {
    return __double2bfloat16(x);
  } else if constexpr (is_int_v<Tin> && (is_half_v<Tout>)) {
    return from_compute<Tout>(static_cast<float>(x));
  } else {
    return from_compute<Tout>(to_compute(x));
  }
}

template <class Tin, class Tout>
struct CastFn {
  bool saturate;
  template <int N> __device__ __forceinline__ void map(Tout (&y)[N], const Tin (&x)[N]) const {
    if constexpr (is_fp8_v<Tout> && std::is_same_v<Tin, float> && N % 2 == 0) {
      // Pairs: one hardware conversion for two values.
      constexpr __nv_fp8_interpretation_t kInterp = std::is_same_v<Tout, e4m3> ? __NV_E4M3 : __NV_E5M2;
      const __nv_saturation_t sat = saturate ? __NV_SATFINITE : __NV_NOSAT;
#pragma unroll
      for (int i = 0; i < N; i += 2) {
        const __nv_fp8x2_storage_t pair = __nv_cvt_float2_to_fp8x2(make_float2(x[i], x[i + 1]), sat, kInterp);
        y[i].__x = __nv_fp8_storage_t(pair & 0xff);
        y[i + 1].__x = __nv_fp8_storage_t(pair >> 8);
      }
    } else {
#pragma unroll
      for (int i = 0; i < N; ++i) y[i] = convert<Tin, Tout>(x[i], saturate);
    }
  }
};

template <class C> __device__ __forceinline__ C gate_act(GatedKind k, C v) {
  switch (k) {
    case GatedKind::Swiglu: return v / (C(1) + exp(-v));
    case GatedKind::Geglu: return gelu_of(v);
    case GatedKind::GegluTanh: return gelu_tanh_of(v);
    default: return v <= C(0) ? C(0) : v;  // Reglu
  }
}
template <class C> __device__ __forceinline__ C gate_act_grad(GatedKind k, C v) {
  switch (k) {
    case GatedKind::Swiglu: return silu_grad(v);
    case GatedKind::Geglu: return gelu_grad(v);
    case GatedKind::GegluTanh: return gelu_tanh_grad(v);
    default: return v > C(0) ? C(1) : C(0);  // Reglu
  }
}

// y = act(a) * b for swiglu / geglu / reglu; glu (torch's) is y = a * sigmoid(b).
template <class T>
struct GatedFn {
  GatedKind kind;
  template <int N> __device__ __forceinline__ void map(T (&y)[N], const T (&a)[N], const T (&b)[N]) const {
    using C = compute_t<T>;
    const GatedKind k = kind;
    if (k == GatedKind::Glu) return each<N>(y, [](C a, C b) { return a * sigmoid_of(b); }, a, b);
    return each<N>(y, [=](C a, C b) { return gate_act(k, a) * b; }, a, b);
  }
};

template <class T>
struct GatedBackwardFn {  // wrt 0: the grad of the first half, 1: of the second half
  GatedKind kind;
  int wrt;
  template <int N>
  __device__ __forceinline__ void map(T (&y)[N], const T (&g)[N], const T (&a)[N], const T (&b)[N]) const {
    using C = compute_t<T>;
    const GatedKind k = kind;
    const bool first = wrt == 0;
    if (k == GatedKind::Glu)
      return each<N>(y, [=](C g, C a, C b) {
        C s = sigmoid_of(b);
        return first ? g * s : g * a * s * (C(1) - s);
      }, g, a, b);
    return each<N>(y, [=](C g, C a, C b) { return first ? g * b * gate_act_grad(k, a) : g * gate_act(k, a); }, g, a, b);
  }
};

}  // namespace baracuda::elementwise::kern
