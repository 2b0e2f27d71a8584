// The contract between the loss plan layer (cpp/src/loss.cpp) and the kernels: plain C++, no
// CUDA types. select() fills the geometry; run() adds the pointers and the workspace.
#pragma once
#include <cstdint>

#include "baracuda/dtype.h"

namespace baracuda::loss {

enum class Reduction { None = 0, Mean = 1, Sum = 2 };

// Cross-entropy over rows of logits [N, V] (unit stride along V).
//   forward:            per-row partial (max, sum exp, sum w*x) over `chunks` column chunks,
//                       then one thread per row (lse, loss), then one block for the reduction.
//   with_grad/backward: grad = scale_i * (a_i * softmax - (1-eps) w_t onehot - eps/V * w).
struct CeLaunch {
  DType dtype = DType::Float32;     // logits (= weight, grad_loss, loss, grad dtype)
  DType target_dtype = DType::Int64;
  int64_t n = 0, v = 0;
  int64_t x_stride = 0;             // logits row stride (elements)
  int64_t gx_stride = 0;            // grad row stride (elements)
  int64_t out_stride = 1;           // reduction none: loss[i] stride
  int64_t target_stride = 1, lse_stride = 1, grad_loss_stride = 0, weight_stride = 1;
  int64_t ignore_index = -100;
  double label_smoothing = 0.0;
  Reduction reduction = Reduction::Mean;
  bool forward = true;              // false: backward from a saved lse
  bool with_grad = false;           // forward also writes the gradient
  bool vec = true;                  // 16-byte vectors (strides aligned; run() checks pointers)
  int chunks = 1;                   // column chunks per row
  int64_t chunk_len = 0;            // multiple of the vector width
  // The one-read cluster path (forward and fused; sm_90, 16-byte vectors): cl_size CTAs of
  // cl_threads threads per row, each holding cl_slice elements in cl_k vectors per thread.
  // cl_k is 2, 4 or 8; cl_threads a multiple of 32, at most ce_cluster_max_threads(cl_k);
  // cl_size 1..16 (above 8 needs sm_90's non-portable cluster sizes).
  bool cluster = false;
  // The streaming forward (forward only, label_smoothing 0, 16-byte rows; any arch): grid
  // (n, chunks) of ce_stream, chunk_len a multiple of 256 threads x 8 vectors, then ce_rows.
  bool stream = false;
  int cl_size = 1, cl_threads = 256, cl_k = 8;
  int64_t cl_slice = 0;
  // Pointers (run()).
  const void* x = nullptr;
  const void* target = nullptr;
  const void* weight = nullptr;     // nullptr: all ones
  const void* grad_loss = nullptr;  // nullptr: 1
  void* out = nullptr;              // loss (forward)
  void* lse = nullptr;              // f32 [N] (f64 for f64 logits): written forward, read backward
  void* grad = nullptr;             // grad of the logits
  void* workspace = nullptr;
};

constexpr int ce_cluster_max_threads(int k) { return k >= 8 ? 256 : 512; }

// ---- pointwise losses ------------------------------------------------------------------------
// loss_e = f(a_e, b_e, c_e, d_e) over the broadcast shape of the operands (each operand with its
// own strides, 0 on broadcast dims), then none / mean / sum (/ batchmean). Backward writes
// grad_a_e = g_e * df/da. One kernel template per dtype, the kind a runtime switch.
enum class PwKind {
  Mse = 0, L1, Huber, SmoothL1, Bce, BceLogits, KlDiv, PoissonNll, GaussianNll, MarginRanking, HingeEmbedding,
  SoftMargin
};
constexpr int kPwMaxDims = 8;
constexpr int kPwBlocks = 1024;  // stage-1 blocks of a mean / sum at most (fixed per plan: deterministic)
constexpr int kPwThreads = 256;
struct PwLaunch {
  PwKind kind = PwKind::Mse;
  DType dtype = DType::Float32;
  Reduction reduction = Reduction::Mean;
  bool backward = false;
  int64_t n = 0;                  // elements of the broadcast shape
  double divisor = 1.0;           // mean: n; batchmean: input.size(0); sum: 1
  int nd = 1;                     // merged dims (row-major), 1..kPwMaxDims
  int64_t dims[kPwMaxDims] = {};
  // strides (elements) per operand: 0 a (input), 1 b (target), 2 c, 3 d, 4 out / grad_input,
  // 5 grad_loss (per element for none; unused for mean / sum)
  int64_t st[6][kPwMaxDims] = {};
  double p0 = 0.0;                // delta / beta / margin / eps
  bool f0 = false, f1 = false;    // log_target | log_input, full
  int blocks = 1;                 // stage-1 blocks (mean / sum)
  // Contiguous fast path: nd == 1 and every operand, out and (none backward) grad_loss dense
  // with stride 1 (no broadcasting); 16-byte vector loads. run() clears it when a pointer is not
  // 16-byte aligned (the strided kernels then run with the same blocks).
  bool contig = false;
  // Backward: the operand differentiated (0 input, 1 target, 2 c: var / input2).
  int wrt = 0;
  // Mean / sum backward: negate the scalar upstream gradient (the target's gradient of a loss odd
  // in input - target, run as the input's on the vector path).
  bool negate = false;
  // A gradient w.r.t. a broadcast operand (reduce): dims / strides are ordered kept dims first,
  // then the summed dims, so broadcast-shape index j * red_r + r is element r of output j's sum.
  // red_splits warps per output each sum red_chunk consecutive r (lanes strided); with more than
  // one split the partials go to the workspace [red_splits, red_m] and a second kernel adds them
  // in split order. Deterministic, no atomics.
  // red_cols (the innermost dim is kept, e.g. a [D] target over [N, D]): a thread per (output,
  // split) instead of a warp, adjacent threads on adjacent outputs (coalesced), each summing its
  // chunk of r in order.
  bool reduce = false, red_cols = false;
  // Rows path (any loss with a broadcast operand along the rows, e.g. gaussian's var [N] against
  // [N, D], or a gradient w.r.t. a target / var that the contiguous kernels do not take): nd == 2,
  // the shape [dims[0] rows, dims[1] columns], every operand's (and the output's) innermost
  // stride 1 (16-byte vectors along the row, rows 16-byte aligned) or 0 (one value per row / a
  // scalar). Elementwise (forward none, every elementwise gradient), a mean / sum's stage 1 (blocks
  // fixed by the plan), and with `reduce` the gradient w.r.t. a one-value-per-row operand (a warp
  // per (row, split), red_chunk a multiple of the vector width). run() clears it when a vector
  // operand's pointer is not 16-byte aligned (the strided / pointwise_reduce kernels then run on the
  // same geometry).
  bool rows = false;
  int64_t red_m = 0, red_r = 0, red_chunk = 0;
  int red_splits = 1;
  const void* a = nullptr;
  const void* b = nullptr;
  const void* c = nullptr;        // weight / var / input2 / ...
  const void* d = nullptr;        // pos_weight
  const void* grad_loss = nullptr;
  void* out = nullptr;            // loss (forward) or grad_input (backward)
  void* workspace = nullptr;      // blocks partial sums (acc type)
};
int64_t pw_workspace_bytes(const PwLaunch& L);
// Elements per 16-byte vector of the contiguous path, and per thread per grid-stride step.
constexpr int pw_vec_elems(DType t) { return t == DType::Float64 ? 2 : t == DType::Float32 ? 4 : 8; }
constexpr int kPwVecLoadsPerThread = 2;
constexpr int kPwMinBlocks = 4;  // contiguous kernels: <= 64 registers, 4 blocks of 256 resident per SM
// Stage-1 blocks of a contiguous mean / sum: one wave (sms * kPwMinBlocks), at most kPwBlocks.
int64_t pw_contig_blocks(int64_t n, DType t, int sms);
void pw_launch(const PwLaunch& L, void* stream);

// nll_loss over log-probabilities [N, C] with targets [N] (int32 / int64), class weights,
// ignore_index; mean divides by the sum of the weights of the non-ignored targets.
struct NllLaunch {
  DType dtype = DType::Float32;
  DType target_dtype = DType::Int64;
  Reduction reduction = Reduction::Mean;
  bool backward = false;
  int64_t n = 0, c = 0;
  int64_t x_stride0 = 0, x_stride1 = 1, t_stride = 1, w_stride = 1, out_stride = 1, gl_stride = 0;
  int64_t g_stride0 = 0, g_stride1 = 1;
  int64_t ignore_index = -100;
  const void* x = nullptr;
  const void* target = nullptr;
  const void* weight = nullptr;
  const void* grad_loss = nullptr;
  void* out = nullptr;            // loss (forward) or grad_input [N, C] (backward)
  void* workspace = nullptr;
};
int64_t nll_workspace_bytes(const NllLaunch& L);
void nll_launch(const NllLaunch& L, void* stream);

// Bytes of workspace a launch needs (partials, per-row losses and weights, two scalars).
int64_t ce_workspace_bytes(const CeLaunch& L);
void ce_launch(const CeLaunch& L, void* stream);
bool ce_has_kernel(DType t);

}  // namespace baracuda::loss
