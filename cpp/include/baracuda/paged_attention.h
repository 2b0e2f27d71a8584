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
// bf16, f16, any head dim up to 256, one split); "auto" takes mma where it applies, and for a prefill
// (64 query tokens or more per request) cuDNN's fused attention over the pages where built and it
// takes the case ("cudnn": 16-bit, no softcap / ALiBi / fp8; there a page id outside [0, pages) reads
// page 0 instead of hiding its keys). Nothing is read back to the host: lengths and page ids are read on the device,
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
  std::string kernel = "auto";     // "auto" | "mma" (tensor cores) | "rowwise" (CUDA cores) | "cudnn" (fused)
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

// Merge of two attention states over disjoint key sets (cascade attention: a shared prefix and each
// request's own keys; partial results of a split):
//
//   merge  out_a, out_b [..., H, D] (bf16 / f16 / f32, one dtype), lse_a, lse_b [..., H] (f32, natural
//          log, as paged_attention and attention return them) -> out [..., H, D] (their dtype) and, on
//          request, lse [..., H] (f32)
//
// out = (e^lse_a out_a + e^lse_b out_b) / (e^lse_a + e^lse_b), lse = log(e^lse_a + e^lse_b), computed
// stably in f32 and rounded once; a row with both lse -inf gets out = 0, lse = -inf. Up to three
// leading dims; any strides with the last dim of the outputs contiguous (paged_attention's lse
// [B, H, Sq] is passed as its [B, Sq, H] permuted view). out may alias out_a or out_b (each element is
// read before it is written, by the same thread), lse may alias lse_a or lse_b.
struct AttentionMergeDescriptor {
  TensorSpec out_a, lse_a, out_b, lse_b, out;
  bool lse = false;  // write the merged lse
  TensorSpec lse_out;  // its spec when `lse` (f32 [..., H])
  bool operator==(const AttentionMergeDescriptor& o) const {
    return out_a == o.out_a && lse_a == o.lse_a && out_b == o.out_b && lse_b == o.lse_b && out == o.out &&
           lse == o.lse && (!lse || lse_out == o.lse_out);
  }
  std::string str() const;
};

struct AttentionMergeTensors {
  TensorView out_a, lse_a, out_b, lse_b, out, lse;
};

class AttentionMergePlan {
 public:
  static AttentionMergePlan select(const AttentionMergeDescriptor& desc, const PlanPreference& pref = PlanPreference{});
  const KernelSku& sku() const;
  const AttentionMergeDescriptor& descriptor() const;
  int64_t workspace_bytes() const { return 0; }
  // Checks the tensors and launches on `stream`: no allocation, no host synchronization.
  void run(const AttentionMergeTensors& t, void* workspace = nullptr, int64_t workspace_size = 0,
           StreamHandle stream = nullptr) const;

  struct Impl;
  AttentionMergePlan(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
 private:
  std::shared_ptr<const Impl> impl_;
};

FamilyInfo paged_attention_family_info();

}  // namespace baracuda
