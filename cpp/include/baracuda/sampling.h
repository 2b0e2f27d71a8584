// The sampling family: one token per row of logits [B, V], without sorting the vocabulary.
//
//   x = logits[b] / temperature[b]                         (temperature 0: greedy, the first argmax)
//   keep the tokens with x >= every threshold that is on:
//     top_k  > 0:  the k-th largest x (ties at it kept)
//     top_p  < 1:  the smallest top set of the top-k tokens holding top_p of their softmax mass
//                  (the threshold token's ties kept)
//     min_p  > 0:  x >= max(x) + log(min_p)  (softmax(x) >= min_p * its maximum)
//   token[b] ~ softmax(x) restricted to the kept tokens, drawn with Philox-4x32-10 of
//   (seed, offset, row b) (cuda/common/philox.cuh): the same tokens for the same seed and offset,
//   whatever the launch geometry. logprobs[b] (on request) = log softmax(x)[token] over the whole row
//   (after temperature, before the filters; T = 1 for greedy rows).
//
// Each parameter is a scalar of the plan or a per-row device tensor [B] (float32; top_k int32 /
// int64; seeds int64, overriding `seed` row by row): the per-row form lets a CUDA graph replay one
// plan over changing requests. Per-row values are clamped into range on the device (temperature < 0
// and NaN act as 0, top_p into (0, 1], min_p into [0, 1], top_k < 0 as 0). NaN logits are never drawn;
// a row with no finite-or-+inf logit gets token -1 and logprob NaN. Masses are fixed-point integer
// sums, so a draw does not depend on summation order.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "baracuda/plan.h"
#include "baracuda/registry.h"
#include "baracuda/tensor.h"

namespace baracuda {

struct SamplingDescriptor {
  TensorSpec logits;                 // [B, V], float32 / float16 / bfloat16, V contiguous
  DType token_dtype = DType::Int64;  // int64 or int32
  bool logprobs = false;
  double temperature = 1.0;
  double top_p = 1.0;
  double min_p = 0.0;
  int64_t top_k = 0;
  bool temperature_per_row = false, top_p_per_row = false, min_p_per_row = false, top_k_per_row = false;
  DType top_k_dtype = DType::Int32;  // of the per-row top_k tensor
  bool seeds_per_row = false;
  bool operator==(const SamplingDescriptor& o) const {
    return logits == o.logits && token_dtype == o.token_dtype && logprobs == o.logprobs &&
           temperature == o.temperature && top_p == o.top_p && min_p == o.min_p && top_k == o.top_k &&
           temperature_per_row == o.temperature_per_row && top_p_per_row == o.top_p_per_row &&
           min_p_per_row == o.min_p_per_row && top_k_per_row == o.top_k_per_row &&
           (!top_k_per_row || top_k_dtype == o.top_k_dtype) && seeds_per_row == o.seeds_per_row;
  }
  std::string str() const;
};

struct SamplingTensors {
  TensorView logits, tokens, logprobs, temperature, top_k, top_p, min_p, seeds;
  uint64_t seed = 0, offset = 0;
};

class SamplingPlan {
 public:
  static SamplingPlan select(const SamplingDescriptor& desc, const PlanPreference& pref = PlanPreference{});
  const KernelSku& sku() const;
  const SamplingDescriptor& descriptor() const;
  int64_t workspace_bytes() const { return 0; }
  // Checks the tensors against the descriptor and launches on `stream`; never allocates or syncs.
  void run(const SamplingTensors& t, void* workspace = nullptr, int64_t workspace_size = 0,
           StreamHandle stream = nullptr) const;

  struct Impl;
  SamplingPlan(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
 private:
  std::shared_ptr<const Impl> impl_;
};

FamilyInfo sampling_family_info();

}  // namespace baracuda
