// What embedding.cu and embedding_sort.cu share: the deterministic backward's workspace layout,
// the sort of the indices, and the row locator.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "embedding/embedding_launch.h"

namespace baracuda::embedding {

// Byte offsets into the workspace (each 256-byte aligned).
struct Layout {
  int64_t keys_in = 0, pos_in = 0, keys_out = 0, pos_out = 0, partial = 0, cub = 0, cub_bytes = 0, total = 0;
  int64_t chunk = 0, chunks = 0;
  bool cub_known = true;
};
Layout layout_of(const Params& p);

// keys_out / pos_out of the workspace (laid out as L, layout_of(p)): the indices as keys (padding and
// out-of-range ones as V, sorted last), stably sorted with their flat positions. Throws when the
// workspace is too small.
void sort_indices(const Params& p, const Layout& L, char* workspace, int64_t workspace_size, cudaStream_t stream);

__device__ __forceinline__ void locate(const RowMap& m, int64_t r, int64_t& index_at, int64_t& row_at) {
  if (m.rank == 1) {
    index_at = r * m.index_stride[0];
    row_at = r * m.row_stride[0];
    return;
  }
  index_at = row_at = 0;
  for (int d = m.rank - 1; d >= 0; --d) {
    const int64_t q = r / m.shape[d], c = r - q * m.shape[d];
    index_at += c * m.index_stride[d];
    row_at += c * m.row_stride[d];
    r = q;
  }
}

__device__ __forceinline__ int64_t load_index(const Params& p, int64_t at) {
  return p.indices_int32 ? int64_t(static_cast<const int32_t*>(p.indices)[at])
                         : static_cast<const int64_t*>(p.indices)[at];
}

}  // namespace baracuda::embedding
