// The contract between the softmax plan layer (cpp/src/softmax.cpp) and the kernels: plain
// C++, no CUDA types. select() fills the geometry and the path; run() adds the pointers (and
// drops a vector path to `RowsLoop` when a pointer is not 16-byte aligned).
#pragma once
#include <cstdint>

#include "baracuda/dtype.h"
#include "baracuda/tensor.h"

namespace baracuda::softmax {

enum class SmOp { Softmax = 0, LogSoftmax = 1, SoftmaxBackward = 2, LogSoftmaxBackward = 3 };
inline bool is_backward(SmOp op) { return op == SmOp::SoftmaxBackward || op == SmOp::LogSoftmaxBackward; }
inline bool is_log(SmOp op) { return op == SmOp::LogSoftmax || op == SmOp::LogSoftmaxBackward; }

enum class SmPath {
  RowsWarp,    // reduced axis contiguous, short rows: a warp (or a group of 2^g lanes) per row, row in registers
  RowsBlock,   // reduced axis contiguous, medium rows: W warps per row, row in registers / shared memory
  RowsCluster, // reduced axis contiguous, long rows: a cluster of CS blocks per row (sm_90), one read
  RowsOnline,  // reduced axis contiguous, long rows: a block per row, online max/sum pass + write pass
  RowsLoop,    // reduced axis contiguous, unaligned: a warp per row, scalar loads, two passes
  Columns,     // reduced axis strided, the rest two dims (inner one usually unit stride): a thread per row
  Strided,     // anything else: a thread per row, full index decomposition
};
const char* path_name(SmPath p);

// Operand index in strides: 0 = out, 1 = x (forward) / grad_out (backward), 2 = y (backward).
struct SmLaunch {
  SmOp op = SmOp::Softmax;
  SmPath path = SmPath::RowsLoop;
  DType dtype = DType::Float32;
  int64_t len = 0;    // extent of the reduced axis
  int64_t rows = 0;   // product of the other dims
  // The other dims after dropping size-1 dims and merging, outermost first.
  int nd = 0;
  int64_t dims[kMaxRank] = {};
  int64_t stride[3][kMaxRank] = {};
  int64_t axis_stride[3] = {1, 1, 1};
  // Rows paths: vector width (elements), chunks per thread, lanes per row (warp path), threads per block.
  int vec = 1;
  int k = 1;
  int group = 32;
  int threads = 256;
  // RowsWarp: rows per lane group (1, 2 or 4; R in softmax_kernels.cuh), their loads in flight together.
  int rows_per_group = 1;
  // RowsBlock / RowsCluster (softmax_reg.cuh): warps per row (slice), staged operands in shared
  // memory (0 or 1: x forward, y backward; 2: forward clusters, persistent, the next row
  // prefetched into shared memory; 3: the same by bulk copies), blocks per cluster (1 = no cluster); `k` = vectors per lane
  // per operand.
  int warps = 1;
  int stage = 0;
  int cluster = 1;
  // 16-bit forward (RowsWarp / RowsBlock / RowsCluster): exp(x - max) folded to one FFMA where |max| allows
  // (softmax_kernels.cuh, can_fold); false = the exact form everywhere (knob exact=1, the A/B).
  bool fold_exp = true;
  void* out = nullptr;
  const void* in0 = nullptr;
  const void* in1 = nullptr;
};

// Whether the build holds the RowsBlock / RowsCluster kernel of W warps, K vectors per lane,
// stage (0, 1; forward clusters 2 or 3, one kernel) and CS blocks per cluster, for 16-byte
// vectors of `esize`-byte elements. BARACUDA_SWEEP_KERNELS builds every tuning knob's variant (the
// bench sweeps); otherwise only those select() picks by default, a sixth of them: any other one is
// reachable only through PlanPreference.tuning, which then names this build option.
constexpr bool reg_variant_built(bool bwd, int esize, int w, int k, int stage, int cs) {
#if defined(BARACUDA_SWEEP_KERNELS)
  (void)bwd, (void)esize, (void)w, (void)k, (void)stage, (void)cs;
  return true;
#else
  if (cs > 1) return w == 16 && k == 8 && (bwd ? stage == 1 : stage >= 2);
  if (!bwd) return k == 8 && ((w <= 8 && stage == 0) || (w == 16 && stage == 1));
  return (k == 8 && w <= 4 && stage == 0) || (w == 8 && k == 8 && stage == 1) || (w == 32 && k == 4 && stage == 0) ||
         (esize == 2 && w == 1 && k == 4 && stage == 0);
#endif
}

void launch(const SmLaunch& L, void* stream);
bool has_kernel(DType t);

}  // namespace baracuda::softmax
