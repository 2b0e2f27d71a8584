// The softmax family: softmax and log-softmax along any axis, forward and backward.
//
//   forward   inputs = {x},           out = y
//   backward  inputs = {grad_out, y}, out = grad_x   (y: the forward's output)
//
// softmax_backward:     gx = y * (gy - sum(gy * y))
// log_softmax_backward: gx = gy - exp(y) * sum(gy)
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "baracuda/plan.h"
#include "baracuda/registry.h"
#include "baracuda/tensor.h"

namespace baracuda {

struct SoftmaxDescriptor {
  std::string op;                 // "softmax" | "log_softmax" | "softmax_backward" | "log_softmax_backward"
  std::vector<TensorSpec> inputs; // {x} or {grad_out, y}; one shape for all operands
  int64_t axis = -1;              // negative counts from the end
  TensorSpec out;
  bool operator==(const SoftmaxDescriptor& o) const {
    return op == o.op && inputs == o.inputs && axis == o.axis && out == o.out;
  }
  std::string str() const;
};

class SoftmaxPlan {
 public:
  // Validates everything knowable without data (op, dtypes, shapes, axis, overlapping out)
  // and picks a kernel. Needs no GPU.
  static SoftmaxPlan select(const SoftmaxDescriptor& desc, const PlanPreference& pref = PlanPreference{});
  const KernelSku& sku() const;
  const SoftmaxDescriptor& descriptor() const;
  int64_t workspace_bytes() const { return 0; }
  // Checks the tensors against the descriptor and launches on `stream`. out may be an input
  // itself (same shape and strides: in place); any other overlap is refused. Never
  // allocates, never synchronizes.
  void run(const TensorView& out, const TensorView* inputs, int num_inputs, StreamHandle stream = nullptr) const;
  void run(const TensorView& out, const std::vector<TensorView>& inputs, StreamHandle stream = nullptr) const {
    run(out, inputs.data(), int(inputs.size()), stream);
  }

  struct Impl;
  SoftmaxPlan(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
 private:
  std::shared_ptr<const Impl> impl_;
};

FamilyInfo softmax_family_info();

}  // namespace baracuda
