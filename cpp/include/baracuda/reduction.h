// The reduction family: sum, mean, amax, amin, prod, norm2, logsumexp, var, std, argmax,
// argmin, any, all, count_nonzero over any set of axes; reduce-to-shape (the backward of
// broadcasting); and the backward plans of the differentiable reductions.
//
// One descriptor names the op, the input, the axes and the output spec; select() validates it
// and picks a kernel (rows / columns / strided, with a split pass for long reductions);
// run() checks the tensors against the descriptor and launches.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "baracuda/plan.h"
#include "baracuda/registry.h"
#include "baracuda/tensor.h"

namespace baracuda {

enum class RedCategory {
  Reduce,        // out = reduce(x over axes)
  ToShape,       // out = reduce(x to out's broadcast-compatible shape)
  Backward,      // grad_x = f(grad_out[r(i)], x[i], y[r(i)])  (a broadcast map)
};
const char* red_category_name(RedCategory c);

// One row of the op table. docs/ops.md and the Python functional API are generated from it.
struct RedOpInfo {
  std::string name;
  RedCategory category;
  int kind;                               // reduction::RedKind value (cuda/reduction/reduction_launch.h)
  std::vector<std::string> params;        // scalar parameters, in order
  std::vector<double> defaults;
  std::vector<DType> dtypes;              // supported input dtypes
  std::string out_dtype;                  // rule, for docs: "same", "int64 for integers", "bool", ...
  std::string backward;                   // name of the backward op, "" if none
  int backward_inputs = 0;                // backward rows: 2 = (grad_out, x), 3 = (grad_out, x, y)
  std::string doc;                        // one line
};
const std::vector<RedOpInfo>& reduction_ops();
const RedOpInfo* find_reduction_op(const std::string& name);  // nullptr if unknown

struct ReductionDescriptor {
  std::string op;
  TensorSpec input;                       // x (the reduced tensor; for backward ops, the forward input)
  std::vector<int64_t> axes;              // empty = all (ignored by *_to_shape); negative allowed
  bool keepdim = false;
  TensorSpec out;                         // forward: the result; backward: grad_x (x's shape)
  std::map<std::string, double> params;   // missing params take their defaults (e.g. correction)
  // Backward ops only: grad_out (the reduced shape, keepdim or not) and, for ops that read it,
  // y (the forward output, same shape as grad_out). Ignored (leave default) for forward ops.
  TensorSpec grad_out;
  TensorSpec y;
  bool operator==(const ReductionDescriptor& o) const {
    return op == o.op && input == o.input && axes == o.axes && keepdim == o.keepdim && out == o.out &&
           params == o.params && grad_out == o.grad_out && y == o.y;
  }
  std::string str() const;
};

class ReductionPlan {
 public:
  // Validates everything knowable without data; throws InvalidArgument / InvalidDType /
  // Unsupported naming the argument. Needs no GPU.
  static ReductionPlan select(const ReductionDescriptor& desc, const PlanPreference& pref = PlanPreference{});
  const KernelSku& sku() const;
  const ReductionDescriptor& descriptor() const;
  int64_t workspace_bytes() const;
  // The input tensors the plan takes at run(): 1 (x) for forward ops; 2 (grad_out, x) or
  // 3 (grad_out, x, y) for backward ops.
  int num_inputs() const;
  // Checks the tensors against the descriptor and launches on `stream`. Never allocates,
  // never synchronizes. inputs: {x} for forward ops, {grad_out, x[, y]} for backward ops.
  void run(const TensorView& out, const TensorView* inputs, int num_inputs, void* workspace = nullptr,
           int64_t workspace_size = 0, StreamHandle stream = nullptr) const;
  void run(const TensorView& out, const TensorView& x, void* workspace = nullptr, int64_t workspace_size = 0,
           StreamHandle stream = nullptr) const {
    run(out, &x, 1, workspace, workspace_size, stream);
  }

  struct Impl;
  ReductionPlan(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
 private:
  std::shared_ptr<const Impl> impl_;
};

FamilyInfo reduction_family_info();

}  // namespace baracuda
