// The contract between the softmax plan layer and the gumbel-softmax / sparsemax kernels
// (gumbel.cuh, sparsemax.cuh): plain C++, no CUDA types. select() fills the geometry and the
// path; run() adds the pointers, the seed and the offset.
#pragma once
#include <cstdint>

#include "baracuda/dtype.h"
#include "baracuda/tensor.h"

namespace baracuda::softmax {

enum class RowOp {
  GumbelSoftmax,          // y = softmax((x + g) / tau) (or its one-hot argmax), optional y_soft
  GumbelSoftmaxBackward,  // gx = y_soft * (gy - sum(gy * y_soft)) / tau
  GumbelNoise,            // out = g (f32 or f64), the noise gumbel_softmax adds
  Sparsemax,              // y = max(x - t, 0), sum(y) = 1
  SparsemaxBackward,      // gx = [y > 0] * (gy - mean_{y > 0}(gy))
};

enum class RowPath {
  Warp,   // a warp per row, the row in registers (rows up to 4 * 32 * k elements)
  Block,  // a block per row, the row in registers (rows up to 4 * threads * k elements)
  Global, // a block of 1024 per row, every pass re-reads the row (L2) and regenerates the noise
  Elementwise,  // gumbel_noise: a thread per 4 logical elements
};
const char* rowop_path_name(RowPath p);

// Operand slots in `stride` / `axis_stride`: 0 = out, 1 = x (forward) or grad_out (backward),
// 2 = y (backward) or y_soft (gumbel_softmax's second output), 3 = the row-major strides of the
// shape: the logical element index the noise is keyed by (independent of every layout).
struct RowOpLaunch {
  RowOp op = RowOp::Sparsemax;
  RowPath path = RowPath::Block;
  DType dtype = DType::Float32;
  int64_t len = 0;   // extent of the reduced axis
  int64_t rows = 0;  // product of the other dims
  int nd = 0;        // the other dims after dropping size-1 dims and merging, outermost first
  int64_t dims[kMaxRank] = {};
  int64_t stride[4][kMaxRank] = {};
  int64_t axis_stride[4] = {1, 1, 1, 1};
  int threads = 256;  // per block
  int k = 1;          // 4-element chunks per thread (Warp / Block)
  double inv_tau = 1.0;
  bool hard = false;
  bool has_out2 = false;
  uint64_t seed = 0, offset = 0;
  int64_t numel = 0;  // gumbel_noise: elements of out
  void* out = nullptr;
  void* out2 = nullptr;
  const void* in0 = nullptr;
  const void* in1 = nullptr;
};

void launch_rowop(const RowOpLaunch& L, void* stream);

}  // namespace baracuda::softmax
