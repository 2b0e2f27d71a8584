// Internal to the loss family: the row losses (loss_rows.cpp) and the resolution of `wrt`
// (which gradients a backward plan writes), shared with the pointwise losses of loss.cpp.
#pragma once
#include <string>
#include <vector>

#include "baracuda/loss.h"
#include "loss/row_launch.h"

namespace baracuda {

// One gradient a backward plan writes: the operand slot it differentiates and its spec.
struct GradRequest {
  int slot = 0;
  std::string name;  // as the caller named it
  TensorSpec spec;
};
// desc.wrt / desc.grads resolved against the op's operands: slot_names[k] are the names operand k
// answers to ("input" first), slot_specs[k] its spec (nullptr: absent, or not differentiable).
// Throws InvalidArgument / InvalidDType naming the entry at fault.
std::vector<GradRequest> resolve_wrt(const LossDescriptor& desc, const std::vector<std::vector<std::string>>& slot_names,
                                     const std::vector<const TensorSpec*>& slot_specs);
// The gradient tensors of a run, in wrt order (grad_input when the descriptor has no wrt).
std::vector<const TensorView*> grad_views(const LossDescriptor& desc, const LossTensors& t);
// Tensors the plan was selected without are refused, not ignored: a weight the kernels would
// not apply, a gradient buffer they would not write, an upstream gradient they would not read.
void check_unselected(const std::string& op, const LossTensors& t, bool weight, bool grad_input, bool grad_loss);

bool is_row_loss(const std::string& base);
extern const char* const kRowLossNames[5];
// Validates a row-loss descriptor (base: the op without "_backward") and fills the launch, the
// SKU and the workspace size.
void select_row_loss(const LossDescriptor& desc, const std::string& base, loss::RowLaunch& L,
                     std::vector<GradRequest>& grads, KernelSku& sku, int64_t& workspace);
void run_row_loss(const LossDescriptor& desc, const loss::RowLaunch& L, const std::vector<GradRequest>& grads,
                  int64_t workspace_need, const LossTensors& t, void* workspace, int64_t workspace_size,
                  StreamHandle stream);
void add_row_loss_ops(FamilyInfo& f);

}  // namespace baracuda
