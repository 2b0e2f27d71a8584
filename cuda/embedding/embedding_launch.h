// The launch contract of the embedding kernels (cpp/src/embedding.cpp fills it; embedding.cu runs it).
// The rules are in baracuda/embedding.h.
#pragma once
#include <cstdint>

#include "baracuda/dtype.h"

namespace baracuda::embedding {

constexpr int kMaxRank = 8;

// Flat index r (row-major over `shape`) -> the element offsets of indices[r] and of its row of
// out / grad_out. Dims are collapsed where both layouts allow (a contiguous case has rank 1).
struct RowMap {
  int rank = 0;
  int64_t shape[kMaxRank] = {};
  int64_t index_stride[kMaxRank] = {};
  int64_t row_stride[kMaxRank] = {};
};

struct Params {
  DType dtype = DType::Float32;  // of weight / out / grad_out / grad_weight
  int elem_bytes = 4;
  int64_t num_embeddings = 0, dim = 0;
  int64_t table_row_stride = 0;  // weight (forward) or grad_weight (backward), elements
  const void* table_in = nullptr;  // forward: weight
  void* table_out = nullptr;       // backward: grad_weight
  const void* rows_in = nullptr;   // backward: grad_out
  void* rows_out = nullptr;        // forward: out
  const void* indices = nullptr;
  bool indices_int32 = false;
  int64_t n = 0;  // indices' element count
  RowMap map;
  int vec_bytes = 1;  // the widest access every row start and D allow (1..16)
  int64_t padding_idx = -1;
  bool scale_grad_by_freq = false;
  bool deterministic = true;
};

// The deterministic backward's workspace (sort buffers, chunk partial sums, CUB's scratch), and
// the chunk of the sorted list one block sums (64, doubled while there are more than 2048 chunks:
// it bounds the partials). `cub_known` is false when CUB's size query failed (no device visible):
// the bytes then hold an estimate for CUB's share, and run() asks again.
struct Workspace {
  int64_t bytes = 0, chunk = 0;
  bool cub_known = true;
};
Workspace backward_workspace(const Params& p);
void forward(const Params& p, void* stream);
void backward(const Params& p, void* workspace, int64_t workspace_size, void* stream);

}  // namespace baracuda::embedding
