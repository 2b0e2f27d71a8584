// The launch contract of the KV-cache append (cpp/src/kv_cache.cpp fills it; kv_cache.cu runs it).
//
// For token t with slot s = slot_mapping[t]: when 0 <= s < pages * page_size, row (t, h) of each
// source is copied to cache[s / page_size, s % page_size, h]; other slots (negative: padding) are
// skipped, so no slot value can write out of bounds. Rows are `row_bytes` bytes; all strides are
// in bytes; `vec` is the copy width in bytes (16 down to 1), which every row start and row_bytes
// are multiples of.
#pragma once
#include <cstdint>

#include "baracuda/dtype.h"

namespace baracuda::kv_cache {

struct Stream {
  const void* src = nullptr;
  void* cache = nullptr;
  int64_t src_token = 0, src_head = 0;                        // bytes
  int64_t cache_page = 0, cache_slot = 0, cache_head = 0;     // bytes
  int64_t row_bytes = 0;
};

// Quantizing append (fp8 caches from 16- / 32-bit sources): cache = fp8(src / scale), saturated to
// the finite range; scale per tensor ([1]) or per kv head ([heads]), 1 when absent.
struct Quantize {
  DType src = DType::BFloat16, cache = DType::Float8E4M3;
  const float* scale[2] = {nullptr, nullptr};
  int64_t scale_stride[2] = {0, 0};  // 0: one scale; 1: one per head
  int64_t dim[2] = {0, 0};           // elements per row
};

struct Geometry {
  int64_t tokens = 0, heads = 0;
  int64_t pages = 0, page_size = 0;
  int count = 1;                 // 1: key; 2: key and value
  Stream s[2];
  bool slots_int32 = false;
  const void* slots = nullptr;
  int64_t slot_stride = 1;       // elements
  int vec = 1;
  bool quantize = false;  // else a bitwise copy
  Quantize q;
};

void append(const Geometry& g, void* stream);

}  // namespace baracuda::kv_cache
