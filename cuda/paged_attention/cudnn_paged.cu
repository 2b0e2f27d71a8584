// What the cuDNN prefill graph reads per request, and the rows it leaves to us (paged_attention_launch.h).
#include <cuda_runtime.h>

#include <cmath>

#include "common/cuda_check.h"
#include "common/dtype_traits.cuh"
#include "paged_attention/paged_attention_launch.h"

namespace baracuda::paged_attention {

namespace {

__global__ void prepare_kernel(const Geometry g, const Pointers p, const CudnnPaged m) {
  const int64_t b = blockIdx.x;
  const int64_t capacity = g.max_pages * g.page_size;
  const int64_t n = p.seq_lens[b * g.seq_lens_stride];
  const int64_t len = n < 0 ? 0 : n > capacity ? capacity : n;
  if (threadIdx.x == 0) {
    m.seq_len_kv[b] = int32_t(len);
    m.seq_len_q[b] = int32_t(g.sq);
  }
  for (int64_t j = threadIdx.x; j < g.max_pages; j += blockDim.x) {
    if (m.k_pool) {  // the pool's page of this column, or its zero page past the request's keys
      m.table[b * g.max_pages + j] = int32_t(j * g.page_size < len ? b * g.max_pages + j : g.batch * g.max_pages);
    } else {
      const int32_t page = p.block_table[b * g.table_row + j * g.table_col];
      m.table[b * g.max_pages + j] = page >= 0 && page < g.pages ? page : 0;
    }
  }
}

// One block per (request, table column) holding keys: the page's keys and values, times their
// scales, rounded once to bf16 in pool page b * max_pages + j; 8 fp8 values (one 8-byte read) per
// thread and step. Zeros past the request's length in its last page (cuDNN's padding mask drops
// those scores, but a NaN value would still reach p v) and for a page outside [0, pages). The last
// block zeroes the pool's zero page, which the table gives every column past a request's keys, so a
// table wider than the contexts costs no writes.
template <class F8>
__global__ void dequantize_kernel(const Geometry g, const Pointers p, const CudnnPaged m) {
  const int64_t bj = blockIdx.x, b = bj / g.max_pages, j = bj - b * g.max_pages;
  const bool zero_page = b == g.batch;
  const int64_t capacity = g.max_pages * g.page_size;
  const int64_t n = zero_page ? 0 : p.seq_lens[b * g.seq_lens_stride];
  const int64_t len = n < 0 ? 0 : n > capacity ? capacity : n;
  if (!zero_page && j * g.page_size >= len) return;
  const int32_t page = zero_page ? -1 : p.block_table[b * g.table_row + j * g.table_col];
  const bool valid = page >= 0 && page < g.pages;
  const int64_t pg = valid ? page : 0;
  const int head_chunks = g.d / 8, slot_chunks = int(g.hkv) * head_chunks, chunks = int(g.page_size) * slot_chunks;
  for (int kv = 0; kv < 2; ++kv) {
    const auto* src = static_cast<const uint8_t*>(kv ? p.v_cache : p.k_cache) +
                      pg * (kv ? g.v_page : g.k_page);
    const int64_t slot_stride = kv ? g.v_slot : g.k_slot, head_stride = kv ? g.v_head : g.k_head;
    const float* scale = kv ? p.v_scale : p.k_scale;
    auto* dst = static_cast<uint4*>(kv ? m.v_pool : m.k_pool) + bj * chunks;
    for (int e = threadIdx.x; e < chunks; e += blockDim.x) {
      const int slot = e / slot_chunks, r = e - slot * slot_chunks, h = r / head_chunks, c = (r - h * head_chunks) * 8;
      uint4 out = {0, 0, 0, 0};
      if (valid && j * g.page_size + slot < len) {
        const uint2 raw = *reinterpret_cast<const uint2*>(src + slot * slot_stride + h * head_stride + c);
        const float s = scale ? scale[h * p.scale_stride] : 1.f;
        uint32_t* o = &out.x;
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const float2 f = kernels::fp8x2_to_float2<F8>((i < 2 ? raw.x : raw.y) >> (16 * (i & 1)));
          const __nv_bfloat162 v = __floats2bfloat162_rn(f.x * s, f.y * s);
          o[i] = *reinterpret_cast<const uint32_t*>(&v);
        }
      }
      dst[e] = out;
    }
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
  if (!m.k_pool || g.max_pages == 0) return;
  const auto dequantize = g.cache_dtype == DType::Float8E4M3 ? dequantize_kernel<kernels::e4m3>
                                                             : dequantize_kernel<kernels::e5m2>;
  dequantize<<<unsigned(g.batch * g.max_pages + 1), 256, 0, static_cast<cudaStream_t>(stream)>>>(g, p, m);
  cuda_check(cudaGetLastError(), "cudnn_paged_prepare dequantize launch");
}

void cudnn_paged_finish(const Geometry& g, const Pointers& p, void* stream) {
  if (g.batch == 0 || g.sq == 0) return;
  finish_kernel<<<dim3(unsigned(g.sq), unsigned(g.batch)), 128, 0, static_cast<cudaStream_t>(stream)>>>(g, p);
  cuda_check(cudaGetLastError(), "cudnn_paged_finish launch");
}

}  // namespace baracuda::paged_attention
