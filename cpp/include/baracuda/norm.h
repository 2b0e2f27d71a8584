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

// ---- GroupNorm / InstanceNorm / BatchNorm ---------------------------------------------------------
// op: "group_norm" | "instance_norm" | "batch_norm" and their "_backward" ops
// (torch.nn.functional semantics). x: [N, C, *spatial] (rank >= 2), viewed as [N, C, S].
//
//   group_norm:    stats per (n, group) over C / num_groups channels x S (biased variance);
//                  y = (x - mean) * rstd * weight[c] + bias[c]. Saved stats: [N, G].
//   instance_norm: group_norm with one group per channel (saved stats [N, C]). training =
//                  use_input_stats: with running stats given, they are updated in place with the
//                  mean over n of the per-instance mean and unbiased variance (torch's rule).
//                  training = false normalizes with running_mean / running_var (as batch_norm
//                  inference does; no saved stats).
//   batch_norm:    training: stats per channel over N x S, saved stats [C]; running stats (when
//                  given) updated in place: r = (1 - momentum) * r + momentum * s, running_var
//                  with the unbiased variance. Inference (training = false): y from running_mean
//                  / running_var (no reduction).
//   *_backward:    grad_x, and grad_weight / grad_bias when weight / bias are given (their dtypes
//                  name the gradients' dtypes), from the saved mean / rstd; batch_norm_backward
//                  with training = false uses running_mean / running_var instead
//                  (grad_x = grad_out * weight * rsqrt(running_var + eps)).
//
// Layouts: x must have unit spatial stride (contiguous NC*, "planes" kernels) or unit channel
// stride (channels-last NHWC / NDHWC memory, "columns" kernels); the spatial dims must collapse
// to one stride. y / grad_out / grad_x have x's shape and dtype and any layout whose spatial dims
// collapse (either of the two above runs at full speed). weight / bias / running stats: [C],
// contiguous, x's dtype or float32. Saved stats: float32 (float64 for float64 x), contiguous.
// Every statistic is computed in float32 (float64 for float64) with a fixed summation order.
struct ChannelNormDescriptor {
  std::string op;
  TensorSpec x;
  int64_t num_groups = 0;           // group_norm(_backward): G >= 1 dividing C; 0 for the others
  std::optional<DType> weight;
  std::optional<DType> bias;
  std::optional<DType> running;     // dtype of running_mean and running_var (both or neither)
  bool training = true;
  double momentum = 0.1;
  double eps = 1e-5;
  bool save_stats = false;          // forward with batch statistics: write mean / rstd
  bool operator==(const ChannelNormDescriptor& o) const {
    return op == o.op && x == o.x && num_groups == o.num_groups && weight == o.weight && bias == o.bias &&
           running == o.running && training == o.training && momentum == o.momentum && eps == o.eps &&
           save_stats == o.save_stats;
  }
  std::string str() const;
};

// The tensors of one run (null data = absent). Forward: y, x, weight, bias, running_mean,
// running_var (in / out), mean, rstd (out). Backward: grad_x, grad_out, x, mean, rstd (or
// running_mean / running_var), weight, grad_weight, grad_bias.
struct ChannelNormTensors {
  TensorView y, x, weight, bias, running_mean, running_var, mean, rstd;
  TensorView grad_out, grad_x, grad_weight, grad_bias;
};

class ChannelNormPlan {
 public:
  static ChannelNormPlan select(const ChannelNormDescriptor& desc, const PlanPreference& pref = PlanPreference{});
  const KernelSku& sku() const;
  const ChannelNormDescriptor& descriptor() const;
  // Partial sums, the per-(n, c) coefficient table and per-(n, c) scratch (0 for empty x).
  int64_t workspace_bytes() const;
  // In place: y may be x, grad_x may be grad_out (same views); no other overlap.
  void run(const ChannelNormTensors& t, void* workspace = nullptr, int64_t workspace_size = 0,
           StreamHandle stream = nullptr) const;

  struct Impl;
  ChannelNormPlan(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
 private:
  std::shared_ptr<const Impl> impl_;
};

FamilyInfo norm_family_info();

}  // namespace baracuda
