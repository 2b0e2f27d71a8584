// Repetition / presence / frequency penalties over token histories. The workspace (one int32 per
// row and token, zeroed first) counts with atomics: prompt entries set bit 0, output entries add 2.
// Then every history entry swaps its cell back to 0; the one entry that finds it non-zero applies
// that token's penalty once, so the result is independent of the atomics' order.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <string>

#include "common/cuda_check.h"
#include "common/dtype_traits.cuh"
#include "sampling/sampling_launch.h"

namespace baracuda::sampling {

namespace {

// History entry i of all rows (the prompt's entries first): its row and token, or false for padding.
__device__ __forceinline__ bool entry(const PenaltyParams& p, int64_t i, int64_t& row, int64_t& tok, bool& in_prompt) {
  const int64_t np = p.prompt.data ? p.rows * p.prompt.len : 0;
  const TokenList& l = i < np ? p.prompt : p.output;
  in_prompt = i < np;
  if (!in_prompt) i -= np;
  row = i / l.len;
  const int64_t at = row * l.row_stride + i % l.len;
  tok = l.int32 ? int64_t(static_cast<const int32_t*>(l.data)[at]) : static_cast<const int64_t*>(l.data)[at];
  return tok >= 0 && tok < p.vocab;
}

__host__ __device__ __forceinline__ int64_t entries(const PenaltyParams& p) {
  return (p.prompt.data ? p.rows * p.prompt.len : 0) + (p.output.data ? p.rows * p.output.len : 0);
}

__global__ void count_kernel(const PenaltyParams p, int* cells) {
  const int64_t n = entries(p);
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    int64_t row, tok;
    bool in_prompt;
    if (!entry(p, i, row, tok, in_prompt)) continue;
    int* c = cells + row * p.vocab + tok;
    if (in_prompt) atomicOr(c, 1);
    else atomicAdd(c, 2);
  }
}

template <class T> __global__ void apply_kernel(const PenaltyParams p, int* cells) {
  const int64_t n = entries(p);
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    int64_t row, tok;
    bool in_prompt;
    if (!entry(p, i, row, tok, in_prompt)) continue;
    const int c = atomicExch(cells + row * p.vocab + tok, 0);
    if (c == 0) continue;  // another entry of this token applied it
    float r = p.repetition ? p.repetition[row * p.repetition_stride] : p.repetition_value;
    if (!(r > 0.f)) r = 1.f;  // a per-row value <= 0 or NaN: off
    const float pres = p.presence ? p.presence[row * p.presence_stride] : p.presence_value;
    const float freq = p.frequency ? p.frequency[row * p.frequency_stride] : p.frequency_value;
    T* at = static_cast<T*>(p.logits) + row * p.row_stride + tok;
    float x = float(kernels::to_compute(*at));
    x = x > 0.f ? x / r : x * r;  // every token seen in the prompt or the output
    const int count = c >> 1;      // occurrences in the output
    if (count > 0) x -= freq * float(count) + pres;
    *at = kernels::from_compute<T>(x);
  }
}

}  // namespace


void apply_penalties(const PenaltyParams& p, void* workspace, void* stream) {
  const int64_t n = entries(p);
  if (p.rows == 0 || p.vocab == 0 || n == 0) return;
  auto st = static_cast<cudaStream_t>(stream);
  auto* cells = static_cast<int*>(workspace);
  cuda_check(cudaMemsetAsync(cells, 0, size_t(penalty_workspace_bytes(p.rows, p.vocab)), st),
             "apply_penalties: cudaMemsetAsync (counts)");
  const unsigned blocks = unsigned(std::min<int64_t>((n + 255) / 256, 4096));
  count_kernel<<<blocks, 256, 0, st>>>(p, cells);
  check_launch("apply_penalties count_kernel");
  switch (p.dtype) {
    case DType::Float32: apply_kernel<float><<<blocks, 256, 0, st>>>(p, cells); break;
    case DType::Float16: apply_kernel<__half><<<blocks, 256, 0, st>>>(p, cells); break;
    case DType::BFloat16: apply_kernel<__nv_bfloat16><<<blocks, 256, 0, st>>>(p, cells); break;
    default: throw Unsupported(std::string("apply_penalties: logits dtype ") + dtype_name(p.dtype) + " has no kernel");
  }
  check_launch("apply_penalties apply_kernel");
}

}  // namespace baracuda::sampling
