// KV-cache append: one block per token; threads over (head, vector) copy each head row of key (and
// value) into its cache slot.
#include <string>

#include "common/cuda_check.h"
#include "kv_cache/kv_cache_launch.h"

namespace baracuda::kv_cache {

namespace {

template <int W> struct alignas(W) Bytes { unsigned char b[W]; };

template <int W> __global__ void append_kernel(const Geometry g) {
  const int64_t t = blockIdx.x;
  const int64_t at = t * g.slot_stride;
  const int64_t slot = g.slots_int32 ? int64_t(static_cast<const int32_t*>(g.slots)[at])
                                     : static_cast<const int64_t*>(g.slots)[at];
  if (slot < 0 || slot >= g.pages * g.page_size) return;  // padding, or outside the cache
  const int64_t page = slot / g.page_size, in_page = slot % g.page_size;
  const Stream& s = g.s[blockIdx.y];
  const int64_t per_row = s.row_bytes / W;
  const int64_t total = g.heads * per_row;
  const char* src = static_cast<const char*>(s.src) + t * s.src_token;
  char* dst = static_cast<char*>(s.cache) + page * s.cache_page + in_page * s.cache_slot;
  for (int64_t i = threadIdx.x; i < total; i += blockDim.x) {
    const int64_t h = i / per_row, c = i % per_row;
    *reinterpret_cast<Bytes<W>*>(dst + h * s.cache_head + c * W) =
        *reinterpret_cast<const Bytes<W>*>(src + h * s.src_head + c * W);
  }
}

}  // namespace

void append(const Geometry& g, void* stream) {
  if (g.tokens == 0 || g.heads == 0) return;
  const dim3 grid(unsigned(g.tokens), unsigned(g.count));
  auto st = static_cast<cudaStream_t>(stream);
  int64_t rows = g.heads * (g.s[0].row_bytes / g.vec);
  const unsigned block = unsigned(rows >= 256 ? 256 : rows >= 128 ? 128 : rows >= 64 ? 64 : 32);
  switch (g.vec) {
    case 16: append_kernel<16><<<grid, block, 0, st>>>(g); break;
    case 8: append_kernel<8><<<grid, block, 0, st>>>(g); break;
    case 4: append_kernel<4><<<grid, block, 0, st>>>(g); break;
    case 2: append_kernel<2><<<grid, block, 0, st>>>(g); break;
    default: append_kernel<1><<<grid, block, 0, st>>>(g); break;
  }
  cuda_check(cudaGetLastError(), "kv_cache append launch");
}

}  // namespace baracuda::kv_cache
