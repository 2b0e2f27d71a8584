// The launch contracts of the MoE routing kernels (cpp/src/moe.cpp fills them; moe_gate.cu and
// moe_permute.cu run them). The rules are in baracuda/moe.h. Strides are in elements; every [T, k]
// and row operand is contiguous along its last dim.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "baracuda/dtype.h"

namespace baracuda::moe {

constexpr int kMaxExperts = 1024;  // a warp holds a token's scores, 32 per lane at most
constexpr int kMaxTopK = 32;       // lane j keeps the j-th pick
constexpr int kMaxGroups = 32;     // lane g keeps group g's score

struct GateParams {
  bool backward = false;
  const void* logits = nullptr;
  DType dtype = DType::Float32;
  int64_t tokens = 0, experts = 0, logit_stride = 0;
  const float* bias = nullptr;  // null: no correction bias
  int top_k = 1, n_group = 1, topk_group = 1;
  bool sigmoid = false, renormalize = true, top2_sum = false;
  float scale = 1.f;
  float* weights = nullptr;
  int64_t weight_stride = 0;
  void* ids = nullptr;  // forward: written; backward: read
  bool ids_int32 = true;
  int64_t id_stride = 0;
  const float* grad_weights = nullptr;
  int64_t grad_weight_stride = 0;
  void* grad_logits = nullptr;  // logits' dtype
  int64_t grad_logit_stride = 0;
};
void gate(const GateParams& p, cudaStream_t stream);

struct PermuteParams {
  int64_t tokens = 0, top_k = 0, experts = 0, hidden = 0;
  DType dtype = DType::Float32;
  int elem_bytes = 4;
  int vec_bytes = 1;  // the widest access every row start and H allow
  const void* x = nullptr;
  int64_t x_stride = 0;
  const void* ids = nullptr;
  bool ids_int32 = true;
  int64_t id_stride = 0;
  void* x_sorted = nullptr;
  int64_t x_sorted_stride = 0;
  void* offsets = nullptr;
  bool offsets_int32 = true;
  int32_t* pos = nullptr;
  int64_t pos_stride = 0;
};
// The permute's workspace: keys and positions, sorted and not, and CUB's scratch (an estimate
// with known = false when no device answers; run() asks again).
int64_t permute_workspace_bytes(const PermuteParams& p, bool& known);
void permute(const PermuteParams& p, void* workspace, int64_t workspace_size, cudaStream_t stream);

struct UnpermuteParams {
  bool backward = false;
  int64_t tokens = 0, top_k = 0, sorted_rows = 0, hidden = 0;
  DType dtype = DType::Float32;
  int vec_bytes = 1;
  const int32_t* pos = nullptr;
  int64_t pos_stride = 0;
  const float* weights = nullptr;  // null: weight 1
  int64_t weight_stride = 0;
  const void* y_sorted = nullptr;  // forward: read; backward: read for grad_weights
  int64_t y_sorted_stride = 0;
  void* out = nullptr;  // forward: [T, H]
  int64_t out_stride = 0;
  const void* grad_out = nullptr;  // backward: [T, H]
  int64_t grad_out_stride = 0;
  void* grad_y_sorted = nullptr;  // backward: [N, H]
  int64_t grad_y_sorted_stride = 0;
  float* grad_weights = nullptr;  // backward, with weights
  int64_t grad_weight_stride = 0;
};
void unpermute(const UnpermuteParams& p, cudaStream_t stream);

}  // namespace baracuda::moe
