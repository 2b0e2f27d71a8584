// The norm family: RMSNorm and LayerNorm over the last dimension, forward (optionally fused
// with a residual add, optionally saving the statistics) and backward.
//
//   forward:  h = x (+ residual; written to residual_out)      rows = x.shape[:-1], H = x.shape[-1]
//             rms_norm:   y = h * rstd * weight,           rstd = 1 / sqrt(mean(h^2) + eps)
//             layer_norm: y = (h - mean) * rstd * weight + bias,  rstd = 1 / sqrt(var(h) + eps)
//             (var is the biased variance, computed in two passes over the row held in registers)
//   backward: grad_x (+= grad_residual when given), grad_weight, grad_bias, from the saved stats.
//
// One descriptor names the op and the operand specs; select() validates it and picks a kernel;
// run() checks the tensors against the descriptor and launches.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "baracuda/plan.h"
#include "baracuda/registry.h"
#include "baracuda/tensor.h"

namespace baracuda {

// op: "rms_norm" | "layer_norm" | "rms_norm_backward" | "layer_norm_backward".
//
// x: [..., H]. The last dim must have unit stride; the leading dims must address rows with one
// row stride (a contiguous tensor, or a slice of the last dim of a wider one, e.g. big[..., :H]).
// Every other row tensor (y, residual, residual_out, grad_out, grad_x, grad_residual) has x's
// shape and dtype and may have its own row stride, checked at run().
// weight / bias: dtype of [H] weight / bias (x's dtype or float32); nullopt = absent. In the
// backward ops they say whether grad_weight / grad_bias are computed, and their dtype.
// residual: forward: a residual is added first (h = x + residual, rounded once to x's dtype,
// written to residual_out, and normalized); backward: grad_residual (the gradient arriving at
// residual_out) is added to grad_x.
// save_stats (forward only): write rstd (and mean, layer_norm) as [rows] float32 (float64 for
// float64 x), contiguous: the backward ops' inputs. Without it the forward writes no stats.
struct NormDescriptor {
  std::string op;
  TensorSpec x;
  std::optional<DType> weight;
  std::optional<DType> bias;
  bool residual = false;
  double eps = 1e-6;
  bool save_stats = false;
  bool operator==(const NormDescriptor& o) const {
    return op == o.op && x == o.x && weight == o.weight && bias == o.bias && residual == o.residual &&
           eps == o.eps && save_stats == o.save_stats;
  }
  std::string str() const;
};

// The tensors of one run. A view with a null data pointer is absent. Forward uses y, x, weight,
// bias, residual, residual_out, mean, rstd; backward uses grad_x, grad_out, x, mean, rstd,
// weight, grad_residual, grad_weight, grad_bias.
struct NormTensors {
  TensorView y, x, weight, bias, residual, residual_out, mean, rstd;
  TensorView grad_out, grad_x, grad_residual, grad_weight, grad_bias;
};

class NormPlan {
 public:
  // Validates everything knowable without data; throws InvalidArgument / InvalidDType /
  // Unsupported naming the reason. Needs no GPU.
  static NormPlan select(const NormDescriptor& desc, const PlanPreference& pref = PlanPreference{});
  const KernelSku& sku() const;
  const NormDescriptor& descriptor() const;
  // Backward with grad_weight or grad_bias: the [partials, H] partial sums (fixed-order
  // two-stage column reduction). 0 otherwise.
  int64_t workspace_bytes() const;
  // Checks the tensors against the descriptor (shapes, dtypes, unit column stride, devices,
  // aliasing, workspace) and launches on `stream`. Never allocates, never synchronizes.
  // In place: y may be x itself, residual_out may be residual itself (same view); any other
  // overlap between an output and another operand is refused.
  void run(const NormTensors& t, void* workspace = nullptr, int64_t workspace_size = 0,
           StreamHandle stream = nullptr) const;

  struct Impl;
  NormPlan(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
 private:
  std::shared_ptr<const Impl> impl_;
};

FamilyInfo norm_family_info();

}  // namespace baracuda
