// The reduction op table: every op the family exposes, its kernel kind, parameters, dtypes,
// output-dtype rule and backward. Python's functional API and docs/ops.md are generated from it.
#include <unordered_map>

#include "baracuda/reduction.h"
#include "reduction/reduction_launch.h"

namespace baracuda {
namespace {

using D = DType;
using K = reduction::RedKind;
using B = reduction::BwdKind;
const std::vector<DType> kFP = {D::Float16, D::BFloat16, D::Float32, D::Float64};
const std::vector<DType> kInt = {D::Int8, D::UInt8, D::Int16, D::Int32, D::Int64, D::UInt32};
std::vector<DType> join(std::vector<DType> a, const std::vector<DType>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}
const std::vector<DType> kFPInt = join(kFP, kInt);
const std::vector<DType> kReal = join(kFPInt, {D::Bool});

std::vector<RedOpInfo> build() {
  std::vector<RedOpInfo> t;
  auto fwd = [&](std::string name, RedCategory c, K kind, std::vector<std::string> ps, std::vector<double> defs,
                 const std::vector<DType>& dt, std::string out_rule, std::string bwd, int bwd_inputs, std::string doc) {
    t.push_back(RedOpInfo{std::move(name), c, int(kind), std::move(ps), std::move(defs), dt, std::move(out_rule),
                          std::move(bwd), bwd_inputs, std::move(doc)});
  };
  const auto R = RedCategory::Reduce;
  const auto S = RedCategory::ToShape;
  fwd("sum", R, K::Sum, {}, {}, kReal, "same (f32 allowed for f16 / bf16); int64 for integers and bool",
      "sum_backward", 2, "sum over axes");
  fwd("mean", R, K::Mean, {}, {}, kFP, "same (f32 allowed for f16 / bf16)", "mean_backward", 2,
      "arithmetic mean over axes (NaN when empty)");
  fwd("amax", R, K::Amax, {}, {}, kFPInt, "same", "amax_backward", 2, "maximum over axes; NaN propagates");
  fwd("amin", R, K::Amin, {}, {}, kFPInt, "same", "amin_backward", 2, "minimum over axes; NaN propagates");
  fwd("prod", R, K::Prod, {}, {}, kReal, "same for floats; int64 for integers and bool", "prod_backward", 2,
      "product over axes");
  fwd("norm2", R, K::Norm2, {}, {}, kFP, "same", "norm2_backward", 3, "sqrt of the sum of squares over axes");
  fwd("logsumexp", R, K::Logsumexp, {}, {}, kFP, "same", "logsumexp_backward", 3,
      "log(sum(exp(x))) over axes, stabilised by the running max");
  fwd("var", R, K::Var, {"correction"}, {1.0}, kFP, "same", "var_backward", 2,
      "variance over axes with `correction` (Bessel's by default); Welford in f32 / f64");
  fwd("std", R, K::Std, {"correction"}, {1.0}, kFP, "same", "std_backward", 3, "sqrt of var");
  fwd("argmax", R, K::Argmax, {}, {}, kFPInt, "int64 or int32 (the out spec decides)", "", 0,
      "index of the first maximum along one axis or of the flattened tensor; NaN counts as the maximum");
  fwd("argmin", R, K::Argmin, {}, {}, kFPInt, "int64 or int32 (the out spec decides)", "", 0,
      "index of the first minimum along one axis or of the flattened tensor; NaN counts as the minimum");
  fwd("any", R, K::Any, {}, {}, kReal, "bool", "", 0, "True where any element is nonzero (NaN is nonzero)");
  fwd("all", R, K::All, {}, {}, kReal, "bool", "", 0, "True where every element is nonzero (True when empty)");
  fwd("count_nonzero", R, K::CountNonzero, {}, {}, kReal, "int64", "", 0, "number of nonzero elements");
  fwd("sum_to_shape", S, K::Sum, {}, {}, kFPInt, "same", "", 0,
      "sum x down to out's broadcast-compatible shape (the backward of broadcasting)");
  fwd("amax_to_shape", S, K::Amax, {}, {}, kFPInt, "same", "", 0, "amax of x down to out's shape");
  fwd("amin_to_shape", S, K::Amin, {}, {}, kFPInt, "same", "", 0, "amin of x down to out's shape");
  fwd("prod_to_shape", S, K::Prod, {}, {}, kFPInt, "same", "", 0, "prod of x down to out's shape");
  // Backward rows: inputs (grad_out, x) or (grad_out, x, y); out = grad_x, shaped like x.
  auto bwd = [&](std::string name, B kind, std::vector<std::string> ps, std::vector<double> defs, int inputs,
                 std::string doc) {
    t.push_back(RedOpInfo{std::move(name), RedCategory::Backward, int(kind), std::move(ps), std::move(defs), kFP,
                          "same", "", inputs, std::move(doc)});
  };
  bwd("sum_backward", B::Sum, {}, {}, 2, "grad_x = grad_out broadcast over the reduced axes");
  bwd("mean_backward", B::Mean, {}, {}, 2, "grad_x = grad_out / n");
  bwd("amax_backward", B::Amax, {}, {}, 2, "grad_out split evenly among the maxima (as torch's amax)");
  bwd("amin_backward", B::Amin, {}, {}, 2, "grad_out split evenly among the minima (as torch's amin)");
  bwd("prod_backward", B::Prod, {}, {}, 2,
      "grad_out x the product of the other elements (exact with one zero; 0 with two or more)");
  bwd("norm2_backward", B::Norm2, {}, {}, 3, "grad_out * x / y (0 where y == 0)");
  bwd("logsumexp_backward", B::Logsumexp, {}, {}, 3, "grad_out * exp(x - y)");
  bwd("var_backward", B::Var, {"correction"}, {1.0}, 2, "grad_out * 2 (x - mean) / (n - correction)");
  bwd("std_backward", B::Std, {"correction"}, {1.0}, 3, "grad_out * (x - mean) / ((n - correction) y)");
  return t;
}

}  // namespace

const char* red_category_name(RedCategory c) {
  switch (c) {
    case RedCategory::Reduce: return "reduce";
    case RedCategory::ToShape: return "to_shape";
    case RedCategory::Backward: return "backward";
  }
  return "?";
}

const std::vector<RedOpInfo>& reduction_ops() {
  static const std::vector<RedOpInfo> t = build();
  return t;
}

const RedOpInfo* find_reduction_op(const std::string& name) {
  static const auto* index = [] {
    auto* m = new std::unordered_map<std::string, const RedOpInfo*>();
    for (const auto& r : reduction_ops()) (*m)[r.name] = &r;
    return m;
  }();
  auto it = index->find(name);
  return it == index->end() ? nullptr : it->second;
}

FamilyInfo reduction_family_info() {
  FamilyInfo f{"reduction", "ReductionPlan",
               "sum, mean, amax, amin, prod, norm2, logsumexp, var, std, argmax/argmin, any/all, count_nonzero over "
               "any axes; reduce-to-shape; with backward",
               {}};
  for (const auto& r : reduction_ops()) {
    if (r.category == RedCategory::Backward) continue;  // listed through has_backward on the forward row
    f.ops.push_back(OpCoverage{r.name, red_category_name(r.category), r.dtypes, {"rows", "columns", "strided"},
                               Backend::Bespoke, !r.backward.empty()});
  }
  return f;
}

}  // namespace baracuda
