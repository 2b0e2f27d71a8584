// Unary functors: float kinds (all of UnaryKind), integer kinds (a subset), predicates, and
// the derivative of every differentiable float kind (UnaryBackward).
#pragma once
#include "elementwise/functor_util.cuh"
#include "elementwise/ops.h"

namespace baracuda::elementwise::kern {

using namespace baracuda::kernels;  // the shared vocabulary (cuda/common)

using elementwise::UnaryKind;
using elementwise::PredicateKind;

// Fixed >= 0 compiles the kernel for that one kind (see elementwise::kHotUnary); -1 switches at run time.
template <class T, int Fixed = -1>
struct UnaryFloatFn {
  UnaryKind kind;
  compute_t<T> p0, p1;  // parameters, in op-table order (e.g. elu alpha; hardtanh min, max)
  template <int N> __device__ __forceinline__ void map(T (&y)[N], const T (&x)[N]) const {
    using C = compute_t<T>;
    const C a = C(p0), b = C(p1);
    using K = Consts<C>;
    switch (Fixed >= 0 ? UnaryKind(Fixed) : kind) {
      case UnaryKind::Neg: return each<N>(y, [](C v) { return -v; }, x);
      case UnaryKind::Abs: return each<N>(y, [](C v) { return fabs(v); }, x);
      case UnaryKind::Sign: return each<N>(y, [](C v) { return C((C(0) < v) - (v < C(0))); }, x);
      case UnaryKind::Square: return each<N>(y, [](C v) { return v * v; }, x);
      case UnaryKind::Reciprocal: return each<N>(y, [](C v) { return C(1) / v; }, x);
      case UnaryKind::Exp:
        if constexpr (is_half_v<T>) return each<N>(y, [](C v) { return __expf(v); }, x);
        else return each<N>(y, [](C v) { return exp(v); }, x);
      case UnaryKind::Exp2: return each<N>(y, [](C v) { return exp2(v); }, x);
      case UnaryKind::Expm1: return each<N>(y, [](C v) { return expm1(v); }, x);
      case UnaryKind::Log: return each<N>(y, [](C v) { return log(v); }, x);
      case UnaryKind::Log2: return each<N>(y, [](C v) { return log2(v); }, x);
      case UnaryKind::Log10: return each<N>(y, [](C v) { return log10(v); }, x);
      case UnaryKind::Log1p: return each<N>(y, [](C v) { return log1p(v); }, x);
      case UnaryKind::Sqrt: return each<N>(y, [](C v) { return sqrt(v); }, x);
      case UnaryKind::Rsqrt: return each<N>(y, [](C v) { return rsqrt(v); }, x);
      case UnaryKind::Cbrt: return each<N>(y, [](C v) { return cbrt(v); }, x);
      case UnaryKind::Sin: return each<N>(y, [](C v) { return sin(v); }, x);
      case UnaryKind::Cos: return each<N>(y, [](C v) { return cos(v); }, x);
      case UnaryKind::Tan: return each<N>(y, [](C v) { return tan(v); }, x);
      case UnaryKind::Asin: return each<N>(y, [](C v) { return asin(v); }, x);
      case UnaryKind::Acos: return each<N>(y, [](C v) { return acos(v); }, x);
      case UnaryKind::Atan: return each<N>(y, [](C v) { return atan(v); }, x);
      case UnaryKind::Sinh: return each<N>(y, [](C v) { return sinh(v); }, x);
      case UnaryKind::Cosh: return each<N>(y, [](C v) { return cosh(v); }, x);
      case UnaryKind::Tanh: return each<N>(y, [](C v) { return tanh(v); }, x);
      case UnaryKind::Asinh: return each<N>(y, [](C v) { return asinh(v); }, x);
      case UnaryKind::Acosh: return each<N>(y, [](C v) { return acosh(v); }, x);
      case UnaryKind::Atanh: return each<N>(y, [](C v) { return atanh(v); }, x);
      case UnaryKind::Erf: return each<N>(y, [](C v) { return erf(v); }, x);
      case UnaryKind::Erfc: return each<N>(y, [](C v) { return erfc(v); }, x);
      case UnaryKind::Erfinv: return each<N>(y, [](C v) { return erfinv(v); }, x);
      case UnaryKind::Lgamma: return each<N>(y, [](C v) { return lgamma(v); }, x);
      case UnaryKind::Floor: return each<N>(y, [](C v) { return floor(v); }, x);
      case UnaryKind::Ceil: return each<N>(y, [](C v) { return ceil(v); }, x);
      case UnaryKind::Round: return each<N>(y, [](C v) { return rint(v); }, x);  // half to even
      case UnaryKind::Trunc: return each<N>(y, [](C v) { return trunc(v); }, x);
      case UnaryKind::Frac: return each<N>(y, [](C v) { return v - trunc(v); }, x);
      case UnaryKind::Sigmoid:
        if constexpr (is_half_v<T>) return each<N>(y, [](C v) { return __frcp_rn(C(1) + __expf(-v)); }, x);
        else return each<N>(y, [](C v) { return sigmoid_of(v); }, x);
      case UnaryKind::LogSigmoid:
        return each<N>(y, [](C v) { return (v < C(0) ? v : C(0)) - log1p(exp(-fabs(v))); }, x);
      case UnaryKind::Relu: return each<N>(y, [](C v) { return v <= C(0) ? C(0) : v; }, x);
      case UnaryKind::Relu6: return each<N>(y, [](C v) { return clamp_nan(v, C(0), C(6)); }, x);
      case UnaryKind::Gelu: return each<N>(y, [](C v) { return gelu_of(v); }, x);
      case UnaryKind::GeluTanh: return each<N>(y, [](C v) { return gelu_tanh_of(v); }, x);
      case UnaryKind::Silu:
        // 16-bit outputs: hardware exp and an IEEE reciprocal (a few f32 ulp, far below one
        // bf16 / f16 ulp) instead of expf + division; f32 / f64 keep the exact-division form.
        if constexpr (is_half_v<T>) return each<N>(y, [](C v) { return v * __frcp_rn(C(1) + __expf(-v)); }, x);
        else return each<N>(y, [](C v) { return v / (C(1) + exp(-v)); }, x);
      case UnaryKind::Mish: return each<N>(y, [](C v) { return v * tanh(log1p(exp(v))); }, x);
      case UnaryKind::Softplus:  // (beta, threshold)
        return each<N>(y, [=](C v) { return v * a > b ? v : log1p(exp(v * a)) / a; }, x);
      case UnaryKind::Softsign: return each<N>(y, [](C v) { return v / (C(1) + fabs(v)); }, x);
      case UnaryKind::Hardswish:
        return each<N>(y, [](C v) { return v * clamp_nan(v + C(3), C(0), C(6)) / C(6); }, x);
      case UnaryKind::Hardsigmoid:
        return each<N>(y, [](C v) { return clamp_nan(v + C(3), C(0), C(6)) / C(6); }, x);
      case UnaryKind::Hardtanh: return each<N>(y, [=](C v) { return clamp_nan(v, a, b); }, x);
      case UnaryKind::Tanhshrink: return each<N>(y, [](C v) { return v - tanh(v); }, x);
      case UnaryKind::Elu: return each<N>(y, [=](C v) { return v > C(0) ? v : a * expm1(v); }, x);
      case UnaryKind::Selu:
        return each<N>(y, [](C v) { return K::kSeluScale * (v > C(0) ? v : K::kSeluAlpha * expm1(v)); }, x);
      case UnaryKind::Celu: return each<N>(y, [=](C v) { return v > C(0) ? v : a * expm1(v / a); }, x);
      case UnaryKind::LeakyRelu: return each<N>(y, [=](C v) { return v > C(0) ? v : v * a; }, x);
      case UnaryKind::Threshold: return each<N>(y, [=](C v) { return v <= a ? b : v; }, x);
      case UnaryKind::Hardshrink: return each<N>(y, [=](C v) { return (v >= -a && v <= a) ? C(0) : v; }, x);
      case UnaryKind::Softshrink:  // NaN stays NaN, as torch
        return each<N>(y, [=](C v) { return v > a ? v - a : (v < -a ? v + a : (v != v ? v : C(0))); }, x);
      case UnaryKind::PowScalar:
        return each<N>(y, [=](C v) { return a == C(2) ? v * v : pow(v, a); }, x);
      case UnaryKind::Affine: return each<N>(y, [=](C v) { return fma(a, v, b); }, x);
      default: return each<N>(y, [](C) { return nan_of<C>(); }, x);  // unreachable: select() checks
    }
  }
};

template <class T>
struct UnaryIntFn {  // integer and bool kinds
  UnaryKind kind;
  float p0, p1;
  template <int N> __device__ __forceinline__ void map(T (&y)[N], const T (&x)[N]) const {
    if constexpr (std::is_same_v<T, bool>) {
      return each<N>(y, [](bool v) { return !v; }, x);  // BitwiseNot is the only bool kind
    } else {
      switch (kind) {
        case UnaryKind::Neg: return each<N>(y, [](T v) { return T(-v); }, x);
        case UnaryKind::Abs: return each<N>(y, [](T v) { return std::is_signed_v<T> && v < T(0) ? T(-v) : v; }, x);
        case UnaryKind::Sign: return each<N>(y, [](T v) { return T((T(0) < v) - (v < T(0))); }, x);
        case UnaryKind::Square: return each<N>(y, [](T v) { return T(v * v); }, x);
        case UnaryKind::Relu: return each<N>(y, [](T v) { return v < T(0) ? T(0) : v; }, x);
        case UnaryKind::BitwiseNot: return each<N>(y, [](T v) { return T(~v); }, x);
        default: return each<N>(y, [](T) { return T(0); }, x);
      }
    }
  }
};

template <class T>
struct PredicateFn {  // bool y = p(x)
  PredicateKind kind;
  template <int N> __device__ __forceinline__ void map(bool (&y)[N], const T (&x)[N]) const {
    using C = compute_t<T>;
    if constexpr (std::is_floating_point_v<C>) {
      switch (kind) {
        case PredicateKind::IsNan: return each<N>(y, [](C v) { return v != v; }, x);
        case PredicateKind::IsInf: return each<N>(y, [](C v) { return isinf(v); }, x);
        case PredicateKind::IsPosInf: return each<N>(y, [](C v) { return isinf(v) && v > C(0); }, x);
        case PredicateKind::IsNegInf: return each<N>(y, [](C v) { return isinf(v) && v < C(0); }, x);
        case PredicateKind::IsFinite: return each<N>(y, [](C v) { return isfinite(v); }, x);
        case PredicateKind::Signbit: return each<N>(y, [](C v) { return signbit(v) != 0; }, x);
        default: return each<N>(y, [](C v) { return v == C(0); }, x);  // LogicalNot
      }
    } else {
      switch (kind) {
        case PredicateKind::IsFinite: return each<N>(y, [](C) { return true; }, x);
        case PredicateKind::Signbit: return each<N>(y, [](C v) { return v < C(0); }, x);
        case PredicateKind::LogicalNot: return each<N>(y, [](C v) { return v == C(0); }, x);
        default: return each<N>(y, [](C) { return false; }, x);  // isnan / isinf of an integer
      }
    }
  }
};

// gx = gy * f'(x) for float kinds; kinds without a derivative are refused by select().
template <class T, int Fixed = -1>
struct UnaryBackwardFn {
  UnaryKind kind;
  compute_t<T> p0, p1;
  template <int N>
  __device__ __forceinline__ void map(T (&y)[N], const T (&g)[N], const T (&x)[N]) const {
    using C = compute_t<T>;
    using K = Consts<C>;
    const C a = C(p0), b = C(p1);
    switch (Fixed >= 0 ? UnaryKind(Fixed) : kind) {
      case UnaryKind::Neg: return each<N>(y, [](C g, C) { return -g; }, g, x);
      case UnaryKind::Abs: return each<N>(y, [](C g, C v) { return g * C((C(0) < v) - (v < C(0))); }, g, x);
      case UnaryKind::Sign: return each<N>(y, [](C, C) { return C(0); }, g, x);
      case UnaryKind::Square: return each<N>(y, [](C g, C v) { return C(2) * v * g; }, g, x);
      case UnaryKind::Reciprocal: return each<N>(y, [](C g, C v) { return -g / (v * v); }, g, x);
      case UnaryKind::Exp: return each<N>(y, [](C g, C v) { return g * exp(v); }, g, x);
      case UnaryKind::Exp2: return each<N>(y, [](C g, C v) { return g * exp2(v) * K::kLn2; }, g, x);
      case UnaryKind::Expm1: return each<N>(y, [](C g, C v) { return g * exp(v); }, g, x);
      case UnaryKind::Log: return each<N>(y, [](C g, C v) { return g / v; }, g, x);
      case UnaryKind::Log2: return each<N>(y, [](C g, C v) { return g / (v * K::kLn2); }, g, x);
      case UnaryKind::Log10: return each<N>(y, [](C g, C v) { return g / (v * K::kLn10); }, g, x);
      case UnaryKind::Log1p: return each<N>(y, [](C g, C v) { return g / (C(1) + v); }, g, x);
      case UnaryKind::Sqrt: return each<N>(y, [](C g, C v) { return g / (C(2) * sqrt(v)); }, g, x);
      case UnaryKind::Rsqrt: return each<N>(y, [](C g, C v) { return C(-0.5) * g * rsqrt(v) / v; }, g, x);
      case UnaryKind::Cbrt: return each<N>(y, [](C g, C v) { C c = cbrt(v); return g / (C(3) * c * c); }, g, x);
      case UnaryKind::Sin: return each<N>(y, [](C g, C v) { return g * cos(v); }, g, x);
      case UnaryKind::Cos: return each<N>(y, [](C g, C v) { return -g * sin(v); }, g, x);
      case UnaryKind::Tan: return each<N>(y, [](C g, C v) { C t = tan(v); return g * (C(1) + t * t); }, g, x);
      case UnaryKind::Asin: return each<N>(y, [](C g, C v) { return g * rsqrt(C(1) - v * v); }, g, x);
      case UnaryKind::Acos: return each<N>(y, [](C g, C v) { return -g * rsqrt(C(1) - v * v); }, g, x);
      case UnaryKind::Atan: return each<N>(y, [](C g, C v) { return g / (C(1) + v * v); }, g, x);
      case UnaryKind::Sinh: return each<N>(y, [](C g, C v) { return g * cosh(v); }, g, x);
      case UnaryKind::Cosh: return each<N>(y, [](C g, C v) { return g * sinh(v); }, g, x);
      case UnaryKind::Tanh: return each<N>(y, [](C g, C v) { C t = tanh(v); return g * (C(1) - t * t); }, g, x);
      case UnaryKind::Asinh: return each<N>(y, [](C g, C v) { return g * rsqrt(v * v + C(1)); }, g, x);
      case UnaryKind::Acosh: return each<N>(y, [](C g, C v) { return g * rsqrt(v * v - C(1)); }, g, x);
      case UnaryKind::Atanh: return each<N>(y, [](C g, C v) { return g / (C(1) - v * v); }, g, x);
      case UnaryKind::Erf: return each<N>(y, [](C g, C v) { return g * K::k2OverSqrtPi * exp(-v * v); }, g, x);
      case UnaryKind::Erfc: return each<N>(y, [](C g, C v) { return -g * K::k2OverSqrtPi * exp(-v * v); }, g, x);
      case UnaryKind::Erfinv:
        return each<N>(y, [](C g, C v) { C e = erfinv(v); return g * K::kSqrtPiOver2 * exp(e * e); }, g, x);
      case UnaryKind::Floor: case UnaryKind::Ceil: case UnaryKind::Round: case UnaryKind::Trunc:
        return each<N>(y, [](C, C) { return C(0); }, g, x);
      case UnaryKind::Frac: return each<N>(y, [](C g, C) { return g; }, g, x);
      case UnaryKind::Sigmoid: return each<N>(y, [](C g, C v) { C s = sigmoid_of(v); return g * s * (C(1) - s); }, g, x);
      case UnaryKind::LogSigmoid: return each<N>(y, [](C g, C v) { return g * sigmoid_of(-v); }, g, x);
      case UnaryKind::Relu: return each<N>(y, [](C g, C v) { return v > C(0) ? g : C(0); }, g, x);
      case UnaryKind::Relu6: return each<N>(y, [](C g, C v) { return (v > C(0) && v < C(6)) ? g : C(0); }, g, x);
      case UnaryKind::Gelu: return each<N>(y, [](C g, C v) { return g * gelu_grad(v); }, g, x);
      case UnaryKind::GeluTanh: return each<N>(y, [](C g, C v) { return g * gelu_tanh_grad(v); }, g, x);
      case UnaryKind::Silu:
        if constexpr (is_half_v<T>)  // as the forward: hardware exp, IEEE reciprocal
          return each<N>(y, [](C g, C v) { C s = __frcp_rn(C(1) + __expf(-v)); return g * s * (C(1) + v * (C(1) - s)); }, g, x);
        else return each<N>(y, [](C g, C v) { return g * silu_grad(v); }, g, x);
      case UnaryKind::Mish:
        return each<N>(y, [](C g, C v) {
          C sp = log1p(exp(v)), t = tanh(sp);
          return g * (t + v * (C(1) - t * t) * sigmoid_of(v));
        }, g, x);
      case UnaryKind::Softplus:
        return each<N>(y, [=](C g, C v) { return v * a > b ? g : g * sigmoid_of(v * a); }, g, x);
      case UnaryKind::Softsign:
        return each<N>(y, [](C g, C v) { C d = C(1) + fabs(v); return g / (d * d); }, g, x);
      case UnaryKind::Hardswish:  // boundaries as torch: 0 at x <= -3, g at x >= 3
        return each<N>(y, [](C g, C v) {
          return v <= C(-3) ? C(0) : (v < C(3) ? g * (C(2) * v + C(3)) / C(6) : g);
        }, g, x);
      case UnaryKind::Hardsigmoid:
        return each<N>(y, [](C g, C v) { return (v > C(-3) && v < C(3)) ? g / C(6) : C(0); }, g, x);
      case UnaryKind::Hardtanh: return each<N>(y, [=](C g, C v) { return (v > a && v < b) ? g : C(0); }, g, x);
      case UnaryKind::Tanhshrink: return each<N>(y, [](C g, C v) { C t = tanh(v); return g * t * t; }, g, x);
      case UnaryKind::Elu: return each<N>(y, [=](C g, C v) { return v > C(0) ? g : g * a * exp(v); }, g, x);
      case UnaryKind::Selu:
        return each<N>(y, [](C g, C v) { return g * K::kSeluScale * (v > C(0) ? C(1) : K::kSeluAlpha * exp(v)); }, g, x);
      case UnaryKind::Celu: return each<N>(y, [=](C g, C v) { return v > C(0) ? g : g * exp(v / a); }, g, x);
      case UnaryKind::LeakyRelu: return each<N>(y, [=](C g, C v) { return v > C(0) ? g : g * a; }, g, x);
      case UnaryKind::Threshold: return each<N>(y, [=](C g, C v) { return v <= a ? C(0) : g; }, g, x);
      case UnaryKind::Hardshrink: case UnaryKind::Softshrink:
        return each<N>(y, [=](C g, C v) { return (v >= -a && v <= a) ? C(0) : g; }, g, x);
      case UnaryKind::PowScalar:
        return each<N>(y, [=](C g, C v) { return a == C(0) ? C(0) : g * a * pow(v, a - C(1)); }, g, x);
      case UnaryKind::Affine: return each<N>(y, [=](C g, C) { return g * a; }, g, x);
      default: return each<N>(y, [](C, C) { return nan_of<C>(); }, g, x);
    }
  }
};

}  // namespace baracuda::elementwise::kern
