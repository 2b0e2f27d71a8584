// The loss family: cross-entropy over logits [N, V] (large vocabularies), forward (with an
// optional fused gradient) and backward from the saved per-row logsumexp; nll_loss; and the
// pointwise losses (torch.nn.functional's semantics, each with none / mean / sum and backward):
//
//   op                                  operands (descriptor fields)                      param
//   mse_loss, l1_loss                   input, target (broadcast)                         -
//   huber_loss / smooth_l1_loss         input, target                                     delta / beta
//   binary_cross_entropy                input, target (same shape), weight?               -
//   binary_cross_entropy_with_logits    input, target (same shape), weight?, extra=[pos_weight]?
//   kl_div                              input (log-probs), target; log_target; also "batchmean"
//   poisson_nll_loss                    input, target; log_input, full                    eps
//   gaussian_nll_loss                   input, target, extra=[var]; full                  eps
//   margin_ranking_loss                 input (input1), extra=[input2], target            margin
//   hinge_embedding_loss                input, target                                     margin
//   soft_margin_loss                    input, target                                     -
//   nll_loss                            input [N, C] log-probs, target [N] int, weight? [C], ignore_index
//
// "<op>_backward" writes the gradient w.r.t. input (grad_input, input's shape) from grad_loss
// (shape [] for mean / sum, the broadcast shape for none). Every mean / sum is reduced in an
// order fixed by the plan (no float atomics).
//
//   loss_i = (1 - eps) * w[t_i] * (lse_i - x[i, t_i]) + eps / V * sum_c w_c * (lse_i - x[i, c])
//   mean = sum_i loss_i / sum_i w[t_i]   (rows with t_i == ignore_index count 0 in both), as torch.
//
// A target outside [0, V) that is not ignore_index makes that row's loss and gradient NaN (and
// so a mean / sum); select() cannot see it and run() never reads out of bounds.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "baracuda/plan.h"
#include "baracuda/registry.h"
#include "baracuda/tensor.h"

namespace baracuda {

struct LossDescriptor {
  std::string op;               // "cross_entropy" | "cross_entropy_backward"
  TensorSpec input;             // logits [N, V]; unit stride along V
  TensorSpec target;            // [N] int64 or int32
  bool has_weight = false;
  TensorSpec weight;            // [V], logits dtype
  std::string reduction = "mean";  // "none" | "mean" | "sum"
  int64_t ignore_index = -100;
  double label_smoothing = 0.0;
  bool with_grad = false;       // cross_entropy: also write grad_input in the same call
  bool has_grad_loss = false;   // upstream gradient given ([] for mean / sum, [N] for none); else 1
  TensorSpec grad_input;        // spec of the gradient output (with_grad / backward): [N, V], logits dtype
  // Pointwise losses (see the table above).
  std::vector<TensorSpec> extra;  // pos_weight / var / input2
  double param = 0.0;             // delta, beta, margin or eps
  bool log_target = false;        // kl_div
  bool log_input = true;          // poisson_nll_loss
  bool full = false;              // poisson_nll_loss, gaussian_nll_loss
  TensorSpec grad_loss;           // pointwise / nll backward: spec of grad_loss ([] for mean / sum)
  bool operator==(const LossDescriptor& o) const {
    return op == o.op && input == o.input && target == o.target && has_weight == o.has_weight &&
           (!has_weight || weight == o.weight) && reduction == o.reduction && ignore_index == o.ignore_index &&
           label_smoothing == o.label_smoothing && with_grad == o.with_grad && has_grad_loss == o.has_grad_loss &&
           ((!with_grad && op == "cross_entropy") || grad_input == o.grad_input) && extra == o.extra &&
           param == o.param && log_target == o.log_target && log_input == o.log_input && full == o.full &&
           (!has_grad_loss || grad_loss == o.grad_loss);
  }
  std::string str() const;
};

// The tensors of one run. Absent optional operands have data == nullptr.
struct LossTensors {
  TensorView input, target, weight, grad_loss;
  std::vector<TensorView> extra;  // pointwise: pos_weight / var / input2, as in the descriptor
  TensorView out;         // forward: the loss ([] for mean / sum, [N] / the broadcast shape (contiguous) for
                          // none), input dtype
  TensorView lse;         // cross_entropy: [N] f32 (f64 for f64 logits): written by forward, read by backward
  TensorView grad_input;  // with_grad / backward
};

class LossPlan {
 public:
  static LossPlan select(const LossDescriptor& desc, const PlanPreference& pref = PlanPreference{});
  const KernelSku& sku() const;
  const LossDescriptor& descriptor() const;
  int64_t workspace_bytes() const;  // 256-byte aligned scratch run() needs
  void run(const LossTensors& t, void* workspace, int64_t workspace_size, StreamHandle stream = nullptr) const;

  struct Impl;
  LossPlan(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
 private:
  std::shared_ptr<const Impl> impl_;
};

FamilyInfo loss_family_info();

}  // namespace baracuda
