// The contract between the plan layer (cpp/src/elementwise.cpp) and the kernels: plain C++,
// no CUDA types. select() fills everything but the pointers; run() adds the pointers.
#pragma once
#include <cstdint>

#include "baracuda/elementwise.h"
#include "baracuda/tensor.h"

namespace baracuda::elementwise {

constexpr int kMaxInputs = 4;
constexpr int kMaxArgs = kMaxInputs + 1;  // output first

struct EwLaunch {
  EwCategory category = EwCategory::Unary;
  int kind = 0;
  double p[4] = {0, 0, 0, 0};   // scalar parameters, in the op table's order
  int wrt = 0;                  // backward kinds: which input's gradient this launch writes
  int nin = 0;
  DType out_dtype = DType::Float32;
  DType in_dtype[kMaxInputs] = {};
  void* out = nullptr;
  const void* in[kMaxInputs] = {};
  // Iteration space after coalescing, outermost first. stride[0] is the output's.
  int rank = 0;
  int64_t shape[kMaxRank] = {};
  int64_t stride[kMaxArgs][kMaxRank] = {};
  int64_t numel = 0;
  bool contiguous = false;      // every operand dense in iteration order, or a single element
  uint32_t scalar_mask = 0;     // contiguous path: bit i set = input i is one broadcast element
  bool inner_contiguous = false;  // rank >= 2, innermost stride 1 (output) or 0/1 (inputs)
  int transpose_dim = -1;       // one input, unit stride on this dim (not the innermost): tiled
  // Map-reduce (the gradient of a broadcast operand): the output has stride 0 on the dims
  // summed over. reduce_columns: its innermost dim is kept; splits > 1: partial sums of
  // `splits` row ranges go to the workspace first.
  bool map_reduce = false;
  bool reduce_columns = false;
  int splits = 1;
  void* workspace = nullptr;
};

// Launch one elementwise map. Throws Unsupported for a (category, dtype) the build lacks.
void launch(const EwLaunch& L, void* stream);
// Which (category, input dtype, output dtype) the kernels cover; used by select().
bool has_kernel(EwCategory c, DType in, DType out);

}  // namespace baracuda::elementwise
