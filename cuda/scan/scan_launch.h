// The contract between the plan layer (cpp/src/scan.cpp) and the scan kernels: plain C++, no
// CUDA types. select() fills everything but the pointers; run() adds them.
#pragma once
#include <cstdint>

#include "baracuda/dtype.h"
#include "baracuda/tensor.h"

namespace baracuda::scan {

enum class ScanKind : int {
  Cumsum, Cumprod, Cummax, Cummin, Logcumsumexp,
  CumsumBackward,        // grad_x = reverse cumsum of grad_out
  CumprodBackward,       // inputs (grad_out, x, y); torch's rule at zeros
  LogcumsumexpBackward,  // inputs (grad_out, x, y)
};

enum class Path : int {
  Rows,     // the axis has unit stride in every operand: a group of G lanes scans a row in tiles
  Columns,  // anything else: a thread owns `cvec` adjacent rows (columns) and walks the axis
};

// Operand slots: in0..in2, out0..out1.
constexpr int kOps = 5;

struct ScanLaunch {
  ScanKind kind = ScanKind::Cumsum;
  DType in_dtype = DType::Float32;   // the first input's dtype (every float operand shares it)
  DType out_dtype = DType::Float32;  // out0's dtype (out1, when present, is int64)
  bool reverse = false;              // backward ops scan from the end of the axis
  Path path = Path::Rows;
  int64_t L = 0;                     // axis length
  int64_t axis_stride[kOps] = {};
  // The other dims ("rows"), innermost first (the smallest |stride| of in0 first).
  int nrd = 0;
  int64_t rsize[kMaxRank] = {};
  int64_t rstride[kMaxRank][kOps] = {};
  int64_t rows = 1;
  // rows path
  int group = 32;                    // lanes per row: 4, 8, 16 or 32
  int vec = 1;                       // elements per lane per tile (16-byte loads), 1 = scalar
  bool prefetch = true;              // group 32: the next tiles loaded while these are scanned
  // columns path
  int cvec = 1;                      // adjacent rows per thread (16-byte loads), 1 = scalar
  int threads = 256;                 // threads per block
  // split: nseg > 1 segments of `seg` elements along the axis, three passes via the workspace
  int64_t seg = 0;
  int64_t nseg = 1;
  const void* in[3] = {nullptr, nullptr, nullptr};
  void* out[2] = {nullptr, nullptr};
  void* workspace = nullptr;         // rows x nseg states
};

// Whether the prefetching rows kernel (ScanLaunch::prefetch) fits the 80-register budget of
// 3 blocks of 256 per SM without spilling, by the op's state: the vector ops with at most 8-byte
// states and 32 bytes of them per lane, and the values + indices ops (which rescan instead of
// keeping V states). Checked against `cuobjdump -res-usage` (STACK:0) on the sm_90 build.
constexpr bool prefetch_fits(int64_t state_bytes, int vec, bool values_and_indices) {
  return values_and_indices || (state_bytes <= 8 && state_bytes * vec <= 32);
}

// Lanes per row the rows kernels are built for: select() picks 4, 16 or 32 by row length; 8 (never
// the fastest in a sweep) only with BARACUDA_SWEEP_KERNELS, for the bench sweeps' group=8.
constexpr bool rows_group_built(int g) {
#if defined(BARACUDA_SWEEP_KERNELS)
  if (g == 8) return true;
#endif
  return g == 4 || g == 16 || g == 32;
}

void launch(const ScanLaunch& L, void* stream);
// Bytes of one partial state of the kind: the workspace unit of the split passes.
int64_t state_bytes(ScanKind kind, DType in, DType out);

}  // namespace baracuda::scan
