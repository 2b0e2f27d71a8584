// The contract between the GEMM plan layer (cpp/src/gemm.cpp) and the bespoke CUDA kernels of
// cuda/gemm/: plain C++, no CUDA types. `void* stream` is a cudaStream_t.
//
// Two kernels live here:
//  * gemv_lowm: the decode regime (M = 1..16) of out = alpha * x @ w^T + beta * out (+ bias),
//    bound by reading w once from HBM; cuBLASLt leaves bandwidth on the table there.
//  * dequant_int32: the epilogue of an int8 GEMM whose int32 accumulator cuBLASLt wrote.
//
// Neither validates shapes, strides or aliasing: select()/run() do (see the notes on each
// field). Neither allocates or synchronizes. CUDA errors surface through cuda_check /
// check_launch, naming the kernel.
#pragma once
#include <cstddef>
#include <cstdint>

#include "baracuda/dtype.h"

namespace baracuda::gemm {

// Whether a pointer allows the kernels' 16-byte accesses (nullptr counts: select() asks without data).
inline bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// out[m, n] = alpha * sum_k x[m, k] * w[n, k] + beta * out[m, n] (+ bias[n]),
// m < M, n < N, k < K; f32 accumulation, one rounding to the output dtype at the end.
//  * x:   [M, K], unit stride along K, row stride ldx (elements).
//  * w:   [N, K], unit stride along K, row stride ldw (an nn.Linear weight; B = w^T).
//  * out: [M, N], unit stride along N, row stride ldo. Must not overlap x, w or bias
//         (x and w are read through the non-coherent cache).
//  * bias: [N] contiguous, dtype `bias_dtype` (== dtype, or Float32); nullptr = none.
//  * beta == 0: out is never read (it may hold NaN). alpha == 0: x and w are never read
//    (BLAS convention: out = beta * out + bias, NaN/inf in x or w not propagated).
//  * K == 0: out = beta * out + bias. M == 0 or N == 0: nothing is launched.
// Summation order is fixed for a given (shape, dtype, device, alignment): deterministic.
struct GemvLowMArgs {
  DType dtype = DType::BFloat16;      // x, w and out: all bf16, all f16 or all f32
  DType bias_dtype = DType::Float32;  // only read when bias != nullptr
  int64_t M = 0, N = 0, K = 0;
  const void* x = nullptr;
  int64_t ldx = 0;
  const void* w = nullptr;
  int64_t ldw = 0;
  void* out = nullptr;
  int64_t ldo = 0;
  const void* bias = nullptr;
  float alpha = 1.0f, beta = 0.0f;
  // Tuning overrides from select (PlanPreference.tuning): the split kw in {1, 2, 4, 8, 16} and,
  // for the mma path, the rows per block rn in {1, 2, 4}; 0 (or another value): the model's.
  int kw = 0, rn = 0;
};

// Largest M the low-M kernels take.
constexpr int64_t kGemvLowMMaxM = 16;

// Host-only predicate for select(): dtype in {bf16, f16, f32}, bias_dtype in {dtype, f32}
// (checked even without a bias: leave it at its default f32 then), 0 <= M <= 16, N, K >= 0.
// Touches no CUDA API. Says nothing about strides (select checks ldx >= K, ...).
bool gemv_lowm_supported(const GemvLowMArgs& a);

// Launch on `stream`. Precondition: gemv_lowm_supported(a).
// The 16-byte vector path needs x and w 16-byte aligned and K, ldx, ldw multiples of
// V = 16 / dtype_size (8 for bf16/f16, 4 for f32); otherwise this launch uses the scalar-load
// fallback (correct, several times slower).
void gemv_lowm(const GemvLowMArgs& a, void* stream);

// The path gemv_lowm(a, ...) takes, e.g. "gemv_lowm.mma.m8.n8.vec16.splitk8"
// (path, M bucket, rows of w per block, load width, warps splitting K). Depends on the shape,
// dtype, the current device (SM count, occupancy) and the alignment of a.x / a.w / ldx / ldw
// (nullptr pointers count as aligned, so a select-time call without data names the vector
// path). Never throws; without a usable device it assumes an H100/H200-class one.
const char* gemv_lowm_variant(const GemvLowMArgs& a);

// Grouped (mixture-of-experts) decode GEMV: E experts, the rows of x sorted by expert, the
// group boundaries on the DEVICE. For every expert e with rows r in [lo_e, hi_e):
//   out[r, n] = alpha * sum_k x[r, k] * w[e, n, k] + beta * out[r, n] (+ bias[e, n]),
// f32 accumulation, one rounding to dtype (same arithmetic as gemv_lowm).
//  * x:   [T, K], unit stride along K, row stride ldx (elements).
//  * w:   [E, N, K], unit stride along K, row stride ldw, expert stride sw (elements).
//  * offsets: int32 or int64 (offsets_dtype) device array [E + 1]; expert e owns rows
//    offsets[e] .. offsets[e + 1] - 1 of x and out. Every entry is clamped to [0, T] and an
//    expert with offsets[e + 1] < offsets[e] owns no rows, so nothing outside x / out is
//    touched whatever the array holds (with out-of-order offsets two experts may own the
//    same row of out: in bounds, but the result of that row is unspecified).
//  * out: [T, N], unit stride along N, row stride ldo. Rows owned by no expert (below
//    offsets[0] or from offsets[E] on) are not written. Must not overlap x, w, bias, offsets.
//  * bias: [E, N], dtype = dtype, unit stride along N, expert stride sbias; nullptr = none.
//  * beta == 0: out is never read. alpha == 0 or K == 0: x and w are never read
//    (out = beta * out + bias on the owned rows), as gemv_lowm.
//  * max_rows: a host-side upper bound on the rows of any one expert (T when unknown). Only a
//    performance hint: it picks the row tile (8 when <= 8, else 16) and the grid size; a
//    larger group is still done right (in chunks of the row tile, re-reading that expert's w,
//    mostly from L2). Groups of 0 rows cost no reads of w.
// One launch for all experts; deterministic (fixed summation order for a given shape, dtype,
// device, alignment and max_rows). Meant for decode (a few rows per expert): each row chunk
// re-reads the expert's weights, so with many rows per expert a grouped GEMM is faster.
constexpr int64_t kMaxHostGroups = 256;  // host boundaries passed by value: (256 + 1) * 8 bytes of parameters

struct GroupedGemvArgs {
  DType dtype = DType::BFloat16;  // x, w, out and bias: all bf16, all f16 or all f32
  int64_t E = 0, N = 0, K = 0, T = 0;
  int64_t max_rows = 0;           // <= 0: unknown (T)
  const void* x = nullptr;
  int64_t ldx = 0;
  const void* w = nullptr;
  int64_t ldw = 0, sw = 0;
  const void* offsets = nullptr;
  DType offsets_dtype = DType::Int32;  // Int32 or Int64
  // The group-sizes path (grouped_sm90 only): the E + 1 boundaries on the host, at most
  // kMaxHostGroups groups, handed to the kernel by value (offsets unused).
  const int64_t* host_offsets = nullptr;
  void* out = nullptr;
  int64_t ldo = 0;
  const void* bias = nullptr;
  int64_t sbias = 0;
  float alpha = 1.0f, beta = 0.0f;
  // Tuning overrides from select: kw and rn as GemvLowMArgs's; waves > 0 caps the grid at that
  // many times the resident blocks (0: one block per estimated item).
  int kw = 0, rn = 0, waves = 0;
};

// Host-only predicate: dtype in {bf16, f16, f32}, offsets_dtype in {int32, int64},
// E, N, K, T >= 0. Touches no CUDA API. Says nothing about strides (select checks them).
bool grouped_gemv_supported(const GroupedGemvArgs& a);

// Launch on `stream`. Precondition: grouped_gemv_supported(a). Nothing is launched when
// E, N or T is 0. The vector (tensor-core for halves) path needs x and w 16-byte aligned and
// K, ldx (T > 1), ldw (N > 1), sw (E > 1) multiples of 16 / dtype_size; otherwise the
// scalar-load fallback runs (correct, several times slower).
void grouped_gemv(const GroupedGemvArgs& a, void* stream);

// The path grouped_gemv(a, ...) takes, e.g. "grouped_gemv.mma.m8.n8.vec16.splitk4"; the same
// conventions as gemv_lowm_variant (nullptr counts as aligned). Never throws.
const char* grouped_gemv_variant(const GroupedGemvArgs& a);

// Tiled grouped GEMM for the prefill regime (many rows per expert): grouped_gemv's contract for
// bf16 / f16 with alpha 1 and beta 0 (bias allowed), 128 x 128 output tiles on tensor cores, a
// persistent grid; max_rows, kw, rn and waves are ignored. Host-only predicate: those dtypes, K a
// multiple of 8 (K > 0), ldx / ldw / sw multiples of 8, x and w 16-byte aligned (nullptr counts as
// aligned). Launch on `stream` when it holds (the caller falls back to grouped_gemv otherwise).
bool grouped_tiled_supported(const GroupedGemvArgs& a);
void grouped_tiled(const GroupedGemvArgs& a, void* stream);

// Hopper (sm_90a) grouped GEMM on CUTLASS's pointer-array grouped kernel (TMA + wgmma, persistent),
// grouped_tiled's contract with the boundaries still on the device. Host-only predicate, no CUDA
// calls: bf16 / f16, int32 / int64 offsets, alpha 1, beta 0, no bias, E, N, T >= 1, K > 0 and a
// multiple of 8, ldx / ldw / ldo / sw multiples of 8, x / w / out 16-byte aligned (nullptr counts as
// aligned), all extents within int. Always false in a build without CUTLASS.
bool grouped_sm90_supported(const GroupedGemvArgs& a);
// Device workspace bytes grouped_sm90(a, ...) needs (per-group arrays + CUTLASS's per-SM TMA
// descriptors; any alignment of the pointer). Depends on E and the current device's SM count; 0
// without CUTLASS.
size_t grouped_sm90_workspace_bytes(const GroupedGemvArgs& a);
// Launch on `stream` (a prep kernel, then the GEMM): no host sync, no allocation, graph-capturable.
// Preconditions: grouped_sm90_supported(a), workspace_bytes >= grouped_sm90_workspace_bytes(a) on
// the same device. Throws Unsupported in a build without CUTLASS.
void grouped_sm90(const GroupedGemvArgs& a, void* workspace, size_t workspace_bytes, void* stream);
// Whether this build compiled it (CUTLASS headers and a 90 arch), and its tile / cluster for the SKU.
bool grouped_sm90_built();
const char* grouped_sm90_variant();

// Dequantizing epilogue of an int8 GEMM:
// out[m, n] = (float)acc[m, n] * row_scale[m] * col_scale[n] (+ bias[n]), computed in f32 as
// fmaf((float)acc * row_scale, col_scale, bias), rounded once to out_dtype. ((float)acc is exact
// up to |acc| = 2^24.)
//  * acc: int32 [M, N], row stride ldacc (elements), unit stride along N.
//  * row_scale: f32 [M] contiguous, nullptr = 1. col_scale: f32 [N] contiguous, nullptr = 1.
//  * bias: [N] contiguous, dtype bias_dtype (Float32 or out_dtype); nullptr = none.
//  * out: out_dtype in {Float16, BFloat16, Float32}, [M, N], row stride ldo; must not overlap
//    acc. (out == acc reinterpreted as f32 with ldo == ldacc is NOT supported.)
// 16-byte loads of acc when acc is 16-byte aligned and ldacc % 4 == 0 (any N).
struct DequantArgs {
  int64_t M = 0, N = 0;
  const int32_t* acc = nullptr;
  int64_t ldacc = 0;
  const float* row_scale = nullptr;
  const float* col_scale = nullptr;
  const void* bias = nullptr;
  DType bias_dtype = DType::Float32;
  void* out = nullptr;
  DType out_dtype = DType::BFloat16;
  int64_t ldo = 0;
};

// Host-only predicate: out_dtype in {f16, bf16, f32}, bias_dtype in {f32, out_dtype} when bias
// is set, M, N >= 0.
bool dequant_int32_supported(const DequantArgs& a);
void dequant_int32(const DequantArgs& a, void* stream);

// max |x| over a row-major [rows, cols] matrix with row stride ld, into *out (f32). Sets *out
// first (on the stream), then folds each block's maximum in with an integer atomicMax on the
// bits (non-negative floats order like their bit patterns): order-independent, so
// deterministic. NaN propagates (|NaN|'s bits exceed +inf's).
struct AbsMaxArgs {
  const void* x = nullptr;
  DType dtype = DType::BFloat16;  // f16, bf16, f32
  int64_t rows = 0, cols = 0, ld = 0;
  float* out = nullptr;
};
void absmax(const AbsMaxArgs& a, void* stream);

}  // namespace baracuda::gemm
