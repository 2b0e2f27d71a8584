// RoPE: a block takes a run of consecutive tokens, and each of its threads one fixed item of a token
// (16 bytes of both halves of a pair set of one q or k head, or 16 bytes of v for its cache): the item's
// role and offsets are decoded once, then the thread walks the block's tokens, several tokens' reads
// out ahead of its stores (16-byte accesses through a ring in shared memory, element accesses in
// registers). The first reads go out before the block computes each token's angles
// into shared memory (shared by every head of q and k). With a paged KV cache the rotated k also goes
// to the token's slot and v is copied to its own. Items past one block's threads take more blocks
// (grid.y), each over the same tokens.
#include <algorithm>
#include <string>
#include <type_traits>

#include "baracuda/errors.h"
#include "common/async_copy.cuh"
#include "common/cuda_check.h"
#include "common/dtype_traits.cuh"
#include "common/packed_vec.cuh"
#include "common/paged_slot.cuh"
#include "common/smem_opt_in.h"
#include "rope/rope_launch.h"

namespace baracuda::rope {

namespace {


constexpr int kThreads = 256;
// Element accesses (unaligned rows): a thread's reads out in registers before its first store, and
// the register cap (blocks of kThreads per SM): three blocks of two tokens in flight beat two of four.
constexpr int kTokensInFlight = 2;
constexpr int kMinBlocksPerSm = 3;
// 16-byte accesses go through shared memory by cp.async instead: a thread has kStagedTokens tokens'
// reads out at once without holding them in registers (a ring of slots), four blocks per SM; 4:4
// beat 8:3, 6:4, 3:5 and 2:6 (tools/probe; docs/benchmark-notes.md, RoPE).
constexpr int kStagedTokens = 4;
constexpr int kStagedMinBlocksPerSm = 4;
constexpr int kMaxTokensPerBlock = 16;
// The rule's cap: eight measured faster than sixteen on most large batches (docs/benchmark-notes.md, RoPE).
constexpr int kDefaultTokensPerBlock = 8;
// 16-byte accesses on batches that give at least 32 tokens per block at about two blocks per SM:
// four tokens per block (more, shorter blocks) beat eight there, with the cache append or without,
// since a group's positions and slots are read ahead of its tokens (docs/benchmark-notes.md, RoPE).
constexpr int kWideTokensPerBlock = 4, kWideMinTokens = 32;

// float2 angle slots of a block's tokens in shared memory, rounded up to an even count so that the
// ring of 16-byte reads after them starts 16-byte aligned.
__host__ __device__ constexpr int angle_slots(int tpb, int half) { return (tpb * half + 1) & ~1; }

template <class C> __device__ __forceinline__ float cache_at(const void* p, DType t, int64_t i) {
  return t == DType::Float32 ? static_cast<const float*>(p)[i] : kernels::to_compute(static_cast<const C*>(p)[i]);
}

// A token's W elements of one access, raw between the load and the math: 16 bytes as packed_vec.cuh's
// four words, unpacked on use (two 16-bit elements to a register, so that several tokens in flight
// cost few registers), else the element (neox) or the pair (gptj) of an unaligned row.
template <class T, int W, bool WIDE> struct Raw {
  T v[W];
  __device__ __forceinline__ float at(int j) const { return kernels::to_compute(v[j]); }
};
template <class T, int W> struct Raw<T, W, true> {
  uint4 u;
  __device__ __forceinline__ float at(int j) const { return kernels::unpack<T>(u, j); }
};
template <class T, int W, bool WIDE> __device__ __forceinline__ Raw<T, W, WIDE> load_raw(const T* p) {
  Raw<T, W, WIDE> r;
  if constexpr (WIDE) {
    static_assert(W * sizeof(T) == 16, "a wide access is 16 bytes");
    r.u = *reinterpret_cast<const uint4*>(p);
  } else {
#pragma unroll
    for (int j = 0; j < W; ++j) r.v[j] = p[j];
  }
  return r;
}
// W rotated values at p: one 16-byte store (packed_vec.cuh's store_vec) when WIDE, else element by element.
template <class T, int W, bool WIDE> __device__ __forceinline__ void store(T* p, const float (&v)[W]) {
  if constexpr (WIDE) {
    kernels::store_vec<T>(p, v);
  } else {
#pragma unroll
    for (int j = 0; j < W; ++j) p[j] = kernels::from_compute<T>(v[j]);
  }
}

// W values into an fp8 cache as kv_cache_append rounds them: fp8(x / scale) of x as stored in T,
// saturated to the finite range; one W-byte store when `vec` (W of 4 or 8), else byte by byte.
template <class T, int W>
__device__ __forceinline__ void store_fp8(unsigned char* p, const float (&v)[W], float scale, bool e4m3, bool vec) {
  unsigned char b[W];
#pragma unroll
  for (int j = 0; j < W; ++j) {
    const float x = kernels::to_compute(kernels::from_compute<T>(v[j])) / scale;
    b[j] = e4m3 ? kernels::from_compute<kernels::e4m3>(x).__x : kernels::from_compute<kernels::e5m2>(x).__x;
  }
  if constexpr (W == 8 || W == 4) {
    if (vec) {
      using Word = std::conditional_t<W == 8, uint2, uint32_t>;
      Word w;
      memcpy(&w, b, W);
      *reinterpret_cast<Word*>(p) = w;
      return;
    }
  }
#pragma unroll
  for (int j = 0; j < W; ++j) p[j] = b[j];
}

// Entry i of an int32 or int64 index tensor (positions, slot mapping) into a shared-memory slot by
// cp.async (an int32 in the slot's low half), and the entry read back from its slot.
__device__ __forceinline__ void cp_async_index(int64_t* slot, const void* src, bool int32, int64_t i) {
  if (int32) kernels::cp_async4_zfill(slot, static_cast<const int32_t*>(src) + i, true);
  else kernels::cp_async8_zfill(slot, static_cast<const int64_t*>(src) + i, true);
}
__device__ __forceinline__ int64_t index_in(const int64_t& slot, bool int32) {
  return int32 ? int64_t(reinterpret_cast<const int32_t*>(&slot)[0]) : slot;
}

// An fp8 cache's scale for kv head h: per head, one for the tensor, or 1 (no scales given).
__device__ __forceinline__ float kv_scale(const float* scales, const Geometry& g, int h) {
  return scales ? scales[g.scale_per_head ? h : 0] : 1.f;
}

// Elements per access: 16 bytes when wide; else one element (neox) or one pair (gptj).
template <class T, bool WIDE, bool GPTJ> constexpr int access_width() { return WIDE ? 16 / int(sizeof(T)) : GPTJ ? 2 : 1; }

// A token's place: batch and sequence index (32-bit: the launcher bounds the tokens), advanced one
// token at a time with no division.
struct TokenCursor {
  uint32_t b = 0, s = 0, seq = 1;
  TokenCursor() = default;
  __device__ TokenCursor(int64_t tok, int64_t seq_len) : seq(uint32_t(seq_len)) {
    b = uint32_t(tok) / seq;
    s = uint32_t(tok) - b * seq;
  }
  __device__ void next() {
    if (++s == seq) s = 0, ++b;
  }
};

template <class T, bool WIDE, bool GPTJ>
__global__ void __launch_bounds__(kThreads, WIDE ? kStagedMinBlocksPerSm : kMinBlocksPerSm)
    rope_kernel(const Geometry g, const Pointers p, int tpb) {
  constexpr int W = access_width<T, WIDE, GPTJ>();
  constexpr int VW = 16 / int(sizeof(T));
  extern __shared__ float2 angle[];  // [tpb][half]: (cos, sin), sin already negated for the inverse
  // WIDE: then the ring [kStagedTokens][2][blockDim.x] of 16-byte reads (a thread's first and second
  // access of a token; 16-byte strides across threads: no bank conflicts)
  uint4* const ring = reinterpret_cast<uint4*>(angle + angle_slots(tpb, g.rotary_dim / 2));
  __shared__ int64_t tok_page[kMaxTokensPerBlock], tok_row[kMaxTokensPerBlock];  // cache slot (page -1: none)
  // The group's positions and slot-mapping entries as read (int32 in an entry's low half)
  __shared__ int64_t tok_pos_raw[kMaxTokensPerBlock], tok_slot_raw[kMaxTokensPerBlock];
  const int half = g.rotary_dim / 2;
  const int64_t tokens = g.batch * g.seq;
  int64_t tok0 = 0;  // the block's group of tokens (a persistent grid loops over several)
  int ntok = 0;
  const bool append = p.count >= 2 && p.x[1].paged != nullptr;

  // This thread's item of each token: q's heads, then k's (rotated, nc chunks each), then v's (copied).
  const int nc = GPTJ ? g.rotary_dim / W : half / W;
  const int hq = p.x[0].heads, hk = p.count >= 2 ? p.x[1].heads : 0;
  const int rot_items = (hq + hk) * nc;
  const int v_chunks = p.count == 3 ? (g.v_wide ? p.x[2].copy_dim / VW : p.x[2].copy_dim) : 0;
  const int items = rot_items + (p.count == 3 ? p.x[2].heads * v_chunks : 0);
  const int k = int(blockIdx.y * blockDim.x + threadIdx.x);
  int o = -1, h = 0, c = 0;  // o: the operand (-1: no item)
  if (k < rot_items) {
    const int hh = k / nc;
    c = k - hh * nc;
    o = hh < hq ? 0 : 1;
    h = hh < hq ? hh : hh - hq;
  } else if (k < items) {
    o = 2;
    h = (k - rot_items) / v_chunks;
    c = (k - rot_items) - h * v_chunks;
  }
  const Operand& x = p.x[o < 0 ? 0 : o];
  const int elem = o == 2 ? (g.v_wide ? c * VW : c) : c * W;  // the item's first element in its head
  const T* in_base = static_cast<const T*>(x.in) + h * x.in_head + elem;
  T* out_base = static_cast<T*>(x.out) + h * x.out_head + elem;
  const int64_t cache_off = h * x.paged_head + elem;
  // fp8 caches: this item's scale (k's or v's, per kv head or one)
  const bool fp8 = g.kv_dtype != g.dtype, e4m3 = g.kv_dtype == DType::Float8E4M3;
  const float* scales = o == 1 ? p.k_scale : o == 2 ? p.v_scale : nullptr;
  const float qscale = fp8 ? kv_scale(scales, g, h) : 1.f;

  Raw<T, W, WIDE> a[kTokensInFlight], a2[kTokensInFlight];
  // v's 16-byte items: in a's registers when those are 16 bytes too (an unaligned v row is copied
  // element by element when it is stored)
  Raw<T, VW, true> v_own[WIDE ? 1 : kTokensInFlight];
  auto vr = [&](int u) -> Raw<T, VW, true>& {
    if constexpr (WIDE) return a[u];
    else return v_own[u];
  };
  TokenCursor cur, cur_out;  // the next token to read, to store
  auto load = [&](int t0) {
#pragma unroll
    for (int u = 0; u < kTokensInFlight; ++u) {
      if (o < 0 || t0 + u >= ntok) break;
      const T* in = in_base + cur.b * x.in_batch + cur.s * x.in_seq;
      cur.next();
      if (o == 2) {
        if (g.v_wide) vr(u) = load_raw<T, VW, true>(in);
      } else {
        a[u] = load_raw<T, W, WIDE>(in);
        if constexpr (!GPTJ) a2[u] = load_raw<T, W, WIDE>(in + half);
      }
    }
  };
  // Token t's item from the registers of slot u: rotated (or v copied) and stored.
  auto finish_token = [&](int u, int t) {
    const TokenCursor at = cur_out;
    cur_out.next();
    T* out = out_base + at.b * x.out_batch + at.s * x.out_seq;
    const bool cached = o >= 1 && append && tok_page[t] >= 0;
    const int64_t coff = cached ? tok_page[t] * x.paged_page + tok_row[t] * x.paged_slot + cache_off : 0;
    T* dst = cached && !fp8 ? static_cast<T*>(x.paged) + coff : nullptr;
    unsigned char* dst8 = cached && fp8 ? static_cast<unsigned char*>(x.paged) + coff : nullptr;
    if (o == 2) {  // v: to its cache only, its bits as they are (or quantized)
      if (!cached) return;
      if (fp8) {
        if (g.v_wide) {
          float vv[VW];
#pragma unroll
          for (int j = 0; j < VW; ++j) vv[j] = vr(u).at(j);
          store_fp8<T, VW>(dst8, vv, qscale, e4m3, g.cache8_wide);
        } else {
          const float vv[1] = {kernels::to_compute(in_base[at.b * x.in_batch + at.s * x.in_seq])};
          store_fp8<T, 1>(dst8, vv, qscale, e4m3, false);
        }
      } else if (g.v_wide) {
        kernels::stg16(dst, vr(u).u);
      } else {
        *dst = in_base[at.b * x.in_batch + at.s * x.in_seq];
      }
      return;
    }
    const float2* ang = angle + t * half;
    float r1[W], r2[W];
    if constexpr (GPTJ) {
#pragma unroll
      for (int v = 0; v < W / 2; ++v) {
        const float2 cs = ang[(c * W) / 2 + v];
        const float x1 = a[u].at(2 * v), x2 = a[u].at(2 * v + 1);
        r1[2 * v] = x1 * cs.x - x2 * cs.y;
        r1[2 * v + 1] = x2 * cs.x + x1 * cs.y;
      }
    } else {
#pragma unroll
      for (int v = 0; v < W; ++v) {
        const float2 cs = ang[c * W + v];
        const float x1 = a[u].at(v), x2 = a2[u].at(v);
        r1[v] = x1 * cs.x - x2 * cs.y;
        r2[v] = x2 * cs.x + x1 * cs.y;
      }
    }
    store<T, W, WIDE>(out, r1);
    if (dst) store<T, W, WIDE>(dst, r1);
    if (dst8) store_fp8<T, W>(dst8, r1, qscale, e4m3, WIDE && g.cache8_wide);
    if constexpr (!GPTJ) {
      store<T, W, WIDE>(out + half, r2);
      if (dst) store<T, W, WIDE>(dst + half, r2);
      if (dst8) store_fp8<T, W>(dst8 + half, r2, qscale, e4m3, WIDE && g.cache8_wide);
    }
  };
  auto finish = [&](int t0) {
#pragma unroll
    for (int u = 0; u < kTokensInFlight; ++u) {
      if (o < 0 || t0 + u >= ntok) break;
      finish_token(u, t0 + u);
    }
  };
  // WIDE: token t's reads into ring slot t % kStagedTokens (one commit group per token, empty past
  // the group's tokens, so that a constant wait finds token t's group done).
  auto ring_slot = [&](int t) { return ring + (t % kStagedTokens) * 2 * blockDim.x + threadIdx.x; };
  auto stage = [&](int t) {
    if (o >= 0 && t < ntok) {
      const T* in = in_base + cur.b * x.in_batch + cur.s * x.in_seq;
      cur.next();
      uint4* slot = ring_slot(t);
      if (o != 2) {
        kernels::cp_async16(slot, in);
        if constexpr (!GPTJ) kernels::cp_async16(slot + blockDim.x, in + half);
      } else if (g.v_wide) {
        kernels::cp_async16(slot, in);
      }
    }
    kernels::cp_async_commit();
  };
  auto unstage = [&](int t) {
    if constexpr (WIDE) {
      const uint4* slot = ring_slot(t);
      a[0].u = slot[0];
      if constexpr (!GPTJ) a2[0].u = slot[blockDim.x];
    }
  };
  for (tok0 = int64_t(blockIdx.x) * tpb; tok0 < tokens; tok0 += int64_t(gridDim.x) * tpb) {
    ntok = int(tokens - tok0 < tpb ? tokens - tok0 : tpb);
    cur = TokenCursor(tok0, g.seq);
    cur_out = cur;
    // The group's positions and slots go out first, in a commit group of their own, then the first
    // tokens' reads: the angles wait for the small reads only, and are computed while the tokens'
    // are in flight.
    const bool meta = g.positions || append;
    if (meta && int(threadIdx.x) < ntok) {
      TokenCursor at(tok0 + threadIdx.x, g.seq);
      if (g.positions)
        cp_async_index(&tok_pos_raw[threadIdx.x], p.positions, g.positions_dtype == DType::Int32,
                       at.b * g.pos_batch + at.s * g.pos_seq);
      if (append)
        cp_async_index(&tok_slot_raw[threadIdx.x], p.slots, g.slots_int32, at.b * g.slot_batch + at.s * g.slot_seq);
    }
    kernels::cp_async_commit();
    if constexpr (WIDE) {
#pragma unroll
      for (int t = 0; t < kStagedTokens; ++t) stage(t);
      kernels::cp_async_wait<kStagedTokens>();
    } else {
      load(0);
      kernels::cp_async_wait<0>();
    }
    if (meta) __syncthreads();  // the positions and slots of every thread's reads are in place

    for (int i = threadIdx.x; i < ntok * half; i += blockDim.x) {
      const int t = i / half, j = i - t * half;
      const int64_t pos = g.positions ? index_in(tok_pos_raw[t], g.positions_dtype == DType::Int32)
                                      : int64_t(TokenCursor(tok0 + t, g.seq).s);
      float cs, sn;
      if (g.cache) {
        const int64_t row = (pos < 0 ? 0 : pos >= g.cache_positions ? g.cache_positions - 1 : pos) * half;
        cs = cache_at<T>(p.cos, g.cache_dtype, row + j);
        sn = cache_at<T>(p.sin, g.cache_dtype, row + j);
      } else {
        // f32 angle, as the reference implementations compute it; sincosf reduces large angles exactly
        sincosf(float(pos) * g.inv_freq[j], &sn, &cs);
        cs *= g.attention_factor;
        sn *= g.attention_factor;
      }
      angle[i] = make_float2(cs, g.inverse ? -sn : sn);
    }
    if (append && int(threadIdx.x) < ntok) {
      int64_t page, row;
      const bool real =
          kernels::paged_slot_of(index_in(tok_slot_raw[threadIdx.x], g.slots_int32), g.pages, g.page_size, page, row);
      tok_page[threadIdx.x] = real ? page : -1;
      tok_row[threadIdx.x] = real ? row : 0;
    }
    __syncthreads();
    if constexpr (WIDE) {
      for (int t = 0; t < ntok; ++t) {
        kernels::cp_async_wait<kStagedTokens - 1>();
        if (o >= 0) {
          unstage(t);
          finish_token(0, t);
        }
        stage(t + kStagedTokens);
      }
    } else {
      finish(0);
      for (int t0 = kTokensInFlight; t0 < ntok; t0 += kTokensInFlight) {
        load(t0);
        finish(t0);
      }
    }

    if (g.rotary_dim < g.head_dim && blockIdx.y == 0) {  // the pass-through part, when out of place or cached
      const int tail = g.head_dim - g.rotary_dim;
      for (int oo = 0; oo < (p.count >= 2 ? 2 : 1); ++oo) {
        const Operand& y = p.x[oo];
        const bool cache = oo == 1 && append;
        if (y.in == y.out && !cache) continue;
        for (int i = threadIdx.x; i < ntok * y.heads * tail; i += blockDim.x) {
          const int t = i / (y.heads * tail), r = i % (y.heads * tail), hh = r / tail, d = r % tail;
          const TokenCursor at(tok0 + t, g.seq);
          const T v = static_cast<const T*>(y.in)[at.b * y.in_batch + at.s * y.in_seq + hh * y.in_head + g.rotary_dim + d];
          if (y.in != y.out)
            static_cast<T*>(y.out)[at.b * y.out_batch + at.s * y.out_seq + hh * y.out_head + g.rotary_dim + d] = v;
          if (cache && tok_page[t] >= 0) {
            const int64_t ci = tok_page[t] * y.paged_page + tok_row[t] * y.paged_slot + hh * y.paged_head + g.rotary_dim + d;
            if (g.kv_dtype == g.dtype) {
              static_cast<T*>(y.paged)[ci] = v;
            } else {
              const float vv[1] = {kernels::to_compute(v)};
              store_fp8<T, 1>(static_cast<unsigned char*>(y.paged) + ci, vv, kv_scale(p.k_scale, g, hh),
                              g.kv_dtype == DType::Float8E4M3, false);
            }
          }
        }
      }
    }
    __syncthreads();  // the angles and slots of this group are read; the next group rewrites them
  }
}

}  // namespace

void rope(const Geometry& g, const Pointers& p, void* stream) {
  const int64_t tokens = g.batch * g.seq;
  if (tokens == 0) return;
  if (tokens >= (int64_t(1) << 31))
    throw Unsupported("rope: " + std::to_string(tokens) + " tokens in one call; at most 2^31 - 1");
  // One thread per item of a token (grid.y more blocks when they pass kThreads); tokens per block so
  // that each thread walks several, but no fewer blocks than about two per SM (264) while the batch
  // allows, so that small (decode) batches spread over the GPU. Tuning (select's knobs): the tokens
  // per block, and a persistent grid (the blocks resident at once, each looping over groups).
  const int half = g.rotary_dim / 2;
  const int w = g.wide ? 16 / int(dtype_size(g.dtype)) : g.gptj ? 2 : 1;
  const int vw = 16 / int(dtype_size(g.dtype));
  int items = (p.x[0].heads + (p.count >= 2 ? p.x[1].heads : 0)) * std::max(1, (g.gptj ? 2 * half : half) / w);
  if (p.count == 3) items += p.x[2].heads * (g.v_wide ? p.x[2].copy_dim / vw : p.x[2].copy_dim);
  const int ny = (items + kThreads - 1) / kThreads;
  const int threads = std::max(64, ((items + ny - 1) / ny + 31) / 32 * 32);
  const int64_t per_slot = tokens * ny / 264;  // tokens per block at about two blocks per SM
  int tpb = int(std::clamp<int64_t>(per_slot, 1, kDefaultTokensPerBlock));
  if (g.wide && per_slot >= kWideMinTokens) tpb = kWideTokensPerBlock;
  if (g.tokens_per_block > 0) tpb = std::min(g.tokens_per_block, kMaxTokensPerBlock);
  const int64_t groups = (tokens + tpb - 1) / tpb;
  const size_t smem = size_t(angle_slots(tpb, half)) * sizeof(float2) +
                      (g.wide ? size_t(kStagedTokens) * 2 * threads * sizeof(uint4) : 0);
  auto st = static_cast<cudaStream_t>(stream);
  auto go = [&](auto tag) {
    using T = typename decltype(tag)::type;
    auto launch = [&](auto kernel) {
      opt_in_dynamic_smem(kernel, smem, "rope shared memory");
      int64_t gx = groups;
      if (g.persistent) {
        int dev = 0, sms = 0, per_sm = 0;
        cuda_check(cudaGetDevice(&dev), "cudaGetDevice");
        cuda_check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev), "cudaDeviceGetAttribute");
        cuda_check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, smem), "rope occupancy");
        gx = std::min<int64_t>(groups, std::max<int64_t>(1, int64_t(sms) * per_sm / ny));
      }
      kernel<<<dim3(unsigned(gx), unsigned(ny)), threads, smem, st>>>(g, p, tpb);
    };
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
