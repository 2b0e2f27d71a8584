// The contract between the row-structured losses of cpp/src/loss_rows.cpp and their kernels
// (row_kernels.cuh): plain C++, no CUDA types. One row of the operands is one sample; a group of
// G threads (a warp, or a 256-thread block for long rows) reduces it in a fixed order.
#pragma once
#include <cstdint>

#include "baracuda/dtype.h"
#include "loss/loss_launch.h"

namespace baracuda::loss {

enum class RowKind { CosineEmbedding = 0, MultiMargin, MultilabelMargin, MultilabelSoftMargin, TripletMargin };

constexpr int kRowThreads = 256;
// Multilabel margin keeps the row's target list (value, index, count) and a class bitmap in
// shared memory: at most this many classes.
constexpr int64_t kMultilabelMaxClasses = 8192;
constexpr int64_t kMultilabelMaxClassesF64 = 6144;
// Up to this many classes multilabel margin runs a warp per row with the row in registers.
constexpr int64_t kMultilabelWarpMaxClasses = 512;
// The other row losses: a warp per row up to 1024 elements, and up to kRowWarpMaxD when there are
// at least kRowWarpMinRows rows (enough warps to fill the GPU: many short-lived 256-thread blocks
// with a block reduction each keep fewer bytes in flight than 8 rows per block); a block above.
constexpr int64_t kRowWarpMaxD = 16384;
constexpr int64_t kRowWarpMinRows = 4096;

struct RowLaunch {
  RowKind kind = RowKind::CosineEmbedding;
  DType dtype = DType::Float32;
  DType target_dtype = DType::Int64;  // int32 / int64 class indices, or the input's dtype (cosine's +-1)
  Reduction reduction = Reduction::Mean;
  bool backward = false;
  int64_t n = 0;     // rows (samples)
  int64_t d = 0;     // row length (features D or classes C)
  int group = 32;    // threads per row: 32 (a warp; 8 rows per block) or 256 (a block); multilabel
                     // margin: 32 the warp kernel (d <= kMultilabelWarpMaxClasses), 256 the shared one
  int vec = 1;       // elements per load: 1, or 16 / sizeof(T) (unit column strides, 16-byte rows)
  // Float operands [n, d]: 0 input / input1 / anchor, 1 input2 / positive / target (multilabel
  // soft margin), 2 negative. Row and column strides in elements.
  int64_t rs[3] = {}, cs[3] = {};
  int64_t t_rs = 1, t_cs = 1;  // target: per row (class / +-1) or [n, d] (multilabel margin)
  int64_t w_cs = 1;            // weight [d]
  // Gradients (backward), one per float operand: want[k] says whether grad k is written.
  bool want[3] = {};
  int64_t grs[3] = {}, gcs[3] = {};
  int64_t out_stride = 1;      // reduction none: loss[i]
  int64_t gl_stride = 0;       // reduction none backward: grad_loss[i]
  double margin = 0.0;
  double p = 2.0;              // multi margin: 1 or 2; triplet: the norm degree (> 0)
  double eps = 0.0;            // triplet: added to the differences; cosine: 1e-12 on the squared norms
  bool swap = false;           // triplet
  const void* x[3] = {};
  const void* target = nullptr;
  const void* weight = nullptr;
  const void* grad_loss = nullptr;
  void* out = nullptr;         // forward: the loss
  void* grad[3] = {};
  void* workspace = nullptr;   // mean / sum: n per-row losses (acc type)
};

int64_t row_workspace_bytes(const RowLaunch& L);
void row_launch(const RowLaunch& L, void* stream);

}  // namespace baracuda::loss
