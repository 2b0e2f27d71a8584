// The contract between the CTC loss plan (cpp/src/loss_ctc.cpp) and its kernels
// (cuda/loss/ctc_kernels.cuh): plain C++, no CUDA types. select() fills the geometry, run() the
// pointers.
//
// Forward:  ctc_alpha (one block per sample: the log-space alpha recursion over the 2 S + 1
//           extended labels, T sequential steps; log_alpha [N, T, 2 S + 1] written whole, -inf
//           past the sample's input length / extended length) -> the per-sample loss; for mean /
//           sum one block adds the per-sample values in a fixed order (ctc_reduce).
// Backward: ctc_beta (one block per sample: the beta recursion into the workspace, per-sample
//           facts (nll recomputed from log_alpha, gradient scale, status) and the label maps),
//           then ctc_grad (one block per (t, n) row: the per-class log-sums of alpha * beta, the
//           gradient row of C classes).
#pragma once
#include <cstdint>

#include "baracuda/dtype.h"
#include "loss/loss_launch.h"

namespace baracuda::loss {

struct CtcLaunch {
  DType dtype = DType::Float32;          // log_probs (= loss, grad_loss, grad dtype)
  DType target_dtype = DType::Int64;
  DType il_dtype = DType::Int64, tl_dtype = DType::Int64;
  Reduction reduction = Reduction::Mean;
  bool backward = false;
  bool zero_infinity = false;
  int64_t t = 0, n = 0, c = 0;           // log_probs [T, N, C]
  int64_t s = 0;                         // bound on every target length (log_alpha: 2 s + 1)
  int64_t blank = 0;
  int64_t lp_st[3] = {0, 0, 0};          // log_probs strides (elements)
  bool concat = false;                   // targets 1-D, concatenated
  int64_t tg_st0 = 0, tg_st1 = 0;        // padded [N, S]: strides; concatenated: tg_st0 only
  int64_t targets_len = 0;               // concatenated: targets.shape[0] (= sum of target_lengths)
  int64_t il_st = 1, tl_st = 1;          // lengths strides
  int64_t out_st = 1;                    // reduction none: loss stride
  int64_t gl_st = 0;                     // backward, reduction none: grad_loss stride
  int64_t g_st[3] = {0, 0, 0};           // grad_log_probs strides
  int threads = 128;                     // ctc_alpha / ctc_beta threads
  int tt = 1;                            // time steps of log_probs gathered into shared memory at once
  int grad_threads = 128;                // ctc_grad threads
  // Pointers (run()).
  const void* log_probs = nullptr;
  const void* targets = nullptr;
  const void* input_lengths = nullptr;
  const void* target_lengths = nullptr;
  void* log_alpha = nullptr;             // [N, T, 2 s + 1] contiguous, f32 (f64 for f64 log_probs)
  void* out = nullptr;                   // forward: the loss
  const void* grad_loss = nullptr;       // backward
  void* grad = nullptr;                  // backward: grad_log_probs
  void* workspace = nullptr;
};

// 2 s + 1: the extended label sequence (blanks around and between the labels).
constexpr int64_t ctc_ext(int64_t s) { return 2 * s + 1; }
// Dynamic shared memory of ctc_alpha / ctc_beta (acc = 4 or 8 bytes) and of ctc_grad.
constexpr int64_t ctc_recursion_smem(int64_t s, int tt, int64_t acc) {
  return (2 * ctc_ext(s) + int64_t(tt) * (s + 1)) * acc + s * 4 + 16;
}
constexpr int64_t ctc_grad_smem(int64_t s, int64_t acc) { return (ctc_ext(s) + s) * acc + 2 * s * 4 + 16; }
// Largest dynamic shared memory a CTC block may ask for (below sm_80's opt-in limit).
constexpr int64_t kCtcMaxSmem = 160 * 1024;

// Bytes of one per-sample record of the backward (CtcMeta in ctc_kernels.cuh, which asserts it).
constexpr int64_t kCtcMetaBytes = 40;

// Workspace: forward with mean / sum: the per-sample values [N] (acc). Backward: per-sample
// facts [N] (kCtcMetaBytes each), the first position of each class among the labels [N, C] int32,
// the next position of the same label [N, s] int32, log_beta [N, T, 2 s + 1] (acc). Each part
// 256-byte aligned; offs[0..3] receive their byte offsets (forward: offs[0] only).
inline int64_t ctc_workspace_layout(const CtcLaunch& L, int64_t offs[4]) {
  const int64_t acc = L.dtype == DType::Float64 ? 8 : 4;
  auto up = [](int64_t b) { return (b + 255) / 256 * 256; };
  if (!L.backward) {
    offs[0] = 0;
    return L.reduction == Reduction::None ? 0 : up(L.n * acc) + 256;
  }
  offs[0] = 0;
  offs[1] = offs[0] + up(L.n * kCtcMetaBytes);
  offs[2] = offs[1] + up(L.n * L.c * 4);
  offs[3] = offs[2] + up(L.n * L.s * 4);
  return offs[3] + up(L.n * L.t * ctc_ext(L.s) * acc) + 256;
}
int64_t ctc_workspace_bytes(const CtcLaunch& L);
bool ctc_has_kernel(DType t);
void ctc_launch(const CtcLaunch& L, void* stream);

}  // namespace baracuda::loss
