// The softmax family: softmax and log-softmax along any axis, forward and backward.
//
//   forward   inputs = {x},           out = y
//   backward  inputs = {grad_out, y}, out = grad_x   (y: the forward's output)
//
// softmax_backward:     gx = y * (gy - sum(gy * y))
// log_softmax_backward: gx = gy - exp(y) * sum(gy)
//
// Also in this family (kernels in cuda/softmax/gumbel.cuh, sparsemax.cuh):
//
//   gumbel_softmax           inputs = {x},              out = y, optional soft_out = y_soft
//       y_soft = softmax((x + g) / tau), g = -log(-log(u)) i.i.d. Gumbel(0, 1) noise keyed by
//       (seed, offset, the element's row-major index in the shape): the same for any layout,
//       launch geometry or replay (Philox-4x32-10, cuda/common/philox.cuh). seed and offset are
//       run-time arguments (SoftmaxRunArgs), not part of the descriptor. hard = true: y is the
//       one-hot (exact 0 / 1) of the first maximum of y_soft as rounded to the dtype (torch's
//       straight-through forward value, which torch computes as y_hard - y_soft + y_soft).
//   gumbel_softmax_backward  inputs = {grad_out, y_soft}, out = grad_x
//       gx = y_soft * (gy - sum(gy * y_soft)) / tau (for hard, the straight-through gradient
//       with respect to y_soft).
//   gumbel_noise             inputs = {},               out = g (f32 or f64)
//       the noise gumbel_softmax adds: f32 for f16 / bf16 / f32 logits, f64 for f64 logits.
//   sparsemax                inputs = {x},              out = y = max(x - t, 0), sum(y) = 1
//   sparsemax_backward       inputs = {grad_out, y},    out = grad_x = [y > 0] (gy - mean_{y > 0} gy)
//
// gumbel_softmax and sparsemax: a row holding NaN or +inf, or only -inf, is NaN.
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
                                  // | "gumbel_softmax" | "gumbel_softmax_backward" | "gumbel_noise"
                                  // | "sparsemax" | "sparsemax_backward"
  std::vector<TensorSpec> inputs; // {x} or {grad_out, y}; one shape for all operands ({} for gumbel_noise)
  int64_t axis = -1;              // negative counts from the end
  TensorSpec out;
  double tau = 1.0;               // gumbel_softmax(_backward): temperature, finite and > 0
  bool hard = false;              // gumbel_softmax: out is the one-hot of the argmax
  std::vector<TensorSpec> soft_out;  // gumbel_softmax: {} or {y_soft spec}, a second output
  bool operator==(const SoftmaxDescriptor& o) const {
    return op == o.op && inputs == o.inputs && axis == o.axis && out == o.out && tau == o.tau && hard == o.hard &&
           soft_out == o.soft_out;
  }
  std::string str() const;
};

// Per-run arguments of the random ops (gumbel_softmax, gumbel_noise): the noise field is
// (seed, offset); use a new offset (or seed) for every fresh draw. soft_out: gumbel_softmax's
// second output when the descriptor has one.
struct SoftmaxRunArgs {
  bool has_seed = false;
  uint64_t seed = 0;
  uint64_t offset = 0;
  const TensorView* soft_out = nullptr;
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
  // The same, with the seed / offset / second output of gumbel_softmax and gumbel_noise (which
  // refuse a run without a seed).
  void run(const TensorView& out, const TensorView* inputs, int num_inputs, const SoftmaxRunArgs& args,
           StreamHandle stream = nullptr) const;

  struct Impl;
  SoftmaxPlan(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
 private:
  std::shared_ptr<const Impl> impl_;
};

FamilyInfo softmax_family_info();

}  // namespace baracuda
