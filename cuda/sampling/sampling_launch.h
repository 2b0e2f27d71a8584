// The launch contract of the sampler (cpp/src/sampling.cpp fills it; sampling.cu runs it). The rules
// are in baracuda/sampling.h. Per-row parameters are read from their pointer (stride in elements)
// when it is set, else the scalar beside it is used for every row.
#pragma once
#include <cstdint>

#include "baracuda/dtype.h"

namespace baracuda::sampling {

struct Params {
  const void* logits = nullptr;
  DType dtype = DType::Float32;
  int64_t rows = 0, vocab = 0, row_stride = 0;  // elements

  void* tokens = nullptr;
  bool tokens_int32 = false;
  int64_t token_stride = 1;
  float* logprobs = nullptr;  // null: not requested
  int64_t logprob_stride = 1;

  const float* temperature = nullptr;
  int64_t temperature_stride = 1;
  float temperature_value = 1.f;
  const void* top_k = nullptr;
  bool top_k_int32 = true;
  int64_t top_k_stride = 1;
  int64_t top_k_value = 0;
  const float* top_p = nullptr;
  int64_t top_p_stride = 1;
  float top_p_value = 1.f;
  const float* min_p = nullptr;
  int64_t min_p_stride = 1;
  float min_p_value = 0.f;
  const void* seeds = nullptr;  // int64, or int32 (seeds_int32: JAX's default integer)
  bool seeds_int32 = false;
  int64_t seed_stride = 1;
  uint64_t seed = 0, offset = 0;
};

void sample(const Params& p, void* stream);

// Penalties over token histories, in place on logits (rules in baracuda/sampling.h). A token list
// is [rows, len] (any row stride, len contiguous); entries outside [0, vocab) are padding. The
// workspace holds one int32 per (row, token): 2 x the output count, | 1 when in the prompt.
struct TokenList {
  const void* data = nullptr;  // null: absent
  bool int32 = false;
  int64_t len = 0, row_stride = 0;
};
struct PenaltyParams {
  void* logits = nullptr;
  DType dtype = DType::Float32;
  int64_t rows = 0, vocab = 0, row_stride = 0;
  TokenList prompt, output;
  const float* repetition = nullptr;  // per-row [rows] (stride below), else the value
  const float* presence = nullptr;
  const float* frequency = nullptr;
  int64_t repetition_stride = 1, presence_stride = 1, frequency_stride = 1;
  float repetition_value = 1.f, presence_value = 0.f, frequency_value = 0.f;
};
inline int64_t penalty_workspace_bytes(int64_t rows, int64_t vocab) { return rows * vocab * 4; }
void apply_penalties(const PenaltyParams& p, void* workspace, void* stream);

}  // namespace baracuda::sampling
