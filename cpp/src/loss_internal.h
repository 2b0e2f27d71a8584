// Internal to the loss family: what loss.cpp (the plan, cross-entropy, nll_loss) shares with the
// pointwise losses (loss_pointwise.cpp) and the row losses (loss_rows.cpp): the resolution of `wrt`
// (which gradients a backward plan writes), the common checks, and each sub-family's select / run.
#pragma once
#include <string>
#include <vector>

#include "baracuda/loss.h"
#include "loss/loss_launch.h"
#include "loss/row_launch.h"

namespace baracuda {

// What every loss kernel's select / run reads: the fields of the three public descriptors in one
// (a descriptor's absent fields at their defaults), built by LossPlan::select.
struct LossSpec {
  std::string op;
  TensorSpec input, target;
  bool has_weight = false;
  TensorSpec weight;
  std::string reduction = "mean";
  int64_t ignore_index = -100;
  double label_smoothing = 0.0;
  bool with_grad = false;
  bool has_grad_loss = false;
  TensorSpec grad_input;
  std::vector<TensorSpec> extra;
  double param = 0.0;  // delta, beta, margin or eps (a row loss's margin)
  bool log_target = false;
  bool log_input = true;
  bool full = false;
  TensorSpec grad_loss;
  double p = 2.0;
  double eps = 1e-6;
  bool swap = false;
  std::vector<std::string> wrt;
  std::vector<TensorSpec> grads;
};

// One gradient a backward plan writes: the operand slot it differentiates and its spec.
struct GradRequest {
  int slot = 0;
  std::string name;  // as the caller named it
  TensorSpec spec;
};
// desc.wrt / desc.grads resolved against the op's operands: slot_names[k] are the names operand k
// answers to ("input" first), slot_specs[k] its spec (nullptr: absent, or not differentiable).
// Throws InvalidArgument / InvalidDType naming the entry at fault.
std::vector<GradRequest> resolve_wrt(const LossSpec& desc, const std::vector<std::vector<std::string>>& slot_names,
                                     const std::vector<const TensorSpec*>& slot_specs);
// The gradient tensors of a run, in wrt order (grad_input when the descriptor has no wrt).
std::vector<const TensorView*> grad_views(const LossSpec& desc, const LossTensors& t);
// Tensors the plan was selected without are refused, not ignored: a weight the kernels would
// not apply, a gradient buffer they would not write, an upstream gradient they would not read.
void check_unselected(const std::string& op, const LossTensors& t, bool weight, bool grad_input, bool grad_loss);

bool is_float_dtype(DType t);
// "none" | "mean" | "sum" (| "batchmean" where allowed, a mean over input.size(0)); InvalidArgument
// naming `op` otherwise.
loss::Reduction parse_reduction(const std::string& op, const std::string& r, bool batchmean_ok);
// A small operand (out, a per-row vector): dtype, exact shape, data, device; errors name it.
void check_small(const std::string& op, const std::string& name, const TensorView& v, const std::vector<int64_t>& shape,
                 DType dt, int device);

// The pointwise losses (MSE, L1, Huber, BCE, KL, ...; base: the op without "_backward").
bool is_pointwise_loss(const std::string& base);
void append_pointwise_loss_names(std::string& list);  // ", mse_loss, l1_loss, ..."
// Validates the descriptor and fills the forward launch (or, for a backward, one launch per
// gradient in grad_launches), the gradients, the SKU and the workspace size.
void select_pointwise_loss(const LossSpec& desc, const std::string& base, loss::PwLaunch& launch,
                           std::vector<loss::PwLaunch>& grad_launches, std::vector<GradRequest>& grads, KernelSku& sku,
                           int64_t& workspace);
void run_pointwise_loss(const LossSpec& desc, const loss::PwLaunch& launch,
                        const std::vector<loss::PwLaunch>& grad_launches, const std::vector<GradRequest>& grads,
                        int64_t workspace_need, const LossTensors& t, void* workspace, int64_t workspace_size,
                        StreamHandle stream);
void add_pointwise_loss_ops(FamilyInfo& f);

bool is_row_loss(const std::string& base);
extern const char* const kRowLossNames[5];
// Validates a row-loss descriptor (base: the op without "_backward") and fills the launch, the
// SKU and the workspace size.
void select_row_loss(const LossSpec& desc, const std::string& base, loss::RowLaunch& L,
                     std::vector<GradRequest>& grads, KernelSku& sku, int64_t& workspace);
void run_row_loss(const LossSpec& desc, const loss::RowLaunch& L, const std::vector<GradRequest>& grads,
                  int64_t workspace_need, const LossTensors& t, void* workspace, int64_t workspace_size,
                  StreamHandle stream);
void add_row_loss_ops(FamilyInfo& f);

}  // namespace baracuda
