// The mixture-of-experts routing family: gating (which experts, with which weights), the token
// permutation into expert-contiguous order the grouped GEMM takes, and the weighted combine back.
//
//   gate        logits [T, E] (float32 / float16 / bfloat16), correction_bias? [E] float32
//               -> weights [T, k] float32, ids [T, k] int32 / int64
//     scores s = softmax(logits) over E ("softmax") or sigmoid(logits) ("sigmoid"), in float32;
//     selection on s + correction_bias (DeepSeek-V3's bias: selection only, never in the weights);
//     grouped (n_group > 1, DeepSeek): the experts split into n_group contiguous groups, each scored
//     by its best selection score ("max") or the sum of its best two ("top2_sum"), the topk_group
//     best groups kept, then top-k among their experts. The k ids in descending selection order
//     (ties: the lower expert id first). weights = s[ids] (divided by their sum with renormalize:
//     softmax then top-k then renormalize is top-k then softmax), times routed_scaling_factor.
//   gate backward   logits, ids, grad_weights [T, k] float32 -> grad_logits [T, E] (logits' dtype);
//     the correction bias gets no gradient.
//
//   permute     x [T, H], ids [T, k] -> x_sorted [T * k, H], offsets [E + 1], pos [T, k] int32
//     Pairs (t, j) in expert order, stable (by t * k + j within an expert): expert e owns rows
//     offsets[e] .. offsets[e + 1] of x_sorted, row pos[t, j] = the copy of x[t] for pair (t, j).
//     An id outside [0, E) (a token routed to another rank's experts) is dropped: pos = -1, its row
//     after offsets[E] is left unwritten. offsets int32 / int64 (what grouped_linear takes).
//   unpermute   y_sorted [N, H], pos [T, k], weights? [T, k] float32 -> out [T, H]
//     out[t] = sum over j of weights[t, j] * y_sorted[pos[t, j]] (1 without weights), j in order,
//     float32 accumulation; pos < 0 (dropped) or >= N adds nothing. Also permute's backward
//     (grad_x from grad_x_sorted, no weights).
//   unpermute backward   grad_out [T, H], pos, weights?, y_sorted (with weights) ->
//     grad_y_sorted [N, H] (row pos[t, j] = weights[t, j] * grad_out[t]; rows no pair names are
//     zeroed), grad_weights [T, k] float32 (dot(grad_out[t], y_sorted[pos[t, j]]), with weights).
//
// Everything on the device is read where it lies: no host sync, graph-capturable; the permute's
// sort needs a workspace (workspace_bytes()).
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "baracuda/plan.h"
#include "baracuda/registry.h"
#include "baracuda/tensor.h"

namespace baracuda {

struct MoeGateDescriptor {
  bool backward = false;
  TensorSpec logits;  // [T, E]
  int64_t top_k = 2;
  std::string scoring = "softmax";  // "softmax" | "sigmoid"
  bool renormalize = true;
  int64_t n_group = 1, topk_group = 1;
  std::string group_score = "max";  // "max" | "top2_sum"
  bool correction_bias = false;     // float32 [E]
  double routed_scaling_factor = 1.0;
  DType ids_dtype = DType::Int32;
  bool operator==(const MoeGateDescriptor& o) const {
    return backward == o.backward && logits == o.logits && top_k == o.top_k && scoring == o.scoring &&
           renormalize == o.renormalize && n_group == o.n_group && topk_group == o.topk_group &&
           group_score == o.group_score && correction_bias == o.correction_bias &&
           routed_scaling_factor == o.routed_scaling_factor && ids_dtype == o.ids_dtype;
  }
  std::string str() const;
};

struct MoeGateTensors {
  TensorView logits, correction_bias, weights, ids, grad_weights, grad_logits;
};

class MoeGatePlan {
 public:
  static MoeGatePlan select(const MoeGateDescriptor& desc, const PlanPreference& pref = PlanPreference{});
  const KernelSku& sku() const;
  const MoeGateDescriptor& descriptor() const;
  int64_t workspace_bytes() const { return 0; }
  void run(const MoeGateTensors& t, void* workspace = nullptr, int64_t workspace_size = 0,
           StreamHandle stream = nullptr) const;

  struct Impl;
  MoeGatePlan(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
 private:
  std::shared_ptr<const Impl> impl_;
};

struct MoePermuteDescriptor {
  std::string op = "permute";  // "permute" | "unpermute" | "unpermute_backward"
  int64_t num_experts = 0;     // permute
  TensorSpec rows;             // permute: x [T, H]; unpermute: y_sorted [N, H]; backward: grad_out [T, H]
  TensorSpec routing;          // permute: ids [T, k] (int32 / int64); else pos [T, k] int32
  bool weights = false;        // unpermute / backward: weights [T, k] float32
  int64_t sorted_rows = -1;    // unpermute_backward: N, the rows of y_sorted / grad_y_sorted (-1: T * k)
  DType offsets_dtype = DType::Int32;
  bool operator==(const MoePermuteDescriptor& o) const {
    return op == o.op && num_experts == o.num_experts && rows == o.rows && routing == o.routing &&
           weights == o.weights && sorted_rows == o.sorted_rows && offsets_dtype == o.offsets_dtype;
  }
  std::string str() const;
};

struct MoePermuteTensors {
  TensorView x, ids, x_sorted, offsets, pos;                      // permute
  TensorView y_sorted, weights, out;                              // unpermute (pos too)
  TensorView grad_out, grad_y_sorted, grad_weights;               // unpermute_backward (pos, weights, y_sorted)
};

class MoePermutePlan {
 public:
  static MoePermutePlan select(const MoePermuteDescriptor& desc, const PlanPreference& pref = PlanPreference{});
  const KernelSku& sku() const;
  const MoePermuteDescriptor& descriptor() const;
  // The permute's sort buffers; 0 for the others.
  int64_t workspace_bytes() const;
  void run(const MoePermuteTensors& t, void* workspace = nullptr, int64_t workspace_size = 0,
           StreamHandle stream = nullptr) const;

  struct Impl;
  MoePermutePlan(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
 private:
  std::shared_ptr<const Impl> impl_;
};

FamilyInfo moe_family_info();

}  // namespace baracuda
