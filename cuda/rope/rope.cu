// RoPE: one block per token, threads over (pair chunk, head); the angle of a pair chunk is computed
// (or read from the cache) once and applied to every head of q and k. With a paged KV cache the
// rotated k also goes to the token's cache slot and v is copied to its own (blockIdx.y = 2: v).
#include <string>

#include "baracuda/errors.h"
#include "common/cuda_check.h"
#include "common/dtype_traits.cuh"
#include "common/packed_vec.cuh"
#include "common/paged_slot.cuh"
#include "rope/rope_launch.h"

namespace baracuda::rope {

namespace {

using kernels::Pack;

template <class C> __device__ __forceinline__ float cache_at(const void* p, DType t, int64_t i) {
  return t == DType::Float32 ? static_cast<const float*>(p)[i] : kernels::to_compute(static_cast<const C*>(p)[i]);
}

template <class T, int V> __device__ __forceinline__ void load(const T* p, float (&v)[V]) {
  const Pack<T, V> pk = *reinterpret_cast<const Pack<T, V>*>(p);
#pragma unroll
  for (int j = 0; j < V; ++j) v[j] = kernels::to_compute(pk.v[j]);
}
template <class T, int V> __device__ __forceinline__ void store(T* p, const float (&v)[V]) {
  Pack<T, V> pk;
#pragma unroll
  for (int j = 0; j < V; ++j) pk.v[j] = kernels::from_compute<T>(v[j]);
  *reinterpret_cast<Pack<T, V>*>(p) = pk;
}

template <class T, int V, bool GPTJ>
__global__ void rope_kernel(const Geometry g, const Pointers p) {
  const int64_t b = blockIdx.x / g.seq, s = blockIdx.x % g.seq;
  int64_t pos = s;
  if (g.positions) {
    const int64_t at = b * g.pos_batch + s * g.pos_seq;
    pos = g.positions_dtype == DType::Int32 ? int64_t(static_cast<const int32_t*>(p.positions)[at])
                                            : static_cast<const int64_t*>(p.positions)[at];
  }
  const int half = g.rotary_dim / 2;
  const Operand& x = p.x[blockIdx.y];
  const char* in_tok = static_cast<const char*>(x.in) + (b * x.in_batch + s * x.in_seq) * int64_t(sizeof(T));
  char* out_tok = static_cast<char*>(x.out) + (b * x.out_batch + s * x.out_seq) * int64_t(sizeof(T));
  T* paged_tok = nullptr;  // this token's rows in the operand's cache, when it has one and the slot is real
  int64_t page, row;
  if (x.paged && kernels::paged_slot(p.slots, g.slots_int32, b * g.slot_batch + s * g.slot_seq, g.pages, g.page_size,
                                     page, row))
    paged_tok = static_cast<T*>(x.paged) + page * x.paged_page + row * x.paged_slot;
  if (x.copy_only) {
    if (paged_tok == nullptr) return;
    for (int h = threadIdx.y; h < x.heads; h += blockDim.y) {
      const T* in = reinterpret_cast<const T*>(in_tok) + h * x.in_head;
      T* out = paged_tok + h * x.paged_head;
      for (int d = threadIdx.x; d < x.copy_dim; d += blockDim.x) out[d] = in[d];
    }
    return;
  }

  for (int j = threadIdx.x * V; j < half; j += blockDim.x * V) {
    float c[V], sn[V];
    if (g.cache) {
      const int64_t row = (pos < 0 ? 0 : pos >= g.cache_positions ? g.cache_positions - 1 : pos) * half;
#pragma unroll
      for (int v = 0; v < V; ++v) {
        c[v] = cache_at<T>(p.cos, g.cache_dtype, row + j + v);
        sn[v] = cache_at<T>(p.sin, g.cache_dtype, row + j + v);
      }
    } else {
#pragma unroll
      for (int v = 0; v < V; ++v) {
        // f32 angle, as the reference implementations compute it; sincosf reduces large angles exactly
        sincosf(float(pos) * g.inv_freq[j + v], &sn[v], &c[v]);
        c[v] *= g.attention_factor;
        sn[v] *= g.attention_factor;
      }
    }
    if (g.inverse)
#pragma unroll
      for (int v = 0; v < V; ++v) sn[v] = -sn[v];
    for (int h = threadIdx.y; h < x.heads; h += blockDim.y) {
      const T* in = reinterpret_cast<const T*>(in_tok) + h * x.in_head;
      T* out = reinterpret_cast<T*>(out_tok) + h * x.out_head;
      T* cached = paged_tok ? paged_tok + h * x.paged_head : nullptr;
      if constexpr (GPTJ) {
        float a[2 * V], r[2 * V];
        if constexpr (V == 1) {  // the scalar path: rows may not be aligned to a pair
          a[0] = kernels::to_compute(in[2 * j]);
          a[1] = kernels::to_compute(in[2 * j + 1]);
        } else {
          load<T, 2 * V>(in + 2 * j, a);
        }
#pragma unroll
        for (int v = 0; v < V; ++v) {
          r[2 * v] = a[2 * v] * c[v] - a[2 * v + 1] * sn[v];
          r[2 * v + 1] = a[2 * v + 1] * c[v] + a[2 * v] * sn[v];
        }
        if constexpr (V == 1) {
          out[2 * j] = kernels::from_compute<T>(r[0]);
          out[2 * j + 1] = kernels::from_compute<T>(r[1]);
          if (cached) {
            cached[2 * j] = kernels::from_compute<T>(r[0]);
            cached[2 * j + 1] = kernels::from_compute<T>(r[1]);
          }
        } else {
          store<T, 2 * V>(out + 2 * j, r);
          if (cached) store<T, 2 * V>(cached + 2 * j, r);
        }
      } else {
        float a1[V], a2[V], r1[V], r2[V];
        load<T, V>(in + j, a1);
        load<T, V>(in + half + j, a2);
#pragma unroll
        for (int v = 0; v < V; ++v) {
          r1[v] = a1[v] * c[v] - a2[v] * sn[v];
          r2[v] = a2[v] * c[v] + a1[v] * sn[v];
        }
        store<T, V>(out + j, r1);
        store<T, V>(out + half + j, r2);
        if (cached) {
          store<T, V>(cached + j, r1);
          store<T, V>(cached + half + j, r2);
        }
      }
    }
  }
  if (g.rotary_dim < g.head_dim && (x.in != x.out || paged_tok)) {  // the pass-through part, out of place
    const int tail = g.head_dim - g.rotary_dim;
    for (int h = threadIdx.y; h < x.heads; h += blockDim.y) {
      const T* in = reinterpret_cast<const T*>(in_tok) + h * x.in_head + g.rotary_dim;
      T* out = reinterpret_cast<T*>(out_tok) + h * x.out_head + g.rotary_dim;
      T* cached = paged_tok ? paged_tok + h * x.paged_head + g.rotary_dim : nullptr;
      for (int d = threadIdx.x; d < tail; d += blockDim.x) {
        const T v = in[d];
        if (x.in != x.out) out[d] = v;
        if (cached) cached[d] = v;
      }
    }
  }
}

template <class T, int V> void launch_style(const Geometry& g, const Pointers& p, dim3 grid, dim3 block, cudaStream_t st) {
  if (g.gptj) rope_kernel<T, V, true><<<grid, block, 0, st>>>(g, p);
  else rope_kernel<T, V, false><<<grid, block, 0, st>>>(g, p);
}

}  // namespace

void rope(const Geometry& g, const Pointers& p, void* stream) {
  const int64_t tokens = g.batch * g.seq;
  if (tokens == 0) return;
  const int chunks = (g.rotary_dim / 2 + g.vec - 1) / g.vec;
  int tx = 1;
  while (tx < chunks && tx < 32) tx *= 2;
  const dim3 block(unsigned(tx), unsigned(128 / tx));
  const dim3 grid(unsigned(tokens), unsigned(p.count));
  auto st = static_cast<cudaStream_t>(stream);
  auto go = [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (g.vec == 4) launch_style<T, 4>(g, p, grid, block, st);
    else launch_style<T, 1>(g, p, grid, block, st);
  };
  switch (g.dtype) {
    case DType::Float16: go(kernels::TypeTag<kernels::f16>{}); break;
    case DType::BFloat16: go(kernels::TypeTag<kernels::bf16>{}); break;
    case DType::Float32: go(kernels::TypeTag<float>{}); break;
    default: throw Unsupported(std::string("rope: no kernel for ") + dtype_name(g.dtype));
  }
  cuda_check(cudaGetLastError(), "rope launch");
}

}  // namespace baracuda::rope
