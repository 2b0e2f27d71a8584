// The elementwise family: unary, parametrised unary, binary with broadcasting,
// comparisons, ternary, cast, fill, gated activations, and their backward plans.
//
// One descriptor names the op and the operand specs; select() validates it and picks a
// kernel; run() checks the tensors against the descriptor and launches.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "baracuda/plan.h"
#include "baracuda/tensor.h"

namespace baracuda {

enum class EwCategory {
  Unary,            // y = f(x)              (incl. parametrised kinds and affine a*x+b)
  Predicate,        // bool y = p(x)         (isnan, isinf, isfinite, signbit, logical_not)
  Binary,           // y = f(a, b)           (numpy broadcasting)
  Compare,          // bool y = f(a, b)      (eq, lt, ...; logical_and/or/xor)
  Ternary,          // y = f(a, b, c)        (where takes a bool condition first)
  Cast,             // y = T(x)
  Fill,             // y = value
  Gated,            // y = act(x[..., :h]) * x[..., h:]   (split along `axis`)
  UnaryBackward,    // gx = gy * f'(x)
  BinaryBackward,   // g_wrt = reduce_to(wrt's shape, dF/d(wrt) * gy)
  TernaryBackward,  // likewise for ternary kinds
  GatedBackward,    // gx (full width) from gy and x
};
const char* category_name(EwCategory c);

// One row of the op table. docs/ops.md and the Python functional API are generated from it.
struct EwOpInfo {
  std::string name;
  EwCategory category;
  int kind;                               // enum value inside the category (cuda/elementwise/ops.h)
  int arity;                              // tensor inputs
  std::vector<std::string> params;        // scalar parameters, in order
  std::vector<double> defaults;
  std::vector<DType> dtypes;              // supported input dtypes (the data operand's)
  std::string backward;                   // name of the backward op, "" if none
  std::string doc;                        // one line
};
const std::vector<EwOpInfo>& elementwise_ops();
const EwOpInfo* find_elementwise_op(const std::string& name);  // nullptr if unknown

struct ElementwiseDescriptor {
  std::string op;
  std::vector<TensorSpec> inputs;
  TensorSpec out;
  std::map<std::string, double> params;   // missing params take their defaults
  bool operator==(const ElementwiseDescriptor& o) const {
    return op == o.op && inputs == o.inputs && out == o.out && params == o.params;
  }
  std::string str() const;
};

class ElementwisePlan {
 public:
  // Validates everything knowable without data; throws InvalidArgument / InvalidDType /
  // Unsupported naming the reason. Needs no GPU.
  static ElementwisePlan select(const ElementwiseDescriptor& desc,
                                const PlanPreference& pref = PlanPreference{});
  const KernelSku& sku() const;
  const ElementwiseDescriptor& descriptor() const;
  int64_t workspace_bytes() const;
  // Checks the tensors against the descriptor (shape, dtype, strides, device, aliasing,
  // workspace) and launches on `stream`. Never allocates, never synchronizes.
  void run(const TensorView& out, const TensorView* inputs, int num_inputs,
           void* workspace = nullptr, int64_t workspace_size = 0,
           StreamHandle stream = nullptr) const;
  void run(const TensorView& out, const std::vector<TensorView>& inputs,
           void* workspace = nullptr, int64_t workspace_size = 0,
           StreamHandle stream = nullptr) const {
    run(out, inputs.data(), int(inputs.size()), workspace, workspace_size, stream);
  }

  struct Impl;
  ElementwisePlan(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
 private:
  std::shared_ptr<const Impl> impl_;
};

}  // namespace baracuda
