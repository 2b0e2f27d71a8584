// What the cuDNN prefill graph reads per request, and the rows it leaves to us (paged_attention_launch.h).
#include <cuda_runtime.h>

#include <cmath>

#include "common/cuda_check.h"
#include "paged_attention/paged_attention_launch.h"

namespace baracuda::paged_attention {

namespace {

__global__ void prepare_kernel(const Geometry g, const Pointers p, const CudnnPaged m) {
  const int64_t b = blockIdx.x;
  const int64_t capacity = g.max_pages * g.page_size;
  if (threadIdx.x == 0) {
    const int64_t n = p.seq_lens[b * g.seq_lens_stride];
    m.seq_len_kv[b] = int32_t(n < 0 ? 0 : n > capacity ? capacity : n);
    m.seq_len_q[b] = int32_t(g.sq);
  }
  for (int64_t j = threadIdx.x; j < g.max_pages; j += blockDim.x) {
    const int32_t page = p.block_table[b * g.table_row + j * g.table_col];
    m.table[b * g.max_pages + j] = page >= 0 && page < g.pages ? page : 0;
  }
}

// One block per (request, query token): the rows of its q heads that see no key.
__global__ void finish_kernel(const Geometry g, const Pointers p) {
  const int64_t b = blockIdx.y, i = blockIdx.x;
  const int64_t capacity = g.max_pages * g.page_size;
  const int64_t n = p.seq_lens[b * g.seq_lens_stride];
  const int64_t len = n < 0 ? 0 : n > capacity ? capacity : n;
  const int64_t pos = len - g.sq + i;
  const int64_t lo = g.window_left >= 0 ? (pos - g.window_left > 0 ? pos - g.window_left : 0) : 0;
  const int64_t hi = g.window_right >= 0 ? (pos + g.window_right < len - 1 ? pos + g.window_right : len - 1) : len - 1;
  if (lo <= hi) return;
  auto* out = static_cast<uint16_t*>(p.out);  // 16-bit out: zero bits are +0
  for (int64_t e = threadIdx.x; e < g.hq * g.d; e += blockDim.x) {
    const int64_t h = e / g.d, c = e - h * g.d;
    out[b * g.out_batch + i * g.out_token + h * g.out_head + c] = 0;
  }
  if (p.lse)
    for (int64_t h = threadIdx.x; h < g.hq; h += blockDim.x)
      p.lse[(b * g.hq + h) * g.sq + i] = g.sinks ? p.sinks[h] : -INFINITY;
}

}  // namespace

void cudnn_paged_prepare(const Geometry& g, const Pointers& p, const CudnnPaged& m, void* stream) {
  if (g.batch == 0) return;
  prepare_kernel<<<unsigned(g.batch), 128, 0, static_cast<cudaStream_t>(stream)>>>(g, p, m);
  cuda_check(cudaGetLastError(), "cudnn_paged_prepare launch");
}

void cudnn_paged_finish(const Geometry& g, const Pointers& p, void* stream) {
  if (g.batch == 0 || g.sq == 0) return;
  finish_kernel<<<dim3(unsigned(g.sq), unsigned(g.batch)), 128, 0, static_cast<cudaStream_t>(stream)>>>(g, p);
  cuda_check(cudaGetLastError(), "cudnn_paged_finish launch");
}

}  // namespace baracuda::paged_attention
