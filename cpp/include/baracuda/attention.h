// The attention family: softmax(q k^T * scale + rules) v per (sequence, head), forward and backward.
//
//   forward   tensors q, k, v (+ cu_seqlens_q / cu_seqlens_k / seqused_k, alibi_slopes, sinks)
//             -> out, and lse when the descriptor asks for it
//   backward  q, k, v, out, lse, grad_out (+ the same extras) -> grad_q, grad_k, grad_v (+ grad_sinks)
//
// Layouts: dense q [B, Sq, Hq, D], k [B, Sk, Hkv, D], v [B, Sk, Hkv, Dv], out [B, Sq, Hq, Dv], any
// batch / sequence / head strides with the last dim contiguous (BSHD tensors and BHSD views alike);
// varlen (packed sequences) q [total_q, Hq, D], k / v [total_k, Hkv, D / Dv] with int32 cu_seqlens_q /
// cu_seqlens_k [batch + 1] (offsets, starting at 0) and max_seqlen_q / max_seqlen_k at least every
// sequence's length (the grid is sized by them; the kernels read the offsets on the device, so
// nothing is checked on the host: offsets are clamped to the tensors' rows, which keeps a bad offset
// from reading or writing out of bounds, and rows outside every sequence are not written).
// seqused_k (int32 [batch]) caps each sequence's keys. GQA / MQA: Hq a multiple of Hkv.
//
// Scores: s = q . k * scale (default 1 / sqrt(D)); softcap > 0: softcap * tanh(s / softcap);
// alibi_slopes (f32 [Hq] or [B, Hq]): s -= slope * |i + off - j|. Visibility: query i sits at
// diagonal position i + off, off = Sk - Sq (causal_alignment "bottom_right", flash-attention's) or
// 0 ("top_left", torch's is_causal); key j is visible when pos - window_left <= j <= pos +
// window_right (-1: unbounded); causal is window_right = 0. sinks ([Hq], f32; f64 for f64): a
// learned logit per head added to the softmax's denominator (no value). A query that sees no key
// (and has no sink) gets out = 0 and lse = -inf.
//
// lse: [B, Hq, Sq] (dense) or [Hq, total_q] (varlen), contiguous, f32 (f64 for f64): the natural
// log of each row's softmax denominator, what the backward reads.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "baracuda/plan.h"
#include "baracuda/registry.h"
#include "baracuda/tensor.h"

namespace baracuda {

struct AttentionDescriptor {
  std::string op;                  // "attention" | "attention_backward"
  TensorSpec q, k, v, out;         // out: the forward's output (backward: its spec, for grad_out too)
  std::optional<double> scale;     // default 1 / sqrt(D)
  bool causal = false;
  std::string causal_alignment = "bottom_right";  // | "top_left"
  int64_t window_left = -1, window_right = -1;
  double softcap = 0.0;
  int alibi = 0;                   // 0: none; 1: slopes [Hq]; 2: slopes [B, Hq]
  bool sinks = false;
  bool varlen = false;             // packed sequences: batch, max_seqlen_q, max_seqlen_k below
  int64_t batch = 0, max_seqlen_q = 0, max_seqlen_k = 0;
  bool seqused_k = false;
  bool lse = false;                // forward: write lse (the backward needs it)
  bool deterministic = false;      // require a bitwise-reproducible kernel
  std::string kernel = "auto";     // "auto" | "flash" | "rowwise": which of our kernels
  std::string tile = "auto";       // the flash tile, "auto" or "m<rows>n<keys>" / "w<rows>n<keys>" (sm_90a)
  bool operator==(const AttentionDescriptor& o) const {
    return op == o.op && q == o.q && k == o.k && v == o.v && out == o.out && scale == o.scale && causal == o.causal &&
           causal_alignment == o.causal_alignment && window_left == o.window_left && window_right == o.window_right &&
           softcap == o.softcap && alibi == o.alibi && sinks == o.sinks && varlen == o.varlen && batch == o.batch &&
           max_seqlen_q == o.max_seqlen_q && max_seqlen_k == o.max_seqlen_k && seqused_k == o.seqused_k &&
           lse == o.lse && deterministic == o.deterministic && kernel == o.kernel && tile == o.tile;
  }
  std::string str() const;
};

// The tensors of one run (a null data pointer = absent). grad_* have their counterpart's shape and
// dtype, the last dim contiguous, any other strides.
struct AttentionTensors {
  TensorView q, k, v, out, lse;
  TensorView cu_seqlens_q, cu_seqlens_k, seqused_k, alibi_slopes, sinks;
  TensorView grad_out, grad_q, grad_k, grad_v, grad_sinks;
};

class AttentionPlan {
 public:
  // Validates everything knowable without data; throws InvalidArgument / InvalidDType /
  // Unsupported naming the operand. Needs no GPU.
  static AttentionPlan select(const AttentionDescriptor& desc, const PlanPreference& pref = PlanPreference{});
  const KernelSku& sku() const;
  const AttentionDescriptor& descriptor() const;
  // Backward: the per-row sum(grad_out * out) (lse's layout and dtype). 0 for the forward.
  int64_t workspace_bytes() const;
  // Checks the tensors against the descriptor and launches on `stream`. Never allocates, never
  // synchronizes; no output may overlap another operand.
  void run(const AttentionTensors& t, void* workspace = nullptr, int64_t workspace_size = 0,
           StreamHandle stream = nullptr) const;

  struct Impl;
  AttentionPlan(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
 private:
  std::shared_ptr<const Impl> impl_;
};

FamilyInfo attention_family_info();

}  // namespace baracuda
