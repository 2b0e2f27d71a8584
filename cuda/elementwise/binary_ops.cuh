// Binary functors (float and integer kinds), comparisons, and binary derivatives.
#pragma once
#include "elementwise/functor_util.cuh"
#include "elementwise/ops.h"

namespace baracuda::elementwise::kern {

using namespace baracuda::kernels;  // the shared vocabulary (cuda/common)

using elementwise::BinaryKind;
using elementwise::CompareKind;

// Python-style floor division and remainder for floats, as torch defines them.
template <class C> __device__ __forceinline__ C floor_div_f(C a, C b) {
  if (b == C(0)) return a / b;
  C mod = fmod(a, b);
  C div = (a - mod) / b;
  if (mod != C(0) && ((b < C(0)) != (mod < C(0)))) div -= C(1);
  if (div == C(0)) return copysign(C(0), a / b);
  C fl = floor(div);
  if (div - fl > C(0.5)) fl += C(1);
  return fl;
}
template <class C> __device__ __forceinline__ C remainder_f(C a, C b) {
  C mod = fmod(a, b);
  if (mod != C(0) && ((b < C(0)) != (mod < C(0)))) mod += b;
  return mod;
}
template <class C> __device__ __forceinline__ C max_nan(C a, C b) {
  return (a != a || b != b) ? nan_of<C>() : (a > b ? a : b);
}
template <class C> __device__ __forceinline__ C min_nan(C a, C b) {
  return (a != a || b != b) ? nan_of<C>() : (a < b ? a : b);
}
template <class C> __device__ __forceinline__ C logaddexp_f(C a, C b) {
  if (isinf(a) && a == b) return a;
  C m = a > b ? a : b;
  return m + log1p(exp(-fabs(a - b)));
}

template <class T, int Fixed = -1>  // Fixed: see UnaryFloatFn
struct BinaryFloatFn {
  BinaryKind kind;
  compute_t<T> alpha;  // add / sub: y = a +- alpha * b
  template <int N>
  __device__ __forceinline__ void map(T (&y)[N], const T (&x0)[N], const T (&x1)[N]) const {
    using C = compute_t<T>;
    const C al = C(alpha);
    switch (Fixed >= 0 ? BinaryKind(Fixed) : kind) {
      case BinaryKind::Add: return each<N>(y, [=](C a, C b) { return a + al * b; }, x0, x1);
      case BinaryKind::Sub: return each<N>(y, [=](C a, C b) { return a - al * b; }, x0, x1);
      case BinaryKind::Mul: return each<N>(y, [](C a, C b) { return a * b; }, x0, x1);
      case BinaryKind::Div: return each<N>(y, [](C a, C b) { return a / b; }, x0, x1);
      case BinaryKind::FloorDivide: return each<N>(y, [](C a, C b) { return floor_div_f(a, b); }, x0, x1);
      case BinaryKind::Remainder: return each<N>(y, [](C a, C b) { return remainder_f(a, b); }, x0, x1);
      case BinaryKind::Fmod: return each<N>(y, [](C a, C b) { return fmod(a, b); }, x0, x1);
      case BinaryKind::Pow: return each<N>(y, [](C a, C b) { return pow(a, b); }, x0, x1);
      case BinaryKind::Maximum: return each<N>(y, [](C a, C b) { return max_nan(a, b); }, x0, x1);
      case BinaryKind::Minimum: return each<N>(y, [](C a, C b) { return min_nan(a, b); }, x0, x1);
      case BinaryKind::Fmax: return each<N>(y, [](C a, C b) { return fmax(a, b); }, x0, x1);
      case BinaryKind::Fmin: return each<N>(y, [](C a, C b) { return fmin(a, b); }, x0, x1);
      case BinaryKind::Atan2: return each<N>(y, [](C a, C b) { return atan2(a, b); }, x0, x1);
      case BinaryKind::Hypot: return each<N>(y, [](C a, C b) { return hypot(a, b); }, x0, x1);
      case BinaryKind::Copysign: return each<N>(y, [](C a, C b) { return copysign(a, b); }, x0, x1);
      case BinaryKind::LogAddExp: return each<N>(y, [](C a, C b) { return logaddexp_f(a, b); }, x0, x1);
      // The gated MLP from its two projections: act(gate) * up in one pass.
      case BinaryKind::SiluMul:
        if constexpr (is_half_v<T>) return each<N>(y, [](C a, C b) { return a * __frcp_rn(C(1) + __expf(-a)) * b; }, x0, x1);
        else return each<N>(y, [](C a, C b) { return a / (C(1) + exp(-a)) * b; }, x0, x1);
      case BinaryKind::GeluMul: return each<N>(y, [](C a, C b) { return gelu_of(a) * b; }, x0, x1);
      case BinaryKind::GeluTanhMul: return each<N>(y, [](C a, C b) { return gelu_tanh_of(a) * b; }, x0, x1);
      default: return each<N>(y, [](C, C) { return nan_of<C>(); }, x0, x1);
    }
  }
};

template <class T>
struct BinaryIntFn {  // integer and bool kinds
  BinaryKind kind;
  double alpha;  // exact for integers up to 2^53
  template <int N>
  __device__ __forceinline__ void map(T (&y)[N], const T (&x0)[N], const T (&x1)[N]) const {
    if constexpr (std::is_same_v<T, bool>) {
      switch (kind) {
        case BinaryKind::BitwiseAnd: case BinaryKind::Minimum: case BinaryKind::Mul:
          return each<N>(y, [](bool a, bool b) { return a && b; }, x0, x1);
        case BinaryKind::BitwiseOr: case BinaryKind::Maximum: case BinaryKind::Add:
          return each<N>(y, [](bool a, bool b) { return a || b; }, x0, x1);
        default: return each<N>(y, [](bool a, bool b) { return a != b; }, x0, x1);  // xor
      }
    } else {
      constexpr int kBits = int(sizeof(T) * 8);
      const T al = T(alpha);
      switch (kind) {
        case BinaryKind::Add: return each<N>(y, [=](T a, T b) { return T(a + al * b); }, x0, x1);
        case BinaryKind::Sub: return each<N>(y, [=](T a, T b) { return T(a - al * b); }, x0, x1);
        case BinaryKind::Mul: return each<N>(y, [](T a, T b) { return T(a * b); }, x0, x1);
        // Integer division by zero gives 0 (no trap on the GPU; torch leaves it undefined).
        case BinaryKind::FloorDivide:
          return each<N>(y, [](T a, T b) {
            if (b == T(0)) return T(0);
            T q = T(a / b);
            if constexpr (std::is_signed_v<T>) if ((a % b != 0) && ((a < 0) != (b < 0))) q = T(q - 1);
            return q;
          }, x0, x1);
        case BinaryKind::Remainder:
          return each<N>(y, [](T a, T b) {
            if (b == T(0)) return T(0);
            T r = T(a % b);
            if constexpr (std::is_signed_v<T>) if (r != 0 && ((r < 0) != (b < 0))) r = T(r + b);
            return r;
          }, x0, x1);
        case BinaryKind::Fmod: return each<N>(y, [](T a, T b) { return b == T(0) ? T(0) : T(a % b); }, x0, x1);
        case BinaryKind::Maximum: case BinaryKind::Fmax: return each<N>(y, [](T a, T b) { return a > b ? a : b; }, x0, x1);
        case BinaryKind::Minimum: case BinaryKind::Fmin: return each<N>(y, [](T a, T b) { return a < b ? a : b; }, x0, x1);
        case BinaryKind::BitwiseAnd: return each<N>(y, [](T a, T b) { return T(a & b); }, x0, x1);
        case BinaryKind::BitwiseOr: return each<N>(y, [](T a, T b) { return T(a | b); }, x0, x1);
        case BinaryKind::BitwiseXor: return each<N>(y, [](T a, T b) { return T(a ^ b); }, x0, x1);
        // Shifts past the width: 0 (left), sign fill (right), as torch does.
        case BinaryKind::ShiftLeft:
          return each<N>(y, [](T a, T b) {
            using U = std::make_unsigned_t<T>;
            return (b < T(0) || int64_t(b) >= kBits) ? T(0) : T(U(a) << b);
          }, x0, x1);
        case BinaryKind::ShiftRight:
          return each<N>(y, [](T a, T b) {
            if (b < T(0) || int64_t(b) >= kBits) return (std::is_signed_v<T> && a < T(0)) ? T(-1) : T(0);
            return T(a >> b);
          }, x0, x1);
        default: return each<N>(y, [](T, T) { return T(0); }, x0, x1);
      }
    }
  }
};

template <class T>
struct CompareFn {  // bool y = cmp(a, b)
  CompareKind kind;
  template <int N>
  __device__ __forceinline__ void map(bool (&y)[N], const T (&x0)[N], const T (&x1)[N]) const {
    using C = compute_t<T>;
    switch (kind) {
      case CompareKind::Eq: return each<N>(y, [](C a, C b) { return a == b; }, x0, x1);
      case CompareKind::Ne: return each<N>(y, [](C a, C b) { return a != b; }, x0, x1);
      case CompareKind::Lt: return each<N>(y, [](C a, C b) { return a < b; }, x0, x1);
      case CompareKind::Le: return each<N>(y, [](C a, C b) { return a <= b; }, x0, x1);
      case CompareKind::Gt: return each<N>(y, [](C a, C b) { return a > b; }, x0, x1);
      case CompareKind::Ge: return each<N>(y, [](C a, C b) { return a >= b; }, x0, x1);
      case CompareKind::LogicalAnd: return each<N>(y, [](C a, C b) { return a != C(0) && b != C(0); }, x0, x1);
      case CompareKind::LogicalOr: return each<N>(y, [](C a, C b) { return a != C(0) || b != C(0); }, x0, x1);
      default: return each<N>(y, [](C a, C b) { return (a != C(0)) != (b != C(0)); }, x0, x1);
    }
  }
};

// d(op)/d(wrt) * gy for float kinds. Tout is T (direct) or the accumulation type (when the
// gradient is summed over broadcast dimensions afterwards).
template <class T, class Tout>
struct BinaryBackwardFn {
  BinaryKind kind;
  compute_t<T> alpha;
  int wrt;  // 0: grad of a, 1: grad of b
  template <int N>
  __device__ __forceinline__ void map(Tout (&y)[N], const T (&g)[N], const T (&x0)[N], const T (&x1)[N]) const {
    using C = compute_t<T>;
    const C al = C(alpha);
    const bool da = wrt == 0;
    switch (kind) {
      case BinaryKind::Add: return each<N>(y, [=](C g, C, C) { return da ? g : g * al; }, g, x0, x1);
      case BinaryKind::Sub: return each<N>(y, [=](C g, C, C) { return da ? g : -g * al; }, g, x0, x1);
      case BinaryKind::Mul: return each<N>(y, [=](C g, C a, C b) { return g * (da ? b : a); }, g, x0, x1);
      case BinaryKind::Div: return each<N>(y, [=](C g, C a, C b) { return da ? g / b : -g * a / (b * b); }, g, x0, x1);
      case BinaryKind::Pow:
        return each<N>(y, [=](C g, C a, C b) {
          if (da) return b == C(0) ? C(0) : g * b * pow(a, b - C(1));
          return (a == C(0) && b >= C(0)) ? C(0) : g * pow(a, b) * log(a);
        }, g, x0, x1);
      // maximum / minimum split a tie evenly; fmax / fmin give it to a (both as torch).
      case BinaryKind::Maximum:
        return each<N>(y, [=](C g, C a, C b) {
          if (a == b) return g / C(2);
          return (da ? a > b : b > a) ? g : C(0);
        }, g, x0, x1);
      case BinaryKind::Minimum:
        return each<N>(y, [=](C g, C a, C b) {
          if (a == b) return g / C(2);
          return (da ? a < b : b < a) ? g : C(0);
        }, g, x0, x1);
      case BinaryKind::Fmax:
        return each<N>(y, [=](C g, C a, C b) {
          const bool to_a = a >= b || b != b;
          return (da ? to_a : !to_a) ? g : C(0);
        }, g, x0, x1);
      case BinaryKind::Fmin:
        return each<N>(y, [=](C g, C a, C b) {
          const bool to_a = a <= b || b != b;
          return (da ? to_a : !to_a) ? g : C(0);
        }, g, x0, x1);
      case BinaryKind::Atan2:
        return each<N>(y, [=](C g, C a, C b) { C r = a * a + b * b; return da ? g * b / r : -g * a / r; }, g, x0, x1);
      case BinaryKind::Hypot:
        return each<N>(y, [=](C g, C a, C b) { C h = hypot(a, b); return g * (da ? a : b) / h; }, g, x0, x1);
      case BinaryKind::Copysign:
        return each<N>(y, [=](C g, C a, C b) {
          if (!da || a == C(0)) return C(0);
          return g * copysign(C(1), a) * copysign(C(1), b);
        }, g, x0, x1);
      case BinaryKind::LogAddExp:
        return each<N>(y, [=](C g, C a, C b) { return g / (C(1) + exp(da ? b - a : a - b)); }, g, x0, x1);
      case BinaryKind::SiluMul:
        return each<N>(y, [=](C g, C a, C b) { return da ? g * b * silu_grad(a) : g * a * sigmoid_of(a); }, g, x0, x1);
      case BinaryKind::GeluMul:
        return each<N>(y, [=](C g, C a, C b) { return da ? g * b * gelu_grad(a) : g * gelu_of(a); }, g, x0, x1);
      case BinaryKind::GeluTanhMul:
        return each<N>(y, [=](C g, C a, C b) { return da ? g * b * gelu_tanh_grad(a) : g * gelu_tanh_of(a); }, g, x0,
                       x1);
      case BinaryKind::Remainder:
        return each<N>(y, [=](C g, C a, C b) { return da ? g : -g * floor(a / b); }, g, x0, x1);
      case BinaryKind::Fmod:
        return each<N>(y, [=](C g, C a, C b) { return da ? g : -g * trunc(a / b); }, g, x0, x1);
      default: return each<N>(y, [](C, C, C) { return nan_of<C>(); }, g, x0, x1);
    }
  }
};

}  // namespace baracuda::elementwise::kern
