// A token's place in a paged KV cache, from a slot mapping (what kv_cache_append and the fused
// rope append both read): slot / page_size is the page, slot % page_size the row in it.
#pragma once
#include <cstdint>

namespace baracuda::kernels {

// slots[at], int32 or int64.
__device__ __forceinline__ int64_t slot_at(const void* slots, bool int32, int64_t at) {
  return int32 ? int64_t(static_cast<const int32_t*>(slots)[at]) : static_cast<const int64_t*>(slots)[at];
}

// A slot as (page, row); false for a padding slot (negative) or one past the cache (pages x
// page_size), which must write nothing.
__device__ __forceinline__ bool paged_slot_of(int64_t slot, int64_t pages, int64_t page_size, int64_t& page,
                                              int64_t& row) {
  if (slot < 0 || slot >= pages * page_size) return false;
  page = slot / page_size;
  row = slot % page_size;
  return true;
}

__device__ __forceinline__ bool paged_slot(const void* slots, bool int32, int64_t at, int64_t pages, int64_t page_size,
                                           int64_t& page, int64_t& row) {
  return paged_slot_of(slot_at(slots, int32, at), pages, page_size, page, row);
}

}  // namespace baracuda::kernels
