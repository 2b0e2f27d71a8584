// Device work around the cuDNN backend's padded and packed graphs (attention_launch.h,
// CudnnPadding): the per-sequence lengths and ragged offsets cuDNN reads, computed from the
// offsets with the clamping every kernel of ours applies, and the rows whose values our contract
// defines but cuDNN does not write (a row that sees no key; key rows past seqused_k).
#include <cuda_runtime.h>

#include <algorithm>

#include "attention/attention_common.cuh"
#include "common/cuda_check.h"

namespace baracuda::attention {
namespace {

// A block: 32 rows of one sequence (threadIdx.x) x 8 groups of heads (threadIdx.y).
constexpr int kRows = 32, kGroups = 8;

__device__ __forceinline__ bool sees_no_key(const Geometry& g, const Seq& s, int64_t i) {
  int64_t lo, hi;
  visible_keys(g, s, i, lo, hi);
  return lo >= hi;
}

// Where cuDNN's stats of (b, h, i) are: [total_q, hq] for packed sequences, else lse's layout.
__device__ __forceinline__ int64_t stats_index(const Geometry& g, const Seq& s, int64_t b, int64_t h, int64_t i) {
  return g.varlen ? (s.q_begin + i) * g.hq + h : lse_index(g, s, b, h, i);
}

// cuDNN takes 16-bit operands only; rows that need zeros are rare, so plain stores.
__device__ __forceinline__ void zero_row(const Operand& o, int64_t b, int64_t r, int64_t h, int64_t n) {
  uint16_t* row = row_ptr_mut<uint16_t>(o, b, r, h);
  for (int64_t d = 0; d < n; ++d) row[d] = 0;
}

__global__ void prepare_kernel(Geometry g, Pointers p, CudnnPadding m, bool backward) {
  const int64_t b = blockIdx.y;
  const Seq s = sequence(g, p, b);
  if (blockIdx.x == 0 && threadIdx.x == 0 && threadIdx.y == 0) {
    m.seq_len_q[b] = int32_t(min(s.sq, m.max_sq));
    m.seq_len_kv[b] = int32_t(min(s.sk, m.max_sk));
    for (int r = 0; r < m.nragged; ++r) {
      const int64_t begin = m.ragged_keys[r] ? s.k_begin : s.q_begin;
      m.ragged[r][b] = begin * m.ragged_row[r];
      if (b + 1 == g.batch) m.ragged[r][b + 1] = (begin + (m.ragged_keys[r] ? s.rows_k : s.sq)) * m.ragged_row[r];
    }
  }
  if (!backward) return;
  const int64_t i = int64_t(blockIdx.x) * kRows + threadIdx.x;
  if (i >= s.sq) return;
  const float* lse = static_cast<const float*>(p.lse);
  for (int64_t h = threadIdx.y; h < g.hq; h += kGroups) {
    const float v = lse[lse_index(g, s, b, h, i)];
    m.stats[stats_index(g, s, b, h, i)] = v == -INFINITY ? INFINITY : v;
  }
}

__global__ void finish_kernel(Geometry g, Pointers p, CudnnPadding m, bool backward) {
  const int64_t b = blockIdx.y;
  const Seq s = sequence(g, p, b);
  const int64_t i = int64_t(blockIdx.x) * kRows + threadIdx.x;
  if (!backward) {
    if (i >= s.sq) return;
    const bool none = sees_no_key(g, s, i);
    float* lse = static_cast<float*>(p.lse);
    for (int64_t h = threadIdx.y; h < g.hq; h += kGroups) {
      if (lse && (none || m.stats))  // a row that sees no key: only its sink, if any, in the denominator
        lse[lse_index(g, s, b, h, i)] = !none ? m.stats[stats_index(g, s, b, h, i)]
                                        : g.sinks ? static_cast<const float*>(p.sinks)[h] : -INFINITY;
      if (none) zero_row(p.out, b, s.q_begin + i, h, g.dv);
    }
    return;
  }
  if (i < s.sq && sees_no_key(g, s, i))
    for (int64_t h = threadIdx.y; h < g.hq; h += kGroups) zero_row(p.grad_q, b, s.q_begin + i, h, g.d);
  if (i >= s.sk && i < s.rows_k)
    for (int64_t h = threadIdx.y; h < g.hkv; h += kGroups) {
      zero_row(p.grad_k, b, s.k_begin + i, h, g.d);
      zero_row(p.grad_v, b, s.k_begin + i, h, g.dv);
    }
}

dim3 grid_of(const Geometry& g, int64_t rows) {
  return dim3(unsigned(std::max<int64_t>(1, (rows + kRows - 1) / kRows)), unsigned(g.batch));
}

}  // namespace

void cudnn_padding_prepare(const Geometry& g, const Pointers& p, const CudnnPadding& m, bool backward, void* stream) {
  if (g.batch == 0) return;
  prepare_kernel<<<grid_of(g, backward ? g.sq : 0), dim3(kRows, kGroups), 0, static_cast<cudaStream_t>(stream)>>>(
      g, p, m, backward);
  cuda_check(cudaGetLastError(), "attention cuDNN padding launch");
}

void cudnn_padding_finish(const Geometry& g, const Pointers& p, const CudnnPadding& m, bool backward, void* stream) {
  if (g.batch == 0) return;
  const int64_t rows = backward ? std::max(g.sq, g.sk) : g.sq;
  finish_kernel<<<grid_of(g, rows), dim3(kRows, kGroups), 0, static_cast<cudaStream_t>(stream)>>>(g, p, m, backward);
  cuda_check(cudaGetLastError(), "attention cuDNN padding launch");
}

}  // namespace baracuda::attention
