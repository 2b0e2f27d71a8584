// The embedding family: rows of a table gathered by index, and the table's gradient.
//
//   forward   out[i..., :] = weight[indices[i...], :]
//             weight [V, D] (float32 / float16 / bfloat16 / float64, D contiguous), indices int32 / int64
//             of any shape and strides (rank <= 8), out indices.shape + [D] (D contiguous). An index
//             outside [0, V) gives a NaN row: nothing is read out of bounds and nothing syncs (the
//             functional layer's check_indices=True turns it into a typed error, with a sync).
//   backward  grad_weight[v, :] = sum of grad_out[i..., :] over the i with indices[i...] == v,
//             v != padding_idx (divided by that count with scale_grad_by_freq); every row of
//             grad_weight is written (zeros for rows no index names). Indices outside [0, V) add
//             nothing.
//             deterministic (the default): the indices are sorted (CUB radix sort, stable), each
//             row's sum runs in index order through fixed chunks of the sorted list, so a run gives
//             the same bits every time; the accumulator is float32 (float64 for float64).
//             atomic: a scatter-add in grad_weight's dtype (16-bit pairs where aligned): fastest for
//             few repeats, but the sum's order (and its bits) vary from run to run; no
//             scale_grad_by_freq.
//
// padding_idx is -1 for none, else in [0, V) (the functional layer maps a negative one as torch does).
// max_norm (torch's in-place renormalisation of the table) is not supported.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "baracuda/plan.h"
#include "baracuda/registry.h"
#include "baracuda/tensor.h"

namespace baracuda {

struct EmbeddingDescriptor {
  bool backward = false;
  TensorSpec weight;   // the table [V, D]; for backward, grad_weight's spec
  TensorSpec indices;  // int32 / int64, any shape
  TensorSpec rows;     // out (forward) or grad_out (backward): indices.shape + [D]
  int64_t padding_idx = -1;
  bool scale_grad_by_freq = false;
  bool deterministic = true;
  bool operator==(const EmbeddingDescriptor& o) const {
    return backward == o.backward && weight == o.weight && indices == o.indices && rows == o.rows &&
           padding_idx == o.padding_idx && scale_grad_by_freq == o.scale_grad_by_freq &&
           deterministic == o.deterministic;
  }
  std::string str() const;
};

// forward: weight, indices -> out.  backward: grad_out, indices -> grad_weight.
struct EmbeddingTensors {
  TensorView weight, indices, out, grad_out, grad_weight;
};

class EmbeddingPlan {
 public:
  static EmbeddingPlan select(const EmbeddingDescriptor& desc, const PlanPreference& pref = PlanPreference{});
  const KernelSku& sku() const;
  const EmbeddingDescriptor& descriptor() const;
  // The deterministic backward's sort buffers and chunk partial sums; 0 for the forward and the atomic backward.
  int64_t workspace_bytes() const;
  // Checks the tensors against the descriptor and launches on `stream`; never allocates or syncs.
  void run(const EmbeddingTensors& t, void* workspace = nullptr, int64_t workspace_size = 0,
           StreamHandle stream = nullptr) const;

  struct Impl;
  EmbeddingPlan(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
 private:
  std::shared_ptr<const Impl> impl_;
};

FamilyInfo embedding_family_info();

}  // namespace baracuda
