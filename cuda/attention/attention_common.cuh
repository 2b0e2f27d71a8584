// Device-side rules every attention kernel shares (the contract in attention_launch.h): where a
// sequence's rows are, which keys a query sees, and where an operand's row starts.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "attention/attention_launch.h"

namespace baracuda::attention {

struct Seq {
  int64_t q_begin = 0, k_begin = 0;  // first row of the sequence in q / k (varlen offsets)
  int64_t sq = 0, sk = 0;            // queries, and keys used (seqused_k caps them)
  int64_t rows_k = 0;                // key rows of the sequence (grad_k / grad_v rows it owns)
  int64_t off = 0;                   // query i sits at diagonal position i + off
};

// Offsets are clamped to the tensors (an offset past them, or a decreasing pair, makes an empty or
// shorter sequence, never an out-of-bounds access); valid offsets are unchanged by it.
__device__ __forceinline__ int64_t clamp_row(int64_t v, int64_t lo, int64_t hi) { return min(max(v, lo), hi); }

__device__ __forceinline__ Seq sequence(const Geometry& g, const Pointers& p, int64_t b) {
  Seq s;
  if (g.varlen) {
    s.q_begin = clamp_row(p.cu_seqlens_q[b], 0, g.total_q);
    s.k_begin = clamp_row(p.cu_seqlens_k[b], 0, g.total_k);
    s.sq = clamp_row(p.cu_seqlens_q[b + 1], s.q_begin, g.total_q) - s.q_begin;
    s.sk = clamp_row(p.cu_seqlens_k[b + 1], s.k_begin, g.total_k) - s.k_begin;
  } else {
    s.sq = g.sq;
    s.sk = g.sk;
  }
  s.rows_k = s.sk;
  if (g.has_seqused_k) s.sk = clamp_row(p.seqused_k[b], 0, s.sk);
  s.off = g.top_left ? 0 : s.sk - s.sq;
  return s;
}

// Keys [lo, hi) that query i sees.
__device__ __forceinline__ void visible_keys(const Geometry& g, const Seq& s, int64_t i, int64_t& lo, int64_t& hi) {
  const int64_t pos = i + s.off;
  lo = g.window_left >= 0 ? max(int64_t(0), pos - g.window_left) : 0;
  hi = g.window_right >= 0 ? min(s.sk, pos + g.window_right + 1) : s.sk;
}
// Queries [lo, hi) that see key j.
__device__ __forceinline__ void visible_queries(const Geometry& g, const Seq& s, int64_t j, int64_t& lo,
                                                int64_t& hi) {
  lo = g.window_right >= 0 ? max(int64_t(0), j - g.window_right - s.off) : 0;
  hi = g.window_left >= 0 ? min(s.sq, j + g.window_left - s.off + 1) : s.sq;
}

// Row `r` of sequence b (absolute, q_begin / k_begin included), head h, of an operand.
template <class T>
__device__ __forceinline__ const T* row_ptr(const Operand& o, int64_t b, int64_t r, int64_t h) {
  return static_cast<const T*>(o.data) + b * o.batch + r * o.row + h * o.head;
}
template <class T> __device__ __forceinline__ T* row_ptr_mut(const Operand& o, int64_t b, int64_t r, int64_t h) {
  return const_cast<T*>(row_ptr<T>(o, b, r, h));
}
// The element offset of (b, h, row) in lse's layout (and delta's).
__device__ __forceinline__ int64_t lse_index(const Geometry& g, const Seq& s, int64_t b, int64_t h, int64_t i) {
  return b * g.lse_batch + h * g.lse_head + s.q_begin + i;
}

}  // namespace baracuda::attention
