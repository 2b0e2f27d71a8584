// The RoPE family: rotary position embedding of q (and k) in one launch, forward or inverse (the
// backward: the gradient rotated by the opposite angle).
//
// Layouts: q [tokens, Hq, D] or [batch, seq, Hq, D]; k the same leading dims with its own head
// count; any strides with the last dim contiguous; outputs alike (the same view as the input runs in
// place). Pairs: "neox" (rotate-half: element i with i + rotary_dim / 2) or "gptj" (interleaved: 2i
// with 2i + 1), over the first rotary_dim elements of each head (0: all of D); the rest pass through.
//
// Angles: position * inv_freq[i] with inv_freq from `freqs` (theta and a scaling rule, computed on
// the host at select, the angle in f32 as the reference implementations do), or read from a
// cos / sin cache [positions, rotary_dim / 2] (f32 or q's dtype). Positions: an int32 / int64
// tensor of the leading dims, or none (the index along the sequence dim). Cache rows are clamped to
// the cache (no out-of-bounds read for a bad position).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "baracuda/plan.h"
#include "baracuda/registry.h"
#include "baracuda/tensor.h"

namespace baracuda {

// inv_freq[i] = theta^(-2i / rotary_dim), then the scaling rule:
//   "none"; "linear" (position interpolation: / factor);
//   "llama3" (Llama 3.1: wavelengths above original_max_positions / low_freq_factor divided by
//   factor, below original_max_positions / high_freq_factor kept, smoothly blended between);
//   "yarn" (YaRN: interpolation (/ factor) and extrapolation blended by a linear ramp between the
//   correction dims of beta_fast / beta_slow rotations over original_max_positions; cos and sin
//   scaled by attention_factor, 0 = 0.1 ln(factor) + 1).
struct RopeFrequencies {
  double theta = 10000.0;
  std::string scaling = "none";
  double factor = 1.0;
  double low_freq_factor = 1.0, high_freq_factor = 4.0;
  int64_t original_max_positions = 0;
  double beta_fast = 32.0, beta_slow = 1.0;
  double attention_factor = 0.0;
  bool operator==(const RopeFrequencies& o) const {
    return theta == o.theta && scaling == o.scaling && factor == o.factor && low_freq_factor == o.low_freq_factor &&
           high_freq_factor == o.high_freq_factor && original_max_positions == o.original_max_positions &&
           beta_fast == o.beta_fast && beta_slow == o.beta_slow && attention_factor == o.attention_factor;
  }
};

// The scaled inverse frequencies (rotary_dim / 2 values) and the factor on cos / sin; throws
// InvalidArgument naming a bad parameter.
std::vector<double> rope_inv_freq(const RopeFrequencies& f, int64_t rotary_dim, double* attention_factor = nullptr);

struct RopeDescriptor {
  TensorSpec q;
  bool has_k = false;
  TensorSpec k;
  std::string style = "neox";       // | "gptj"
  int64_t rotary_dim = 0;           // 0: head_dim
  bool inverse = false;             // rotate by -angle (the backward)
  bool cache = false;               // angles from cos / sin tensors instead of `freqs`
  DType cache_dtype = DType::Float32;
  int64_t cache_positions = 0;      // the cache's rows
  RopeFrequencies freqs;
  bool positions = false;           // a positions tensor is given
  DType positions_dtype = DType::Int64;
  // The decode step's append, fused: the rotated k also written to k_cache [pages, page_size,
  // kv_heads, head_dim] (any strides, last dim contiguous: a heads-first cache as its permuted
  // view) and v (q's leading dims + [kv_heads, v_dim]) copied to v_cache, at slot_mapping (int32 /
  // int64, q's leading dims; slots outside the cache are padding), as kv_cache_append does. fp8
  // caches (e4m3 / e5m2, both the same) quantize as kv_cache_append does: fp8(x / scale), saturated,
  // x the rotated k as stored in k_out's dtype; with kv_scales, k_scale (and v_scale) float32 [1]
  // or [kv_heads] (scale_per_head), else 1.
  bool kv_cache = false;
  TensorSpec k_cache;
  bool has_v = false;
  TensorSpec v, v_cache;
  DType slot_dtype = DType::Int64;
  bool kv_scales = false;
  bool scale_per_head = false;
  bool operator==(const RopeDescriptor& o) const {
    return q == o.q && has_k == o.has_k && (!has_k || k == o.k) && style == o.style && rotary_dim == o.rotary_dim &&
           inverse == o.inverse && cache == o.cache && (!cache || (cache_dtype == o.cache_dtype &&
           cache_positions == o.cache_positions)) && (cache || freqs == o.freqs) && positions == o.positions &&
           (!positions || positions_dtype == o.positions_dtype) && kv_cache == o.kv_cache &&
           (!kv_cache || (k_cache == o.k_cache && has_v == o.has_v && slot_dtype == o.slot_dtype &&
                          (!has_v || (v == o.v && v_cache == o.v_cache)) && kv_scales == o.kv_scales &&
                          (!kv_scales || scale_per_head == o.scale_per_head)));
  }
  std::string str() const;
};

// The tensors of one run (a null data pointer = absent): q_out / k_out like q / k (the same view
// for in place); cos / sin [cache_positions, rotary_dim / 2] contiguous; positions of q's leading
// dims, any strides.
struct RopeTensors {
  TensorView q, k, q_out, k_out, cos, sin, positions;
  TensorView v, k_cache, v_cache, slot_mapping;  // with kv_cache
  TensorView k_scale, v_scale;                    // with kv_scales (v_scale when v is appended)
};

class RopePlan {
 public:
  static RopePlan select(const RopeDescriptor& desc, const PlanPreference& pref = PlanPreference{});
  const KernelSku& sku() const;
  const RopeDescriptor& descriptor() const;
  int64_t workspace_bytes() const { return 0; }
  // Checks the tensors against the descriptor and launches on `stream`; never allocates or syncs.
  void run(const RopeTensors& t, void* workspace = nullptr, int64_t workspace_size = 0,
           StreamHandle stream = nullptr) const;

  struct Impl;
  RopePlan(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
 private:
  std::shared_ptr<const Impl> impl_;
};

FamilyInfo rope_family_info();

}  // namespace baracuda
