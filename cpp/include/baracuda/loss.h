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
// Row losses (one sample per row of [N, D] / [N, C], or a single sample [D]; none gives [N] / []):
//   cosine_embedding_loss               input (input1), extra=[input2], target [N] (+1 / -1;      margin
//                                       int or input's dtype)
//   multi_margin_loss                   input [N, C], target [N] int, weight? [C]; p (1 or 2)      margin
//   multilabel_margin_loss              input [N, C], target [N, C] int (class indices, the first
//                                       negative ends the list)
//   multilabel_soft_margin_loss         input [N, C], target [N, C] (input's dtype), weight? [C]
//   triplet_margin_loss                 input (anchor), target (positive), extra=[negative];      margin
//                                       p (norm degree > 0), eps, swap
//
// "<op>_backward" writes gradients from grad_loss (shape [] for mean / sum, the loss's shape for
// none): by default w.r.t. input only (grad_input, input's shape); `wrt` names the operands to
// differentiate, as torch names them ("input", "target", "input1", "input2", "var", "anchor",
// "positive", "negative"; "input" is always the first operand), and `grads` gives the spec of
// each gradient in the same order (LossTensors::grads the tensors). A gradient w.r.t. a
// broadcast operand is summed to its shape. Every mean / sum and every broadcast gradient is
// reduced in an order fixed by the plan (no float atomics).
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
#include <variant>
#include <vector>

#include "baracuda/plan.h"
#include "baracuda/registry.h"
#include "baracuda/tensor.h"

namespace baracuda {

// A loss is described by the descriptor of its kind (the three below, and CtcLossDescriptor); each
// holds only what its kind reads. "<op>_backward" of each describes the gradient (see above).

// cross_entropy over logits [N, V] and nll_loss over log-probabilities [N, C]; class-index targets.
struct CrossEntropyLossDescriptor {
  std::string op = "cross_entropy";  // cross_entropy | cross_entropy_backward | nll_loss | nll_loss_backward
  TensorSpec input;                  // [N, V] (cross_entropy: unit stride along V)
  TensorSpec target;                 // [N] int64 or int32
  bool has_weight = false;
  TensorSpec weight;                 // [V], input's dtype
  std::string reduction = "mean";    // "none" | "mean" | "sum"
  int64_t ignore_index = -100;
  double label_smoothing = 0.0;      // cross_entropy
  bool with_grad = false;            // cross_entropy: also write grad_input in the same call
  bool has_grad_loss = false;        // upstream gradient given ([] for mean / sum, [N] for none); else 1
  TensorSpec grad_loss;              // nll_loss_backward: its spec ([] for mean / sum)
  TensorSpec grad_input;             // with_grad / backward: [N, V], input's dtype
  bool operator==(const CrossEntropyLossDescriptor& o) const {
    return op == o.op && input == o.input && target == o.target && has_weight == o.has_weight &&
           (!has_weight || weight == o.weight) && reduction == o.reduction && ignore_index == o.ignore_index &&
           label_smoothing == o.label_smoothing && with_grad == o.with_grad && has_grad_loss == o.has_grad_loss &&
           ((!with_grad && op == "cross_entropy") || grad_input == o.grad_input) &&
           (!has_grad_loss || grad_loss == o.grad_loss);
  }
  std::string str() const;
};

// The pointwise losses of the table above (mse_loss ... soft_margin_loss): input, target and the
// extra operand broadcast together.
struct PointwiseLossDescriptor {
  std::string op;                    // e.g. "mse_loss", "huber_loss_backward"
  TensorSpec input, target;
  bool has_weight = false;
  TensorSpec weight;                 // binary_cross_entropy(_with_logits)
  std::vector<TensorSpec> extra;     // [pos_weight] / [var] / [input2]
  std::string reduction = "mean";    // "none" | "mean" | "sum" (kl_div also "batchmean")
  double param = 0.0;                // delta, beta, margin or eps
  bool log_target = false;           // kl_div
  bool log_input = true;             // poisson_nll_loss
  bool full = false;                 // poisson_nll_loss, gaussian_nll_loss
  bool has_grad_loss = false;
  TensorSpec grad_loss;              // backward: the upstream gradient's spec ([] for mean / sum)
  TensorSpec grad_input;             // backward without wrt: input's shape and dtype
  // Backward: the operands to differentiate by name (empty: {"input"}), and each gradient's spec.
  std::vector<std::string> wrt;
  std::vector<TensorSpec> grads;
  bool operator==(const PointwiseLossDescriptor& o) const {
    return op == o.op && input == o.input && target == o.target && has_weight == o.has_weight &&
           (!has_weight || weight == o.weight) && extra == o.extra && reduction == o.reduction && param == o.param &&
           log_target == o.log_target && log_input == o.log_input && full == o.full &&
           has_grad_loss == o.has_grad_loss && (!has_grad_loss || grad_loss == o.grad_loss) &&
           grad_input == o.grad_input && wrt == o.wrt && grads == o.grads;
  }
  std::string str() const;
};

// The row losses of the table above (cosine_embedding_loss ... triplet_margin_loss): one sample
// per row.
struct RowLossDescriptor {
  std::string op;                    // e.g. "multi_margin_loss", "triplet_margin_loss_backward"
  TensorSpec input, target;
  bool has_weight = false;
  TensorSpec weight;                 // [C]: multi_margin_loss, multilabel_soft_margin_loss
  std::vector<TensorSpec> extra;     // [input2] / [negative]
  std::string reduction = "mean";    // "none" | "mean" | "sum"
  double margin = 0.0;
  double p = 2.0;                    // multi_margin_loss: 1 or 2; triplet_margin_loss: the norm degree
  double eps = 1e-6;                 // triplet_margin_loss
  bool swap = false;                 // triplet_margin_loss
  bool has_grad_loss = false;
  TensorSpec grad_loss;              // backward: the upstream gradient's spec ([] for mean / sum)
  TensorSpec grad_input;             // backward without wrt: input's shape and dtype
  std::vector<std::string> wrt;      // as PointwiseLossDescriptor's
  std::vector<TensorSpec> grads;
  bool operator==(const RowLossDescriptor& o) const {
    return op == o.op && input == o.input && target == o.target && has_weight == o.has_weight &&
           (!has_weight || weight == o.weight) && extra == o.extra && reduction == o.reduction &&
           margin == o.margin && p == o.p && eps == o.eps && swap == o.swap && has_grad_loss == o.has_grad_loss &&
           (!has_grad_loss || grad_loss == o.grad_loss) && grad_input == o.grad_input && wrt == o.wrt &&
           grads == o.grads;
  }
  std::string str() const;
};

using AnyLossDescriptor = std::variant<CrossEntropyLossDescriptor, PointwiseLossDescriptor, RowLossDescriptor>;

// Which descriptor an op name (with or without "_backward") belongs to; Unknown for none.
enum class LossKind { CrossEntropy, Pointwise, Row, Unknown };
LossKind loss_kind(const std::string& op);

// The tensors of one run. Absent optional operands have data == nullptr.
struct LossTensors {
  TensorView input, target, weight, grad_loss;
  std::vector<TensorView> extra;  // pointwise: pos_weight / var / input2, as in the descriptor
  TensorView out;         // forward: the loss ([] for mean / sum, [N] / the broadcast shape (contiguous) for
                          // none), input dtype
  TensorView lse;         // cross_entropy: [N] f32 (f64 for f64 logits): written by forward, read by backward
  TensorView grad_input;  // with_grad / backward
  std::vector<TensorView> grads;  // backward with desc.wrt: one per wrt entry (grad_input is then unused)
};

class LossPlan {
 public:
  static LossPlan select(const CrossEntropyLossDescriptor& desc, const PlanPreference& pref = PlanPreference{});
  static LossPlan select(const PointwiseLossDescriptor& desc, const PlanPreference& pref = PlanPreference{});
  static LossPlan select(const RowLossDescriptor& desc, const PlanPreference& pref = PlanPreference{});
  static LossPlan select(const AnyLossDescriptor& desc, const PlanPreference& pref = PlanPreference{});
  const KernelSku& sku() const;
  const AnyLossDescriptor& descriptor() const;  // the one it was selected from
  const std::string& op() const;
  int64_t workspace_bytes() const;  // 256-byte aligned scratch run() needs
  void run(const LossTensors& t, void* workspace, int64_t workspace_size, StreamHandle stream = nullptr) const;

  struct Impl;
  LossPlan(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
 private:
  std::shared_ptr<const Impl> impl_;
};

FamilyInfo loss_family_info();

// ---- CTC loss (torch.nn.functional.ctc_loss semantics) -----------------------------------------
//
//   ctc_loss(log_probs [T, N, C], targets [N, S] padded or [sum(target_lengths)] concatenated,
//            input_lengths [N], target_lengths [N], blank, reduction, zero_infinity)
//
// Per sample n: loss_n = -log p(l_n | x_n), the sum over alignments of the first input_lengths[n]
// steps (log-space alpha recursion over the extended labels: blank, l_1, blank, ..., blank).
// none: [N]; sum: sum_n loss_n; mean: mean_n of loss_n / max(target_lengths[n], 1).
// zero_infinity: an infinite loss (no alignment exists) and its gradient become 0.
// The forward saves log_alpha [N, T, 2 S + 1] (f32; f64 for f64 log_probs), which the backward
// reads. The backward ("ctc_loss_backward") writes grad_log_probs [T, N, C] with torch's
// formula: exp(lp) - posterior(c) / p, times the reduction's scale, for t < input_lengths[n]
// (the gradient w.r.t. the inputs of a log_softmax that produced log_probs, as torch's), 0 past
// it. Lengths and targets live on the device, so select() cannot see them: an invalid sample
// (input length outside [0, T], target length outside [0, S], a label outside [0, C),
// concatenated lengths that do not add up to targets' length) gets a NaN loss and NaN
// gradients, and nothing is read out of bounds. S is targets.shape[1] for padded targets (or
// max_target_length, when given and smaller); for concatenated targets max_target_length is
// required (a bound on every target length).
struct CtcLossDescriptor {
  std::string op = "ctc_loss";     // "ctc_loss" | "ctc_loss_backward"
  TensorSpec log_probs;            // [T, N, C] f16 / bf16 / f32 / f64, any strides
  TensorSpec targets;              // [N, S] or [sum(target_lengths)], int32 / int64
  TensorSpec input_lengths;        // [N] int32 / int64
  TensorSpec target_lengths;       // [N] int32 / int64
  int64_t blank = 0;
  std::string reduction = "mean";  // "none" | "mean" | "sum"
  bool zero_infinity = false;
  int64_t max_target_length = -1;  // -1: targets.shape[1] (padded); required for concatenated targets
  TensorSpec grad_loss;            // backward: [] for mean / sum, [N] for none; log_probs' dtype
  TensorSpec grad_log_probs;       // backward: [T, N, C], log_probs' dtype, non-overlapping
  bool operator==(const CtcLossDescriptor& o) const {
    const bool bwd = op == "ctc_loss_backward";
    return op == o.op && log_probs == o.log_probs && targets == o.targets && input_lengths == o.input_lengths &&
           target_lengths == o.target_lengths && blank == o.blank && reduction == o.reduction &&
           zero_infinity == o.zero_infinity && max_target_length == o.max_target_length &&
           (!bwd || (grad_loss == o.grad_loss && grad_log_probs == o.grad_log_probs));
  }
  std::string str() const;
};

// The tensors of one run (absent ones: data == nullptr).
struct CtcLossTensors {
  TensorView log_probs, targets, input_lengths, target_lengths;
  TensorView log_alpha;       // [N, T, 2 S + 1] contiguous, log_alpha_dtype(): forward writes, backward reads
  TensorView out;             // forward: the loss, [] (mean / sum) or [N] (none), log_probs' dtype
  TensorView grad_loss;       // backward
  TensorView grad_log_probs;  // backward
};

class CtcLossPlan {
 public:
  static CtcLossPlan select(const CtcLossDescriptor& desc, const PlanPreference& pref = PlanPreference{});
  const KernelSku& sku() const;
  const CtcLossDescriptor& descriptor() const;
  int64_t workspace_bytes() const;                // 256-byte aligned scratch run() needs
  std::vector<int64_t> log_alpha_shape() const;   // [N, T, 2 S + 1]
  DType log_alpha_dtype() const;                  // f32 (f64 for f64 log_probs)
  void run(const CtcLossTensors& t, void* workspace, int64_t workspace_size, StreamHandle stream = nullptr) const;

  struct Impl;
  CtcLossPlan(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
 private:
  std::shared_ptr<const Impl> impl_;
};

// The CTC rows of the loss family's registry entry (loss_family_info() appends them).
void append_ctc_loss_coverage(FamilyInfo& f);

}  // namespace baracuda
