// The elementwise op table: every op the family exposes, its category and kernel kind, its
// parameters, the dtypes it accepts and its backward. Python's functional API and
// docs/ops.md are generated from this table.
#include <unordered_map>

#include "elementwise/ops.h"
#include "baracuda/elementwise.h"

namespace baracuda {
namespace {

using D = DType;
const std::vector<DType> kFP = {D::Float16, D::BFloat16, D::Float32, D::Float64};
const std::vector<DType> kInt = {D::Int8, D::UInt8, D::Int16, D::Int32, D::Int64, D::UInt32};
const std::vector<DType> kAll = {D::Bool, D::Int8, D::UInt8, D::Int16, D::Int32, D::Int64, D::UInt32,
                                 D::Float16, D::BFloat16, D::Float32, D::Float64, D::Float8E4M3, D::Float8E5M2};
std::vector<DType> join(std::vector<DType> a, const std::vector<DType>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}
const std::vector<DType> kFPInt = join(kFP, kInt);
const std::vector<DType> kReal = join(kFPInt, {D::Bool});
const std::vector<DType> kIntBool = join(kInt, {D::Bool});

struct P { std::string name; double def; };

std::vector<EwOpInfo> build() {
  std::vector<EwOpInfo> t;
  auto add = [&](std::string name, EwCategory c, int kind, int arity, std::vector<P> ps,
                 const std::vector<DType>& dt, std::string bwd, std::string doc) {
    EwOpInfo r{std::move(name), c, kind, arity, {}, {}, dt, std::move(bwd), std::move(doc)};
    for (auto& p : ps) { r.params.push_back(p.name); r.defaults.push_back(p.def); }
    t.push_back(std::move(r));
  };
  using U = elementwise::UnaryKind;
  struct UnaryRow { const char* name; U kind; std::vector<P> ps; bool ints; bool grad; const char* doc; };
  const std::vector<UnaryRow> unary = {
      {"neg", U::Neg, {}, true, true, "-x"},
      {"abs", U::Abs, {}, true, true, "|x|"},
      {"sign", U::Sign, {}, true, true, "-1, 0 or 1 (0 for NaN, as torch)"},
      {"square", U::Square, {}, true, true, "x*x"},
      {"reciprocal", U::Reciprocal, {}, false, true, "1/x"},
      {"exp", U::Exp, {}, false, true, "e^x"},
      {"exp2", U::Exp2, {}, false, true, "2^x"},
      {"expm1", U::Expm1, {}, false, true, "e^x - 1"},
      {"log", U::Log, {}, false, true, "natural log"},
      {"log2", U::Log2, {}, false, true, "base-2 log"},
      {"log10", U::Log10, {}, false, true, "base-10 log"},
      {"log1p", U::Log1p, {}, false, true, "log(1 + x)"},
      {"sqrt", U::Sqrt, {}, false, true, "square root"},
      {"rsqrt", U::Rsqrt, {}, false, true, "1/sqrt(x)"},
      {"cbrt", U::Cbrt, {}, false, true, "cube root"},
      {"sin", U::Sin, {}, false, true, "sine"},
      {"cos", U::Cos, {}, false, true, "cosine"},
      {"tan", U::Tan, {}, false, true, "tangent"},
      {"asin", U::Asin, {}, false, true, "arc sine"},
      {"acos", U::Acos, {}, false, true, "arc cosine"},
      {"atan", U::Atan, {}, false, true, "arc tangent"},
      {"sinh", U::Sinh, {}, false, true, "hyperbolic sine"},
      {"cosh", U::Cosh, {}, false, true, "hyperbolic cosine"},
      {"tanh", U::Tanh, {}, false, true, "hyperbolic tangent"},
      {"asinh", U::Asinh, {}, false, true, "inverse hyperbolic sine"},
      {"acosh", U::Acosh, {}, false, true, "inverse hyperbolic cosine"},
      {"atanh", U::Atanh, {}, false, true, "inverse hyperbolic tangent"},
      {"erf", U::Erf, {}, false, true, "error function"},
      {"erfc", U::Erfc, {}, false, true, "1 - erf(x)"},
      {"erfinv", U::Erfinv, {}, false, true, "inverse error function"},
      {"lgamma", U::Lgamma, {}, false, false, "log|gamma(x)| (no backward yet: needs digamma)"},
      {"floor", U::Floor, {}, false, true, "round toward -inf"},
      {"ceil", U::Ceil, {}, false, true, "round toward +inf"},
      {"round", U::Round, {}, false, true, "round half to even"},
      {"trunc", U::Trunc, {}, false, true, "round toward 0"},
      {"frac", U::Frac, {}, false, true, "x - trunc(x)"},
      {"sigmoid", U::Sigmoid, {}, false, true, "1/(1+e^-x)"},
      {"logsigmoid", U::LogSigmoid, {}, false, true, "log(sigmoid(x)), stable"},
      {"relu", U::Relu, {}, true, true, "max(x, 0), NaN kept"},
      {"relu6", U::Relu6, {}, false, true, "min(max(x, 0), 6)"},
      {"gelu", U::Gelu, {}, false, true, "x * Phi(x) (erf form)"},
      {"gelu_tanh", U::GeluTanh, {}, false, true, "gelu, tanh approximation"},
      {"silu", U::Silu, {}, false, true, "x * sigmoid(x)"},
      {"mish", U::Mish, {}, false, true, "x * tanh(softplus(x))"},
      {"softplus", U::Softplus, {{"beta", 1.0}, {"threshold", 20.0}}, false, true, "log(1+e^(beta x))/beta; x where beta x > threshold"},
      {"softsign", U::Softsign, {}, false, true, "x/(1+|x|)"},
      {"hardswish", U::Hardswish, {}, false, true, "x * relu6(x+3)/6"},
      {"hardsigmoid", U::Hardsigmoid, {}, false, true, "relu6(x+3)/6"},
      {"hardtanh", U::Hardtanh, {{"min_val", -1.0}, {"max_val", 1.0}}, false, true, "clamp(x, min_val, max_val)"},
      {"tanhshrink", U::Tanhshrink, {}, false, true, "x - tanh(x)"},
      {"elu", U::Elu, {{"alpha", 1.0}}, false, true, "x if x > 0 else alpha (e^x - 1)"},
      {"selu", U::Selu, {}, false, true, "scaled elu with the self-normalising constants"},
      {"celu", U::Celu, {{"alpha", 1.0}}, false, true, "x if x > 0 else alpha (e^(x/alpha) - 1)"},
      {"leaky_relu", U::LeakyRelu, {{"negative_slope", 0.01}}, false, true, "x if x > 0 else negative_slope x"},
      {"threshold", U::Threshold, {{"threshold", 0.0}, {"value", 0.0}}, false, true, "value if x <= threshold else x"},
      {"hardshrink", U::Hardshrink, {{"lambd", 0.5}}, false, true, "0 if |x| <= lambd else x"},
      {"softshrink", U::Softshrink, {{"lambd", 0.5}}, false, true, "x -+ lambd outside [-lambd, lambd], else 0"},
      {"pow_scalar", U::PowScalar, {{"exponent", 2.0}}, false, true, "x ** exponent"},
      {"affine", U::Affine, {{"a", 1.0}, {"b", 0.0}}, false, true, "a * x + b (one fused multiply-add)"},
      {"bitwise_not", U::BitwiseNot, {}, false, false, "~x (logical not for bool)"},
  };
  for (const auto& u : unary) {
    std::vector<DType> dt = u.kind == U::BitwiseNot ? kIntBool : (u.ints ? kFPInt : kFP);
    add(u.name, EwCategory::Unary, int(u.kind), 1, u.ps, dt, u.grad ? std::string(u.name) + "_backward" : "", u.doc);
    if (u.grad)
      add(std::string(u.name) + "_backward", EwCategory::UnaryBackward, int(u.kind), 2, u.ps, kFP, "",
          std::string("grad of ") + u.name + ": inputs (grad_out, x)");
  }

  using Q = elementwise::PredicateKind;
  for (auto [n, k, doc] : std::vector<std::tuple<const char*, Q, const char*>>{
           {"isnan", Q::IsNan, "x != x"}, {"isinf", Q::IsInf, "|x| == inf"}, {"isposinf", Q::IsPosInf, "x == +inf"},
           {"isneginf", Q::IsNegInf, "x == -inf"}, {"isfinite", Q::IsFinite, "not NaN and not inf"},
           {"signbit", Q::Signbit, "sign bit set (-0.0 included)"}, {"logical_not", Q::LogicalNot, "x == 0"}})
    add(n, EwCategory::Predicate, int(k), 1, {}, kReal, "", std::string(doc) + " -> bool");

  using B = elementwise::BinaryKind;
  struct BinRow { const char* name; B kind; std::vector<P> ps; const std::vector<DType>* dt; bool grad; const char* doc; };
  const std::vector<BinRow> binary = {
      {"add", B::Add, {{"alpha", 1.0}}, &kFPInt, true, "a + alpha * b"},
      {"sub", B::Sub, {{"alpha", 1.0}}, &kFPInt, true, "a - alpha * b"},
      {"mul", B::Mul, {}, &kFPInt, true, "a * b"},
      {"div", B::Div, {}, &kFP, true, "a / b (true division)"},
      {"floor_divide", B::FloorDivide, {}, &kFPInt, false, "floor(a / b); integer b == 0 gives 0"},
      {"remainder", B::Remainder, {}, &kFPInt, true, "a mod b with the sign of b (Python %)"},
      {"fmod", B::Fmod, {}, &kFPInt, true, "C fmod: sign of a"},
      {"pow", B::Pow, {}, &kFP, true, "a ** b"},
      {"maximum", B::Maximum, {}, &kReal, true, "max, NaN-propagating"},
      {"minimum", B::Minimum, {}, &kReal, true, "min, NaN-propagating"},
      {"fmax", B::Fmax, {}, &kFP, true, "max, NaN-ignoring"},
      {"fmin", B::Fmin, {}, &kFP, true, "min, NaN-ignoring"},
      {"atan2", B::Atan2, {}, &kFP, true, "atan(a/b) in the right quadrant"},
      {"hypot", B::Hypot, {}, &kFP, true, "sqrt(a^2 + b^2)"},
      {"copysign", B::Copysign, {}, &kFP, true, "|a| with the sign of b"},
      {"logaddexp", B::LogAddExp, {}, &kFP, true, "log(e^a + e^b), stable"},
      {"silu_mul", B::SiluMul, {}, &kFP, true, "silu(a) * b: SwiGLU from the gate and up projections"},
      {"gelu_mul", B::GeluMul, {}, &kFP, true, "gelu(a) * b (erf): GeGLU from the two projections"},
      {"gelu_tanh_mul", B::GeluTanhMul, {}, &kFP, true, "gelu_tanh(a) * b: GeGLU (tanh) from the two projections"},
      {"bitwise_and", B::BitwiseAnd, {}, &kIntBool, false, "a & b"},
      {"bitwise_or", B::BitwiseOr, {}, &kIntBool, false, "a | b"},
      {"bitwise_xor", B::BitwiseXor, {}, &kIntBool, false, "a ^ b"},
      {"shift_left", B::ShiftLeft, {}, &kInt, false, "a << b (0 past the width)"},
      {"shift_right", B::ShiftRight, {}, &kInt, false, "a >> b (arithmetic for signed)"},
  };
  for (const auto& b : binary) {
    add(b.name, EwCategory::Binary, int(b.kind), 2, b.ps, *b.dt, b.grad ? std::string(b.name) + "_backward" : "", b.doc);
    if (b.grad) {
      auto ps = b.ps;
      ps.push_back({"wrt", 0});
      add(std::string(b.name) + "_backward", EwCategory::BinaryBackward, int(b.kind), 3, ps, kFP, "",
          std::string("grad of ") + b.name + " w.r.t. input `wrt`: inputs (grad_out, a, b), summed to that input's shape");
    }
  }

  using Cm = elementwise::CompareKind;
  for (auto [n, k, doc] : std::vector<std::tuple<const char*, Cm, const char*>>{
           {"eq", Cm::Eq, "a == b"}, {"ne", Cm::Ne, "a != b"}, {"lt", Cm::Lt, "a < b"}, {"le", Cm::Le, "a <= b"},
           {"gt", Cm::Gt, "a > b"}, {"ge", Cm::Ge, "a >= b"}, {"logical_and", Cm::LogicalAnd, "a != 0 and b != 0"},
           {"logical_or", Cm::LogicalOr, "a != 0 or b != 0"}, {"logical_xor", Cm::LogicalXor, "(a != 0) xor (b != 0)"}})
    add(n, EwCategory::Compare, int(k), 2, {}, kReal, "", std::string(doc) + " -> bool");

  using T3 = elementwise::TernaryKind;
  add("where", EwCategory::Ternary, int(T3::Where), 3, {}, kReal, "where_backward", "cond ? a : b (cond is bool)");
  add("clamp", EwCategory::Ternary, int(T3::Clamp), 3, {}, kFPInt, "clamp_backward", "min(max(x, lo), hi); NaN kept");
  add("lerp", EwCategory::Ternary, int(T3::Lerp), 3, {}, kFP, "lerp_backward", "a + w (b - a)");
  add("addcmul", EwCategory::Ternary, int(T3::Addcmul), 3, {{"value", 1.0}}, kFP, "addcmul_backward", "x + value t1 t2");
  add("addcdiv", EwCategory::Ternary, int(T3::Addcdiv), 3, {{"value", 1.0}}, kFP, "addcdiv_backward", "x + value t1 / t2");
  add("fma", EwCategory::Ternary, int(T3::Fma), 3, {}, kFP, "fma_backward", "a * b + c, one rounding in compute precision");
  add("where_backward", EwCategory::TernaryBackward, int(T3::Where), 4, {{"wrt", 1}}, kFP, "",
      "grad of where w.r.t. a (wrt=1) or b (wrt=2): inputs (grad_out, cond, a, b)");
  for (auto [n, k, ps] : std::vector<std::tuple<const char*, T3, std::vector<P>>>{
           {"clamp", T3::Clamp, {}}, {"lerp", T3::Lerp, {}}, {"addcmul", T3::Addcmul, {{"value", 1.0}}},
           {"addcdiv", T3::Addcdiv, {{"value", 1.0}}}, {"fma", T3::Fma, {}}}) {
    ps.push_back({"wrt", 0});
    add(std::string(n) + "_backward", EwCategory::TernaryBackward, int(k), 4, ps, kFP, "",
        std::string("grad of ") + n + " w.r.t. input `wrt`: inputs (grad_out, x0, x1, x2)");
  }

  add("cast", EwCategory::Cast, 0, 1, {{"saturate", 1.0}}, kAll, "",
      "convert to the output dtype; fp8 saturates to finite unless saturate=0");
  add("fill", EwCategory::Fill, 0, 0, {{"value", 0.0}}, kAll, "", "every element = value (exact to 2^53)");

  using G = elementwise::GatedKind;
  for (auto [n, k, doc] : std::vector<std::tuple<const char*, G, const char*>>{
           {"swiglu", G::Swiglu, "silu(x1) * x2"}, {"geglu", G::Geglu, "gelu(x1) * x2"},
           {"geglu_tanh", G::GegluTanh, "gelu_tanh(x1) * x2"}, {"reglu", G::Reglu, "relu(x1) * x2"},
           {"glu", G::Glu, "x1 * sigmoid(x2) (torch's glu)"}}) {
    add(n, EwCategory::Gated, int(k), 1, {{"axis", -1}}, kFP, std::string(n) + "_backward",
        std::string(doc) + ", x1 / x2 the halves of x along axis");
    add(std::string(n) + "_backward", EwCategory::GatedBackward, int(k), 2, {{"axis", -1}}, kFP, "",
        std::string("grad of ") + n + ": inputs (grad_out, x), output shaped like x");
  }
  return t;
}

}  // namespace

const std::vector<EwOpInfo>& elementwise_ops() {
  static const std::vector<EwOpInfo> table = build();
  return table;
}

const EwOpInfo* find_elementwise_op(const std::string& name) {
  static const std::unordered_map<std::string, const EwOpInfo*> index = [] {
    std::unordered_map<std::string, const EwOpInfo*> m;
    for (const auto& r : elementwise_ops()) m[r.name] = &r;
    return m;
  }();
  auto it = index.find(name);
  return it == index.end() ? nullptr : it->second;
}

const char* category_name(EwCategory c) {
  switch (c) {
    case EwCategory::Unary: return "unary";
    case EwCategory::Predicate: return "predicate";
    case EwCategory::Binary: return "binary";
    case EwCategory::Compare: return "compare";
    case EwCategory::Ternary: return "ternary";
    case EwCategory::Cast: return "cast";
    case EwCategory::Fill: return "fill";
    case EwCategory::Gated: return "gated";
    case EwCategory::UnaryBackward: return "unary_backward";
    case EwCategory::BinaryBackward: return "binary_backward";
    case EwCategory::TernaryBackward: return "ternary_backward";
    case EwCategory::GatedBackward: return "gated_backward";
  }
  return "?";
}

}  // namespace baracuda
