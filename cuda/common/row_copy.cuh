// Row-gather building blocks (embedding rows, MoE token permutation): a group of tpr threads per
// row (the row's vectors rounded up to a power of two, at most a warp), W-byte words, several loads
// in flight per thread (through shared memory for 16-byte words, else four in registers).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "common/async_copy.cuh"

namespace baracuda::kernels {

template <int W> struct WordOf;
template <> struct WordOf<16> { using type = uint4; };
template <> struct WordOf<8> { using type = uint2; };
template <> struct WordOf<4> { using type = unsigned; };
template <> struct WordOf<2> { using type = unsigned short; };

// log2 of the threads per row for a row of `vectors` words: at most 5 (a warp), or up to 8 (a block of
// 256 per row) while `rows` that few would leave most SMs idle (a decode batch: 64 rows, 8 blocks).
// Kernels that pass `rows` must not rely on a row's group being inside one warp.
inline int row_tpr_log2(int64_t vectors, int64_t rows = INT64_MAX) {
  int l = 0;
  while (l < 5 && (int64_t(1) << l) < vectors) ++l;
  while (l < 8 && (int64_t(1) << l) < vectors && rows / (256 >> l) < 264) ++l;
  return l;
}

// The row of a block's thread group (rows side by side, 2^tpr_log2 threads each) and the lane in it.
struct RowLane {
  int64_t row;
  int lane, tpr;
};
__device__ __forceinline__ RowLane row_lane(int tpr_log2) {
  const int tpr = 1 << tpr_log2;
  return {int64_t(blockIdx.x) * (blockDim.x >> tpr_log2) + (threadIdx.x >> tpr_log2), int(threadIdx.x) & (tpr - 1),
          tpr};
}

// 16-byte words go through a ring of shared memory slots (cp.async), kStagedWords reads out per thread
// without holding them in registers: 2-4% faster than four in registers on the embedding rows (8 or 12
// slots alike; tools/probe, docs/benchmarks.md, Embedding). Blocks of at most kStagedThreads threads.
constexpr int kStagedWords = 8;
constexpr int kStagedThreads = 256;

// dst[v] = src[v] for the words v = lane, lane + tpr, ... below nvec.
template <int W>
__device__ __forceinline__ void copy_words(void* dst_row, const void* src_row, int64_t nvec, int lane, int tpr) {
  if constexpr (W == 16) {
    __shared__ uint4 ring[kStagedWords][kStagedThreads];
    uint4* __restrict__ dst = static_cast<uint4*>(dst_row);
    const uint4* __restrict__ src = static_cast<const uint4*>(src_row);
    int64_t vi = lane;
#pragma unroll
    for (int u = 0; u < kStagedWords; ++u, vi += tpr) {
      if (vi < nvec) cp_async16(&ring[u][threadIdx.x], src + vi);
      cp_async_commit();
    }
    int slot = 0;
    for (int64_t vo = lane; vo < nvec; vo += tpr, vi += tpr) {
      cp_async_wait<kStagedWords - 1>();
      dst[vo] = ring[slot][threadIdx.x];
      if (vi < nvec) cp_async16(&ring[slot][threadIdx.x], src + vi);
      cp_async_commit();
      slot = slot + 1 == kStagedWords ? 0 : slot + 1;
    }
    return;
  }
  using Word = typename WordOf<W>::type;
  constexpr int kInFlight = 4;
  Word* __restrict__ dst = static_cast<Word*>(dst_row);
  const Word* __restrict__ src = static_cast<const Word*>(src_row);
  for (int64_t v = lane; v < nvec; v += int64_t(tpr) * kInFlight) {
    Word r[kInFlight];
#pragma unroll
    for (int u = 0; u < kInFlight; ++u)
      if (v + u * tpr < nvec) r[u] = __ldg(src + v + u * tpr);
#pragma unroll
    for (int u = 0; u < kInFlight; ++u)
      if (v + u * tpr < nvec) dst[v + u * tpr] = r[u];
  }
}

}  // namespace baracuda::kernels
