// Op kinds of the elementwise family, shared by the host op table (cpp/src/elementwise_ops.cpp)
// and the device functors. Kinds are runtime arguments of the kernels: a warp-uniform switch
// costs nothing next to a DRAM access, and keeps the instantiation count to dtypes x layouts.
#pragma once
#include <cstddef>

namespace baracuda::elementwise {

enum class UnaryKind : int {
  Neg, Abs, Sign, Square, Reciprocal,
  Exp, Exp2, Expm1, Log, Log2, Log10, Log1p,
  Sqrt, Rsqrt, Cbrt,
  Sin, Cos, Tan, Asin, Acos, Atan, Sinh, Cosh, Tanh, Asinh, Acosh, Atanh,
  Erf, Erfc, Erfinv, Lgamma,
  Floor, Ceil, Round, Trunc, Frac,
  Sigmoid, LogSigmoid, Relu, Relu6, Gelu, GeluTanh, Silu, Mish, Softplus, Softsign,
  Hardswish, Hardsigmoid, Hardtanh, Tanhshrink, Elu, Selu, Celu, LeakyRelu, Threshold,
  Hardshrink, Softshrink, PowScalar, Affine, BitwiseNot,
  Count
};

enum class PredicateKind : int { IsNan, IsInf, IsPosInf, IsNegInf, IsFinite, Signbit, LogicalNot, Count };

enum class BinaryKind : int {
  Add, Sub, Mul, Div, FloorDivide, Remainder, Fmod, Pow, Maximum, Minimum, Fmax, Fmin,
  Atan2, Hypot, Copysign, LogAddExp, SiluMul, GeluMul, GeluTanhMul, BitwiseAnd, BitwiseOr, BitwiseXor, ShiftLeft, ShiftRight,
  Count
};

enum class CompareKind : int { Eq, Ne, Lt, Le, Gt, Ge, LogicalAnd, LogicalOr, LogicalXor, Count };

enum class TernaryKind : int { Where, Clamp, Lerp, Addcmul, Addcdiv, Fma, Count };

enum class GatedKind : int { Swiglu, Geglu, GegluTanh, Reglu, Glu, Count };

// Kinds compiled into kernels of their own (the kind a template parameter) besides the
// generic switch kernel. Measured on H200: the generic kernel's register budget (the
// largest case decides it) costs compute-heavy activations ~15% (bf16 silu, gelu).
inline constexpr UnaryKind kHotUnary[] = {UnaryKind::Silu, UnaryKind::Gelu, UnaryKind::GeluTanh, UnaryKind::Exp,
                                          UnaryKind::Sigmoid, UnaryKind::Relu, UnaryKind::Tanh};
inline constexpr UnaryKind kHotUnaryBackward[] = {UnaryKind::Silu, UnaryKind::Gelu, UnaryKind::GeluTanh};
inline constexpr BinaryKind kHotBinary[] = {BinaryKind::Add, BinaryKind::Sub, BinaryKind::Mul, BinaryKind::Div,
                                            BinaryKind::SiluMul};

template <class K, size_t N> constexpr bool contains(const K (&arr)[N], int kind) {
  for (size_t i = 0; i < N; ++i)
    if (int(arr[i]) == kind) return true;
  return false;
}

}  // namespace baracuda::elementwise
