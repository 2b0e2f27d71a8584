// The launch contract between AttentionPlan (cpp/src/attention.cpp) and the attention kernels:
// plain C++, no CUDA types. `select` fills the geometry and the score rules; `run` adds the
// pointers and calls one of the launchers below.
//
// Index rules every kernel follows (one place, so the rowwise and flash kernels agree):
//   sequence b: queries [q_begin, q_begin + sq), keys [k_begin, k_begin + sk); dense batches use
//     b * batch_stride and sq = Sq, sk = Sk; varlen reads cu_seqlens_q / cu_seqlens_k (and
//     seqused_k, which caps sk), with batch strides unused.
//   query i sits at diagonal position i + off, off = top_left ? 0 : sk - sq; key j is visible when
//     j >= i + off - window_left (window_left >= 0) and j <= i + off + window_right (>= 0);
//     causal is window_right = 0.
//   score s = q . k * scale; softcap > 0: s = softcap * tanh(s / softcap); ALiBi: s -= slope_h *
//     |i + off - j|. Probabilities p = exp(s - lse); a sink adds exp(sink_h) to the row's sum.
//   A row with no visible key (and no sink) has out = 0 and lse = -inf.
#pragma once
#include <cstdint>
#include <vector>

#include "baracuda/dtype.h"

namespace baracuda::attention {

struct Operand {
  const void* data = nullptr;
  int64_t batch = 0, row = 0, head = 0;  // strides in elements; the last dim is contiguous
};

struct Geometry {
  DType dtype = DType::BFloat16;
  int64_t batch = 0;        // sequences
  int64_t sq = 0, sk = 0;   // per-sequence lengths (varlen: max_seqlen_q / max_seqlen_k)
  int64_t hq = 0, hkv = 0;  // query heads, key / value heads (hq % hkv == 0)
  int64_t d = 0, dv = 0;    // head dims of q / k and of v / out
  bool varlen = false;
  bool has_seqused_k = false;
  bool top_left = false;
  int64_t window_left = -1, window_right = -1;  // -1: unbounded
  double scale = 1.0;
  double softcap = 0.0;
  bool alibi = false;       // slopes [hq] (or [batch, hq]: alibi_batch_stride = hq)
  int64_t alibi_batch_stride = 0;
  bool sinks = false;       // [hq], the compute dtype
  // lse [batch, hq, sq] (dense) or [hq, total_q] (varlen), contiguous, f32 (f64 for f64).
  int64_t lse_batch = 0, lse_head = 0;
  int64_t total_q = 0, total_k = 0;  // varlen: rows of q and of k / v
  int tile_bm = 0, tile_bn = 0;  // the flash tile (flash_forward_tiles / flash_backward_tiles)
  bool tile_wgmma = false;       // that tile on the sm_90a kernels (flash_{fwd,bwd}_sm90.cuh)
  // The score is q . k * scale alone (no softcap, no ALiBi, a positive scale in f32): the mma.sync
  // forward's plain-score kernel (cuda/fa2/flash_fwd.cuh) and its tile order.
  bool plain_score() const { return !(softcap > 0) && !alibi && float(scale) > 0.f; }
};

struct Pointers {
  Operand q, k, v, out;
  void* lse = nullptr;
  const int32_t* cu_seqlens_q = nullptr;
  const int32_t* cu_seqlens_k = nullptr;
  const int32_t* seqused_k = nullptr;
  const void* alibi_slopes = nullptr;  // f32
  const void* sinks = nullptr;         // f32 (f64 for f64)
  // backward
  Operand grad_out, grad_q, grad_k, grad_v;
  void* grad_sinks = nullptr;          // f32 (f64 for f64), [hq]
  void* delta = nullptr;               // workspace: sum(grad_out * out) per row, lse's layout
};

// The flash kernels (cuda/fa2, BARACUDA_ENABLE_FA2): bf16 / f16, head dims 64, 96, 128, 256,
// d == dv; every operand's rows 16-byte aligned. The tile shapes (query rows x key rows per block)
// compiled for a head dim, the default first (empty: not covered). warp_specialized_first: the sm_90a
// w128n128 first (the caller's rule: its TMA loads apply and no short mask), else w64n64.
// The mma.sync tiles' first is m128n128 at d 64 and m128n64 at d 128, but m64n64 for a general score
// (those kernels spill) and, at d 64, for short masked spans (docs/benchmark-notes.md, attention,
// sessions 47 and 50). Both put the mma.sync tiles before the sm_90a ones too (sessions 48, 49).
struct FlashTile {
  int bm = 0, bn = 0;
  bool wgmma = false;  // the Hopper kernel (warpgroup MMA, sm_90a), named "w<bm>n<bn>"; else mma.sync, "m<bm>n<bn>"
};
// What the forward's tile order depends on besides the dtype and head dims (the caller's rules).
struct ForwardTileRule {
  bool warp_specialized_first = false;  // w128n128 first: its TMA loads apply and no short mask
  bool plain_score = true;              // Geometry::plain_score()
  bool short_masked_span = false;       // causal or a window leaves each query 512 keys or fewer
  int64_t smem_per_sm = 0;              // the device's shared memory per SM in bytes (0: unknown)
};
std::vector<FlashTile> flash_forward_tiles(DType dtype, int64_t d, int64_t dv, const ForwardTileRule& rule);
void flash_forward(const Geometry& g, const Pointers& p, void* stream);
// The sm_90a kernels (cuda/fa2/flash_sm90.cu, flash_{fwd,bwd}_sm90.cuh; built with CUTLASS's CuTe for a
// 90 architecture): bf16 / f16, d == dv in {64, 128}, on an sm_90 device; flash_forward and
// flash_backward run them for a wgmma tile.
bool flash_sm90_supported(DType dtype, int64_t d, int64_t dv);
void flash_sm90_forward(const Geometry& g, const Pointers& p, void* stream);
void flash_sm90_backward(const Geometry& g, const Pointers& p, void* stream);
// The flash backward (bf16 / f16, d == dv in {64, 96, 128}): delta, grad_q, grad_k / grad_v, grad_sinks.
// Its tiles, named by grad_q's (query rows x key rows per block), the default first: the sm_90a
// w64n64, then the mma.sync m64n64 (empty: not covered).
std::vector<FlashTile> flash_backward_tiles(DType dtype, int64_t d, int64_t dv);
void flash_backward(const Geometry& g, const Pointers& p, void* stream);

// Around the cuDNN backend's padded and packed (ragged) graphs (cpp/src/cudnn/attention_cudnn.cpp),
// cuda/attention/cudnn_padding.cu: what cuDNN reads per sequence, written on the device from the
// offsets, and the rows our contract defines that cuDNN leaves alone.
struct CudnnPadding {
  static constexpr int kMaxRagged = 9;
  int32_t* seq_len_q = nullptr;   // [batch], capped to max_sq
  int32_t* seq_len_kv = nullptr;  // [batch], capped to max_sk (seqused_k applied)
  int nragged = 0;
  int64_t* ragged[kMaxRagged] = {};      // [batch + 1]: an operand's first element per sequence
  int64_t ragged_row[kMaxRagged] = {};   // that operand's row stride (elements)
  bool ragged_keys[kMaxRagged] = {};     // its rows are key rows (cu_seqlens_k), else query rows
  // cuDNN's stats where they are not lse itself: [total_q, hq] (varlen), else lse's layout. The
  // backward's copy of lse has +inf where lse is -inf (a row that sees no key), so that cuDNN's
  // exp(s - stats) is 0 there rather than NaN.
  float* stats = nullptr;
  int64_t max_sq = 0, max_sk = 0;        // the graph's sequence dims
};
// Before the graph: lengths and offsets; the backward's stats copy.
void cudnn_padding_prepare(const Geometry& g, const Pointers& p, const CudnnPadding& m, bool backward, void* stream);
// After it: forward, lse from stats (varlen), out = 0 and lse = -inf (the sink's logit with sinks)
// on rows that see no key;
// backward, grad_q = 0 on those rows and grad_k = grad_v = 0 on key rows past seqused_k.
void cudnn_padding_finish(const Geometry& g, const Pointers& p, const CudnnPadding& m, bool backward, void* stream);

// The rowwise kernels (cuda/attention, every build): f16 / bf16 / f32 / f64, d and dv <= 256;
// computed in f32 (f64 for f64); forward, and backward from the saved lse (deterministic: every
// gradient element is summed by one warp in a fixed order).
constexpr int64_t kRowwiseMaxHeadDim = 256;
void rowwise_forward(const Geometry& g, const Pointers& p, void* stream);
void rowwise_backward(const Geometry& g, const Pointers& p, void* stream);
// The backward's first and last steps, shared by both kernel sets: delta = sum(grad_out * out) per
// row (into p.delta), and grad_sinks from lse and delta (when the geometry has sinks).
void backward_delta(const Geometry& g, const Pointers& p, void* stream);
void backward_sinks(const Geometry& g, const Pointers& p, void* stream);

}  // namespace baracuda::attention
