// The launch contract of the RoPE kernels (cpp/src/rope.cpp fills it; rope.cu runs it).
//
// Each operand (q, and k when given) is [batch, seq, heads, head_dim] in elements with its own
// batch / seq / head strides and a contiguous last dim; out may be the same view (in place). For
// token (b, s) at position p and pair i < rotary_dim / 2 the angle is p * inv_freq[i] (or the cache's
// row p: cos[p, i], sin[p, i]); "neox" pairs element i with i + rotary_dim / 2, "gptj" pairs 2i with
// 2i + 1; (x1, x2) -> (x1 cos - x2 sin, x2 cos + x1 sin), sin negated for the inverse (the
// backward). Elements past rotary_dim are copied when out is not the input.
#pragma once
#include <cstdint>

#include "baracuda/dtype.h"

namespace baracuda::rope {

constexpr int kMaxPairs = 128;  // rotary_dim <= 256

struct Operand {
  const void* in = nullptr;
  void* out = nullptr;  // v (copy_only) points it at its input: only its cache is written
  int64_t in_batch = 0, in_seq = 0, in_head = 0;
  int64_t out_batch = 0, out_seq = 0, out_head = 0;
  int heads = 0;
  // The paged cache this operand is also written to, at the token's slot (null: none); strides of
  // [pages, page_size, heads, dim] in elements.
  void* paged = nullptr;
  int64_t paged_page = 0, paged_slot = 0, paged_head = 0;
  bool copy_only = false;  // v: copied to its cache as it is (copy_dim elements per head)
  int copy_dim = 0;
};

struct Geometry {
  DType dtype = DType::BFloat16;
  int64_t batch = 0, seq = 0;
  int head_dim = 0, rotary_dim = 0;
  bool gptj = false;
  bool inverse = false;
  // Angles: from a cos / sin cache [cache_positions, rotary_dim / 2] (cache_dtype f32 or dtype), or
  // computed as position * inv_freq[i] scaled by attention_factor (no cache).
  bool cache = false;
  DType cache_dtype = DType::Float32;
  int64_t cache_positions = 0;
  float inv_freq[kMaxPairs] = {};
  float attention_factor = 1.0f;
  // Positions: none (the seq index), int32 or int64 [batch, seq] with the strides below; cache rows
  // are clamped to [0, cache_positions) so a bad position cannot read out of bounds.
  DType positions_dtype = DType::Int64;
  bool positions = false;
  int64_t pos_batch = 0, pos_seq = 0;
  // 16-byte accesses (8 16-bit or 4 f32 elements) for q / k, their outputs and the k cache, when every row
  // start, stride and the rotated halves allow it; v's copy to its cache likewise. Else element accesses.
  bool wide = false, v_wide = false;
  // Cache append (operands with `paged`): slot_mapping [batch, seq] (int32 / int64, strides below);
  // slot / page_size is the page, slot % page_size the row in it; a slot outside [0, pages x
  // page_size) (padding) writes nothing to the caches.
  bool slots_int32 = false;
  int64_t slot_batch = 0, slot_seq = 0, pages = 0, page_size = 1;
  // The caches' dtype: dtype (a copy), or fp8 e4m3 / e5m2: fp8(x / scale) of x as stored in dtype,
  // saturated, the scale per kv head (scale_per_head) or one (null pointer: 1). cache8_wide: a wide
  // access's elements go to an fp8 cache as one 4- or 8-byte store.
  DType kv_dtype = DType::BFloat16;
  bool scale_per_head = false, cache8_wide = false;
  // Tuning (select's knobs, PlanPreference.tuning "tpb=N,persistent=1"): tokens per block (1..16; 0:
  // the launcher's rule) and a persistent grid (the blocks resident at once, each looping over groups).
  int tokens_per_block = 0;
  bool persistent = false;
};

struct Pointers {
  Operand x[3];
  int count = 1;  // 1: q; 2: q and k; 3: q, k and v (v copied to its cache)
  const void* cos = nullptr;
  const void* sin = nullptr;
  const void* positions = nullptr;
  const void* slots = nullptr;
  const float* k_scale = nullptr;  // fp8 caches: [kv_heads] or [1]; null: 1
  const float* v_scale = nullptr;
};

void rope(const Geometry& g, const Pointers& p, void* stream);

}  // namespace baracuda::rope
