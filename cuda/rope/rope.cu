// RoPE: a block takes a few consecutive tokens (enough work for its threads). Every thread issues the
// reads of its first two (token, operand, head, chunk) items, each chunk 16 bytes of both halves of a
// pair set; meanwhile the block computes each token's angles once into shared memory (shared by every
// head of q and k); then the items are rotated and stored, two in flight per thread. With a paged KV
// cache the rotated k also goes to the token's slot and v is copied to its own.
#include <algorithm>
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

constexpr int kThreads = 256;
constexpr int kUnroll = 2;  // items loaded before the first is stored
constexpr int kMaxTokensPerBlock = 16;

template <class C> __device__ __forceinline__ float cache_at(const void* p, DType t, int64_t i) {
  return t == DType::Float32 ? static_cast<const float*>(p)[i] : kernels::to_compute(static_cast<const C*>(p)[i]);
}

// W raw elements: one 16-byte access when WIDE (p aligned), else element by element. Kept raw (not
// widened to f32) between the load and the math so that two items in flight cost few registers.
template <class T, int W> struct Raw { T v[W]; };
template <class T, int W, bool WIDE> __device__ __forceinline__ Raw<T, W> load_raw(const T* p) {
  Raw<T, W> r;
  if constexpr (WIDE) {
    const Pack<T, W> pk = *reinterpret_cast<const Pack<T, W>*>(p);
#pragma unroll
    for (int j = 0; j < W; ++j) r.v[j] = pk.v[j];
  } else {
#pragma unroll
    for (int j = 0; j < W; ++j) r.v[j] = p[j];
  }
  return r;
}
template <class T, int W, bool WIDE> __device__ __forceinline__ void store(T* p, const float (&v)[W]) {
  if constexpr (WIDE) {
    Pack<T, W> pk;
#pragma unroll
    for (int j = 0; j < W; ++j) pk.v[j] = kernels::from_compute<T>(v[j]);
    *reinterpret_cast<Pack<T, W>*>(p) = pk;
  } else {
#pragma unroll
    for (int j = 0; j < W; ++j) p[j] = kernels::from_compute<T>(v[j]);
  }
}

// Elements per access: 16 bytes when wide; else one element (neox) or one pair (gptj).
template <class T, bool WIDE, bool GPTJ> constexpr int access_width() { return WIDE ? 16 / int(sizeof(T)) : GPTJ ? 2 : 1; }

// One rotation item: a head of q or k of block token t, and chunk c of its rotated part (neox: elements
// [cW, cW + W) and the same past rotary_dim / 2; gptj: elements [cW, cW + W), W / 2 pairs). Kept small
// (two items live per thread): the output row, and for k the element offset of its chunk in a cache row.
template <class T> struct Item {
  T* out;
  int t, c;
  int64_t cache_off;  // -1: q (not cached)
};

template <class T, bool WIDE, bool GPTJ>
__global__ void __launch_bounds__(kThreads, 4) rope_kernel(const Geometry g, const Pointers p, int tpb) {
  constexpr int W = access_width<T, WIDE, GPTJ>();
  extern __shared__ float2 angle[];  // [tpb][half]: (cos, sin), sin already negated for the inverse
  __shared__ int64_t tok_page[kMaxTokensPerBlock], tok_row[kMaxTokensPerBlock];  // cache slot (page -1: none)
  const int half = g.rotary_dim / 2;
  const int64_t tokens = g.batch * g.seq, tok0 = int64_t(blockIdx.x) * tpb;
  const int ntok = int(tokens - tok0 < tpb ? tokens - tok0 : tpb);
  const bool append = p.count >= 2 && p.x[1].paged != nullptr;

  // Rotation items: token-major, then q's heads, then k's, then chunks.
  const int nc = GPTJ ? g.rotary_dim / W : half / W;
  const int hq = p.x[0].heads, heads = hq + (p.count >= 2 ? p.x[1].heads : 0);
  const int per_tok = heads * nc;
  const int n = ntok * per_tok;
  Item<T> it[kUnroll];
  Raw<T, W> a[kUnroll], a2[kUnroll];
  auto load_items = [&](int i0) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int i = i0 + u * int(blockDim.x);
      if (i >= n) break;
      const int t = i / per_tok, r = i - t * per_tok, hh = r / nc, c = r - hh * nc;
      const int o = hh < hq ? 0 : 1, h = hh < hq ? hh : hh - hq;
      const Operand& x = p.x[o];
      const int64_t b = (tok0 + t) / g.seq, s = (tok0 + t) - b * g.seq;
      const T* in = static_cast<const T*>(x.in) + b * x.in_batch + s * x.in_seq + h * x.in_head + c * W;
      it[u].out = static_cast<T*>(x.out) + b * x.out_batch + s * x.out_seq + h * x.out_head + c * W;
      it[u].t = t;
      it[u].c = c;
      it[u].cache_off = o == 1 ? h * x.paged_head + c * W : -1;
      a[u] = load_raw<T, W, WIDE>(in);
      if constexpr (!GPTJ) a2[u] = load_raw<T, W, WIDE>(in + half);
    }
  };
  // The first items' reads go out before the angles are computed: they do not depend on them.
  load_items(threadIdx.x);

  for (int i = threadIdx.x; i < ntok * half; i += blockDim.x) {
    const int t = i / half, j = i - t * half;
    const int64_t b = (tok0 + t) / g.seq, s = (tok0 + t) - b * g.seq;
    int64_t pos = s;
    if (g.positions) {
      const int64_t at = b * g.pos_batch + s * g.pos_seq;
      pos = g.positions_dtype == DType::Int32 ? int64_t(static_cast<const int32_t*>(p.positions)[at])
                                              : static_cast<const int64_t*>(p.positions)[at];
    }
    float c, sn;
    if (g.cache) {
      const int64_t row = (pos < 0 ? 0 : pos >= g.cache_positions ? g.cache_positions - 1 : pos) * half;
      c = cache_at<T>(p.cos, g.cache_dtype, row + j);
      sn = cache_at<T>(p.sin, g.cache_dtype, row + j);
    } else {
      // f32 angle, as the reference implementations compute it; sincosf reduces large angles exactly
      sincosf(float(pos) * g.inv_freq[j], &sn, &c);
      c *= g.attention_factor;
      sn *= g.attention_factor;
    }
    angle[i] = make_float2(c, g.inverse ? -sn : sn);
  }
  if (append && int(threadIdx.x) < ntok) {
    const int64_t tok = tok0 + threadIdx.x, b = tok / g.seq, s = tok - b * g.seq;
    int64_t page, row;
    const bool real = kernels::paged_slot(p.slots, g.slots_int32, b * g.slot_batch + s * g.slot_seq, g.pages,
                                          g.page_size, page, row);
    tok_page[threadIdx.x] = real ? page : -1;
    tok_row[threadIdx.x] = real ? row : 0;
  }
  __syncthreads();

  for (int i0 = threadIdx.x; i0 < n; i0 += blockDim.x * kUnroll) {
    if (i0 != int(threadIdx.x)) load_items(i0);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int i = i0 + u * int(blockDim.x);
      if (i >= n) break;
      const Item<T>& t = it[u];
      const float2* ang = angle + t.t * half;
      float r1[W], r2[W];
      if constexpr (GPTJ) {
#pragma unroll
        for (int v = 0; v < W / 2; ++v) {
          const float2 cs = ang[(t.c * W) / 2 + v];
          const float x1 = kernels::to_compute(a[u].v[2 * v]), x2 = kernels::to_compute(a[u].v[2 * v + 1]);
          r1[2 * v] = x1 * cs.x - x2 * cs.y;
          r1[2 * v + 1] = x2 * cs.x + x1 * cs.y;
        }
      } else {
#pragma unroll
        for (int v = 0; v < W; ++v) {
          const float2 cs = ang[t.c * W + v];
          const float x1 = kernels::to_compute(a[u].v[v]), x2 = kernels::to_compute(a2[u].v[v]);
          r1[v] = x1 * cs.x - x2 * cs.y;
          r2[v] = x2 * cs.x + x1 * cs.y;
        }
      }
      T* out = t.out;
      T* cached = t.cache_off >= 0 && append && tok_page[t.t] >= 0
                      ? static_cast<T*>(p.x[1].paged) + tok_page[t.t] * p.x[1].paged_page +
                            tok_row[t.t] * p.x[1].paged_slot + t.cache_off
                      : nullptr;
      store<T, W, WIDE>(out, r1);
      if (cached) store<T, W, WIDE>(cached, r1);
      if constexpr (!GPTJ) {
        store<T, W, WIDE>(out + half, r2);
        if (cached) store<T, W, WIDE>(cached + half, r2);
      }
    }
  }

  if (p.count == 3) {  // v: copied to its cache slot as it is, 16 bytes (or one element) per access
    const Operand& x = p.x[2];
    constexpr int VW = 16 / int(sizeof(T));
    const int per_head = g.v_wide ? x.copy_dim / VW : x.copy_dim;
    const int nv = ntok * x.heads * per_head;
    for (int i = threadIdx.x; i < nv; i += blockDim.x) {
      const int t = i / (x.heads * per_head), r = i - t * (x.heads * per_head), h = r / per_head, c = r - h * per_head;
      if (tok_page[t] < 0) continue;
      const int64_t b = (tok0 + t) / g.seq, s = (tok0 + t) - b * g.seq;
      const T* in = static_cast<const T*>(x.in) + b * x.in_batch + s * x.in_seq + h * x.in_head;
      T* dst = static_cast<T*>(x.paged) + tok_page[t] * x.paged_page + tok_row[t] * x.paged_slot + h * x.paged_head;
      if (g.v_wide) {
        *reinterpret_cast<Pack<T, VW>*>(dst + c * VW) = *reinterpret_cast<const Pack<T, VW>*>(in + c * VW);
      } else {
        dst[c] = in[c];
      }
    }
  }

  if (g.rotary_dim < g.head_dim) {  // the pass-through part, when out of place or cached
    const int tail = g.head_dim - g.rotary_dim;
    for (int o = 0; o < (p.count >= 2 ? 2 : 1); ++o) {
      const Operand& x = p.x[o];
      const bool cache = o == 1 && append;
      if (x.in == x.out && !cache) continue;
      for (int i = threadIdx.x; i < ntok * x.heads * tail; i += blockDim.x) {
        const int t = i / (x.heads * tail), r = i % (x.heads * tail), h = r / tail, d = r % tail;
        const int64_t b = (tok0 + t) / g.seq, s = (tok0 + t) - b * g.seq;
        const T v = static_cast<const T*>(x.in)[b * x.in_batch + s * x.in_seq + h * x.in_head + g.rotary_dim + d];
        if (x.in != x.out) static_cast<T*>(x.out)[b * x.out_batch + s * x.out_seq + h * x.out_head + g.rotary_dim + d] = v;
        if (cache && tok_page[t] >= 0)
          static_cast<T*>(x.paged)[tok_page[t] * x.paged_page + tok_row[t] * x.paged_slot + h * x.paged_head +
                                   g.rotary_dim + d] = v;
      }
    }
  }
}

}  // namespace

void rope(const Geometry& g, const Pointers& p, void* stream) {
  const int64_t tokens = g.batch * g.seq;
  if (tokens == 0) return;
  // Tokens per block: about four rotation items per thread of a 256-thread block, but no fewer blocks
  // than about two per SM (264) while the batch allows, so that small (decode) batches spread over the
  // GPU; then the threads trimmed (in warps) to the block's items, four each at most.
  const int half = g.rotary_dim / 2;
  const int w = g.wide ? 16 / int(dtype_size(g.dtype)) : g.gptj ? 2 : 1;
  const int per_tok = (p.x[0].heads + (p.count >= 2 ? p.x[1].heads : 0)) * std::max(1, (g.gptj ? 2 * half : half) / w);
  int tpb = int(std::clamp<int64_t>(4 * kThreads / std::max(1, per_tok), 1, kMaxTokensPerBlock));
  tpb = int(std::min<int64_t>(tpb, std::max<int64_t>(1, tokens / 264)));
  const int threads = std::clamp((tpb * per_tok + 4 * 32 - 1) / (4 * 32) * 32, 64, kThreads);
  const unsigned grid = unsigned((tokens + tpb - 1) / tpb);
  const size_t smem = size_t(tpb) * half * sizeof(float2);
  auto st = static_cast<cudaStream_t>(stream);
  auto go = [&](auto tag) {
    using T = typename decltype(tag)::type;
    auto launch = [&](auto kernel) { kernel<<<grid, threads, smem, st>>>(g, p, tpb); };
    if (g.wide) {
      if (g.gptj) launch(rope_kernel<T, true, true>);
      else launch(rope_kernel<T, true, false>);
    } else {
      if (g.gptj) launch(rope_kernel<T, false, true>);
      else launch(rope_kernel<T, false, false>);
    }
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
