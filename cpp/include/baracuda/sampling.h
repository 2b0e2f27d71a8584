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
// int64; seeds int64 or int32, overriding `seed` row by row): the per-row form lets a CUDA graph replay one
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
  DType seeds_dtype = DType::Int64;  // of the per-row seeds: int64 or int32
  bool operator==(const SamplingDescriptor& o) const {
    return logits == o.logits && token_dtype == o.token_dtype && logprobs == o.logprobs &&
           temperature == o.temperature && top_p == o.top_p && min_p == o.min_p && top_k == o.top_k &&
           temperature_per_row == o.temperature_per_row && top_p_per_row == o.top_p_per_row &&
           min_p_per_row == o.min_p_per_row && top_k_per_row == o.top_k_per_row &&
           (!top_k_per_row || top_k_dtype == o.top_k_dtype) && seeds_per_row == o.seeds_per_row &&
           (!seeds_per_row || seeds_dtype == o.seeds_dtype);
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

// Penalties over token histories, applied in place to logits [B, V] before sampling (vLLM's rules):
//   every token in the prompt or the output so far:  x = x > 0 ? x / repetition : x * repetition
//   then, with c = the token's count in the output:   x -= frequency * c + presence * (c > 0)
// prompt_tokens / output_tokens int32 / int64 [B, L] (either may be absent; L contiguous), entries
// outside [0, V) are padding. Each penalty a scalar of the plan or a per-row float32 tensor [B]
// (a per-row repetition <= 0 or NaN acts as 1). Deterministic (each token's penalty is applied once,
// whatever the atomics' order); no host sync; the workspace is one int32 per (row, token).
struct PenaltiesDescriptor {
  TensorSpec logits;  // [B, V], float32 / float16 / bfloat16, V contiguous
  bool prompt = false, output = false;
  DType prompt_dtype = DType::Int64, output_dtype = DType::Int64;
  int64_t prompt_len = 0, output_len = 0;
  double repetition = 1.0, presence = 0.0, frequency = 0.0;
  bool repetition_per_row = false, presence_per_row = false, frequency_per_row = false;
  bool operator==(const PenaltiesDescriptor& o) const {
    return logits == o.logits && prompt == o.prompt && output == o.output &&
           (!prompt || (prompt_dtype == o.prompt_dtype && prompt_len == o.prompt_len)) &&
           (!output || (output_dtype == o.output_dtype && output_len == o.output_len)) &&
           repetition == o.repetition && presence == o.presence && frequency == o.frequency &&
           repetition_per_row == o.repetition_per_row && presence_per_row == o.presence_per_row &&
           frequency_per_row == o.frequency_per_row;
  }
  std::string str() const;
};

struct PenaltiesTensors {
  TensorView logits, prompt_tokens, output_tokens, repetition_penalty, presence_penalty, frequency_penalty;
};

class PenaltiesPlan {
 public:
  static PenaltiesPlan select(const PenaltiesDescriptor& desc, const PlanPreference& pref = PlanPreference{});
  const KernelSku& sku() const;
  const PenaltiesDescriptor& descriptor() const;
  int64_t workspace_bytes() const;  // B x V x 4
  void run(const PenaltiesTensors& t, void* workspace = nullptr, int64_t workspace_size = 0,
           StreamHandle stream = nullptr) const;

  struct Impl;
  PenaltiesPlan(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
 private:
  std::shared_ptr<const Impl> impl_;
};

FamilyInfo sampling_family_info();

}  // namespace baracuda
