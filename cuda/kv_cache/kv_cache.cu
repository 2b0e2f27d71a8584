// KV-cache append: one block per token; threads over (head, vector) copy each head row of key (and
// value) into its cache slot.
#include <string>

#include "common/cuda_check.h"
#include "common/dtype_traits.cuh"
#include "common/paged_slot.cuh"
#include "kv_cache/kv_cache_launch.h"

namespace baracuda::kv_cache {

namespace {

template <int W> struct alignas(W) Bytes { unsigned char b[W]; };

template <int W> __global__ void append_kernel(const Geometry g) {
  const int64_t t = blockIdx.x;
  int64_t page, in_page;
  if (!kernels::paged_slot(g.slots, g.slots_int32, t * g.slot_stride, g.pages, g.page_size, page, in_page)) return;
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

// The quantizing append: element by element, src / scale rounded to the cache's fp8 (saturating).
template <class S, class C> __global__ void quantize_kernel(const Geometry g) {
  const int64_t t = blockIdx.x;
  int64_t page, in_page;
  if (!kernels::paged_slot(g.slots, g.slots_int32, t * g.slot_stride, g.pages, g.page_size, page, in_page)) return;
  const int k = blockIdx.y;
  const Stream& s = g.s[k];
  const int64_t dim = g.q.dim[k];
  const float* scale = g.q.scale[k];
  const char* src = static_cast<const char*>(s.src) + t * s.src_token;
  char* dst = static_cast<char*>(s.cache) + page * s.cache_page + in_page * s.cache_slot;
  for (int64_t i = threadIdx.x; i < g.heads * dim; i += blockDim.x) {
    const int64_t h = i / dim, c = i % dim;
    const float x = float(kernels::to_compute(reinterpret_cast<const S*>(src + h * s.src_head)[c]));
    const float sc = scale ? scale[h * g.q.scale_stride[k]] : 1.f;
    reinterpret_cast<C*>(dst + h * s.cache_head)[c] = kernels::from_compute<C>(x / sc);
  }
}

template <class S> void launch_quantize(const Geometry& g, dim3 grid, unsigned block, cudaStream_t st) {
  if (g.q.cache == DType::Float8E5M2) quantize_kernel<S, kernels::e5m2><<<grid, block, 0, st>>>(g);
  else quantize_kernel<S, kernels::e4m3><<<grid, block, 0, st>>>(g);
}

}  // namespace

void append(const Geometry& g, void* stream) {
  if (g.tokens == 0 || g.heads == 0) return;
  const dim3 grid(unsigned(g.tokens), unsigned(g.count));
  auto st = static_cast<cudaStream_t>(stream);
  if (g.quantize) {
    const int64_t n = g.heads * g.q.dim[0];
    const unsigned block = unsigned(n >= 256 ? 256 : n >= 128 ? 128 : 64);
    switch (g.q.src) {
      case DType::Float32: launch_quantize<float>(g, grid, block, st); break;
      case DType::Float16: launch_quantize<kernels::f16>(g, grid, block, st); break;
      default: launch_quantize<kernels::bf16>(g, grid, block, st); break;
    }
    cuda_check(cudaGetLastError(), "kv_cache quantizing append launch");
    return;
  }
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
