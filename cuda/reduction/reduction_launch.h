// The contract between the plan layer (cpp/src/reduction.cpp) and the reduction kernels:
// plain C++, no CUDA types. select() fills everything but the pointers; run() adds them.
#pragma once
#include <cstdint>

#include "baracuda/dtype.h"
#include "baracuda/tensor.h"

namespace baracuda::reduction {

enum class RedKind : int {
  Sum, Mean, Amax, Amin, Prod, Norm2, Logsumexp, Var, Std, Argmax, Argmin, Any, All, CountNonzero,
  // Internal statistics for backward plans (out = Stat2<A>{a, b}, A = f64 for f64 else f32):
  MeanStat,      // {mean, -}
  MaxCountStat,  // {max, count of elements equal to it}
  MinCountStat,  // {min, count}
  ProdZeroStat,  // {product of the nonzero elements, count of zeros}
};
enum class BwdKind : int { Sum, Mean, Amax, Amin, Prod, Norm2, Logsumexp, Var, Std };

enum class Path : int {
  Rows,     // one reduced dim, unit stride: a group of G threads per output, 16-byte vectors
  Columns,  // innermost kept dim has unit stride: a thread owns V adjacent outputs
  Strided,  // anything else: a group of G threads per output, offsets by division
};

// Coalesced geometry; dims innermost first.
struct Geometry {
  int nkept = 0, nred = 0;
  int64_t K = 1, R = 1;                       // outputs, elements reduced per output
  int64_t kept_size[kMaxRank] = {}, kept_in[kMaxRank] = {}, kept_out[kMaxRank] = {};
  int64_t red_size[kMaxRank] = {}, red_in[kMaxRank] = {}, red_idx[kMaxRank] = {};  // red_idx: logical index strides
};

struct RedLaunch {
  RedKind kind = RedKind::Sum;
  DType in_dtype = DType::Float32, out_dtype = DType::Float32;
  double p0 = 0;                    // var / std: correction
  Geometry g;
  Path path = Path::Strided;
  int group = 32;                   // rows / strided: threads per output (1, 4, 32 or 256)
  int short_p = 0;                  // rows: > 0 picks the short-rows kernel (8 lanes per row, short_p
                                    // vectors per lane, 8 / short_p rows per group) when the base
                                    // pointer is 16-byte aligned at run; otherwise `group` runs
  int vec = 1;                      // columns: outputs per thread (falls back to 1 at run if misaligned)
  int wy = 8;                       // columns: row slices per block (1, 2, 4, 8); 256 / wy threads wide
  int splits = 1;                   // > 1: partial states to the workspace, then a finish pass
  int fgroup = 32;                  // rows / strided finish: threads per output (32 or 256)
  int64_t seg = 0;                  // rows / strided with splits: elements per split; columns: rows per split
  const void* in = nullptr;
  void* out = nullptr;
  void* workspace = nullptr;        // splits x K states
};

// The broadcast-map backward: grad_x[i] = f(g[r(i)], x[i], y[r(i)], stat[r(i)]).
constexpr int kBwdArgs = 5;  // gx, x, g, y, stat
struct BwdLaunch {
  BwdKind kind = BwdKind::Sum;
  DType dtype = DType::Float32;     // gx, x, g, y share it
  double n = 1;                     // elements reduced per output
  double correction = 1;
  int rank = 0;                     // coalesced, innermost first
  int64_t shape[kMaxRank] = {};
  int64_t stride[kMaxRank][kBwdArgs] = {};
  int64_t numel = 0;
  bool has_pre = false;             // a statistics pass into the workspace first
  RedLaunch pre;                    // its launch (out = workspace; its own partials after the stats)
  void* gx = nullptr;
  const void* x = nullptr;
  const void* g = nullptr;
  const void* y = nullptr;
  const void* stat = nullptr;
};

void launch(const RedLaunch& L, void* stream);
void launch_backward(const BwdLaunch& L, void* stream);
// Bytes of one partial state of (kind, input dtype): the workspace unit of splits. A reducer's
// state does not depend on its output type (reducers.cuh: store()).
int64_t state_bytes(RedKind kind, DType in);
// Bytes of one statistic written by the stat kinds (2 x the accumulator).
inline int64_t stat_bytes(DType t) { return t == DType::Float64 ? 16 : 8; }

}  // namespace baracuda::reduction
