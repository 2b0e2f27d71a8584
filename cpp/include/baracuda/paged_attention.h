// The paged-attention family: decode attention of a batch of requests over a paged KV cache.
//
//   paged_attention  q [B, Sq, Hq, D] (or [B, Hq, D]: one token each), k_cache / v_cache
//                    [pages, page_size, Hkv, D], block_table int32 [B, max_pages], seq_lens int32 [B]
//                    (+ alibi_slopes, sinks) -> out (q's shape), and lse [B, Hq, Sq] (f32) on request
//
// Request b's keys are the first seq_lens[b] positions of its pages (key j in page block_table[b, j /
// page_size], slot j % page_size; clamped to max_pages * page_size), the new tokens already appended
// (KvCachePlan). Its Sq queries are the last Sq positions (query i at seq_len - Sq + i); `causal`
// (the default) lets each see the keys up to its own position, `window_left` / `window_right` bound
// them further (-1: unbounded). Scores as AttentionDescriptor: scale (default 1 / sqrt(D)), softcap,
// ALiBi (f32 [Hq]: slope * |pos - j|), sinks (f32 [Hq]). GQA / MQA: Hq a multiple of Hkv; all q heads
// of a kv head (times the Sq tokens) share one pass over its pages.
//
// Any strides with the last dim contiguous (the heads-first cache [pages, Hkv, page_size, D] as its
// permuted view; block_table / seq_lens any strides). q, caches and out of one dtype. Two kernels:
// "mma" (tensor cores; bf16 / f16, head dims 64, 96, 128, 256, splits) and "rowwise" (CUDA cores; f32,
// bf16, f16, any head dim up to 256, one split); "auto" takes mma where it applies. Nothing is read back to the host: lengths and page ids are read on the device,
// clamped (a page id outside [0, pages) hides its keys), so run() can be captured in a CUDA graph and
// replayed as the lengths grow. Long contexts are split over several blocks (`num_splits`, chosen at
// select from the batch and max_seqlen_k) and merged through the workspace.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "baracuda/plan.h"
#include "baracuda/registry.h"
#include "baracuda/tensor.h"

namespace baracuda {

struct PagedAttentionDescriptor {
  TensorSpec q, k_cache, v_cache, out;
  int64_t max_pages = 0;           // block_table's columns
  std::optional<double> scale;     // default 1 / sqrt(D)
  bool causal = true;
  int64_t window_left = -1, window_right = -1;
  double softcap = 0.0;
  bool alibi = false, sinks = false, lse = false;
  int64_t max_seqlen_k = 0;        // the longest context expected (sizes the splits); 0: max_pages * page_size
  int num_splits = 0;              // 0: chosen by select; else the splits of each request's keys
  std::string kernel = "auto";     // "auto" | "mma" (tensor cores) | "rowwise" (CUDA cores)
  // fp8 (e4m3 / e5m2) caches under float32 / float16 / bfloat16 queries (the rowwise kernel under
  // "auto"; kernel "mma" runs them on the tensor cores for 16-bit queries): keys and values are the
  // cache times k_scale / v_scale (float32 [1] or [kv_heads]; 1 without scales).
  bool kv_scales = false, scale_per_head = false;
  bool operator==(const PagedAttentionDescriptor& o) const {
    return q == o.q && k_cache == o.k_cache && v_cache == o.v_cache && out == o.out && max_pages == o.max_pages &&
           scale == o.scale && causal == o.causal && window_left == o.window_left &&
           window_right == o.window_right && softcap == o.softcap && alibi == o.alibi && sinks == o.sinks &&
           lse == o.lse && max_seqlen_k == o.max_seqlen_k && num_splits == o.num_splits && kernel == o.kernel &&
           kv_scales == o.kv_scales && (!kv_scales || scale_per_head == o.scale_per_head);
  }
  std::string str() const;
};

struct PagedAttentionTensors {
  TensorView q, k_cache, v_cache, block_table, seq_lens, out, lse, alibi_slopes, sinks, k_scale, v_scale;
};

class PagedAttentionPlan {
 public:
  // Validates everything knowable without data; needs no GPU (the split count uses the current
  // device's SM count when there is one).
  static PagedAttentionPlan select(const PagedAttentionDescriptor& desc, const PlanPreference& pref = PlanPreference{});
  const KernelSku& sku() const;
  const PagedAttentionDescriptor& descriptor() const;
  // The splits' partial outputs (f32) and log-sum-exps; 0 with one split.
  int64_t workspace_bytes() const;
  int num_splits() const;
  // Checks the tensors and launches on `stream`: no allocation, no host synchronization.
  void run(const PagedAttentionTensors& t, void* workspace = nullptr, int64_t workspace_size = 0,
           StreamHandle stream = nullptr) const;

  struct Impl;
  PagedAttentionPlan(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
 private:
  std::shared_ptr<const Impl> impl_;
};

FamilyInfo paged_attention_family_info();

}  // namespace baracuda
