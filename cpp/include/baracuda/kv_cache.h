// The KV-cache family: append the new tokens' keys and values to a paged cache.
//
//   append  key [tokens, Hkv, D] (and value [tokens, Hkv, Dv]) -> key_cache [pages, page_size, Hkv, D]
//           (and value_cache), written at slot_mapping[t] (int32 / int64 [tokens]): page slot / page_size,
//           position slot % page_size. Any strides with the last dim contiguous, so the heads-first cache
//           [pages, Hkv, page_size, D] is passed as its permuted view. Slots that are negative (padding)
//           or past the cache are skipped: nothing is written out of bounds. Two tokens given one slot
//           race (one of them lands, as in other engines). The caches are written in place: a bitwise
//           copy when source and cache dtypes are equal; an fp8 (e4m3 / e5m2) cache of a float32 /
//           float16 / bfloat16 source is quantized: cache = fp8(src / scale), saturated to the finite
//           range, with k_scale (and v_scale) float32 [1] (per tensor) or [kv_heads] (per head), 1 when
//           not given (what paged_attention multiplies back).
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "baracuda/plan.h"
#include "baracuda/registry.h"
#include "baracuda/tensor.h"

namespace baracuda {

struct KvCacheDescriptor {
  TensorSpec key, key_cache;
  bool has_value = false;
  TensorSpec value, value_cache;
  DType slot_dtype = DType::Int64;
  bool scales = false;          // k_scale (and v_scale): quantizing appends only
  bool scale_per_head = false;  // [kv_heads] rather than [1]
  bool operator==(const KvCacheDescriptor& o) const {
    return key == o.key && key_cache == o.key_cache && has_value == o.has_value &&
           (!has_value || (value == o.value && value_cache == o.value_cache)) && slot_dtype == o.slot_dtype &&
           scales == o.scales && (!scales || scale_per_head == o.scale_per_head);
  }
  std::string str() const;
};

struct KvCacheTensors {
  TensorView key, value, key_cache, value_cache, slot_mapping, k_scale, v_scale;
};

class KvCachePlan {
 public:
  static KvCachePlan select(const KvCacheDescriptor& desc, const PlanPreference& pref = PlanPreference{});
  const KernelSku& sku() const;
  const KvCacheDescriptor& descriptor() const;
  int64_t workspace_bytes() const { return 0; }
  // Checks the tensors against the descriptor and launches on `stream`; never allocates or syncs.
  void run(const KvCacheTensors& t, void* workspace = nullptr, int64_t workspace_size = 0,
           StreamHandle stream = nullptr) const;

  struct Impl;
  KvCachePlan(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
 private:
  std::shared_ptr<const Impl> impl_;
};

FamilyInfo kv_cache_family_info();

}  // namespace baracuda
