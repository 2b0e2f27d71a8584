// The GEMM family: out = alpha * a @ b + beta * out, with fused epilogues, strided batches,
// fp8 and int8 inputs, and a decode-regime path for a handful of rows.
//
//   a   [..., M, K]   any of row-major (K contiguous) or column-major (M contiguous), with a
//   b   [..., K, N]   leading dimension: torch's x.t() and slices are read in place, no copies
//   out [..., M, N]   row-major (N contiguous) or column-major; batch dims broadcast (a batch
//                     stride of 0 reuses one matrix for every batch entry)
//
// Backends: cuBLASLt (loaded at run time, see gemm_backend_info()) for everything but tf32 with
// at most a bias and a forward activation, which runs on cuBLAS (its kernel choice reaches Hopper's
// tf32 kernels in every layout; cuBLASLt's heuristic does not), the bias and the activation then
// passes of ours; and a kernel of ours for M <= 16 rows ("gemv_lowm": streams the weight matrix at
// HBM speed) when the preference allows it.
// plan.sku() names the backend and the algorithm chosen.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "baracuda/plan.h"
#include "baracuda/registry.h"
#include "baracuda/tensor.h"

namespace baracuda {

// What happens to a @ b (after alpha, beta and bias) before it is stored.
enum class GemmEpilogue {
  None,
  Relu,
  Gelu,        // erf form (torch's default); a pass of ours after cuBLASLt
  GeluTanh,    // tanh approximation; fused in cuBLASLt
  Silu,        // a pass of ours after cuBLASLt
  DGeluTanh,   // backward of GeluTanh: out = (a @ b) * gelu_tanh'(aux); aux = the pre-activation
  BiasGrad,    // out = a @ b, and bias_grad[m] = sum_k a[m, k] (db of a dW = dY^T X product)
};
const char* epilogue_name(GemmEpilogue e);
GemmEpilogue epilogue_from_name(const std::string& name);  // throws InvalidArgument

// How a or b is scaled before the product (quantized inputs).
enum class GemmScale {
  None,
  Tensor,  // one f32 device scalar (fp8: a_scale, b_scale)
  Vector,  // int8 -> float out: a per row of a (row_scale [M]) / per column of b (col_scale [N]), f32
};

struct GemmDescriptor {
  TensorSpec a, b, out;
  double alpha = 1.0, beta = 0.0;    // beta != 0 reads out (C = out, in place)
  GemmEpilogue epilogue = GemmEpilogue::None;
  bool bias = false;                 // bias [N] added before the activation
  DType bias_dtype = DType::Float32; // f32, or the output dtype
  bool aux = false;                  // Gelu/GeluTanh/Silu: also store the pre-activation in aux
                                     // [..., M, N] (out's dtype, row-major); DGeluTanh: read it
  bool bias_grad = false;            // BiasGrad: bias_grad [M]; DGeluTanh: bias_grad [N] = sum_m out
  GemmScale a_scale = GemmScale::None, b_scale = GemmScale::None;
  bool amax = false;                 // fp8: also store max |out| (f32 scalar)
  bool operator==(const GemmDescriptor& o) const;
  std::string str() const;
};

// The tensors of one run. A view with data == nullptr is absent.
struct GemmTensors {
  TensorView out, a, b;
  TensorView bias, aux, bias_grad;
  TensorView a_scale, b_scale;   // f32: scalars (Tensor) or [M] / [N] (Vector)
  TensorView amax;               // f32 scalar
};

class GemmPlan {
 public:
  // Validates shapes, layouts, dtypes and epilogue; picks the backend and, when a GPU is
  // present, the cuBLASLt algorithm (on the current device). Throws InvalidArgument /
  // InvalidDType / Unsupported naming the argument.
  static GemmPlan select(const GemmDescriptor& desc, const PlanPreference& pref = PlanPreference{});
  const KernelSku& sku() const;
  const GemmDescriptor& descriptor() const;
  // Scratch bytes run() needs (cuBLASLt's workspace, int32 accumulators for int8 dequant).
  int64_t workspace_bytes() const;
  // Checks the tensors against the descriptor and launches on `stream`. Never allocates, never
  // synchronizes. Misaligned pointers get an algorithm chosen for their alignment (cached).
  void run(const GemmTensors& t, void* workspace = nullptr, int64_t workspace_size = 0,
           StreamHandle stream = nullptr) const;

  struct Impl;
  explicit GemmPlan(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
 private:
  std::shared_ptr<Impl> impl_;
};

// Grouped GEMM for mixture-of-experts layers: tokens sorted by expert, one weight per expert.
//   x   [T, K]     K contiguous; expert e owns rows offsets[e] .. offsets[e + 1]
//   w   [E, N, K]  nn.Linear weights stacked (K contiguous): out_e = x_e @ w[e]^T (+ bias[e])
//   out [T, N]     N contiguous; rows past offsets[E] are not written
// Two paths. Offsets on the device (the router's output; no host sync): one launch of a kernel
// of ours for every expert (empty experts cost nothing; best for few rows per expert, the
// decode regime; correct for any count). Group sizes on the host: one cuBLASLt GEMM per
// non-empty expert (E launches; for large groups, prefill).
struct GroupedGemmDescriptor {
  TensorSpec x, w, out;
  std::vector<int64_t> group_sizes;   // rows per expert on the host; empty = offsets on the device
  DType offsets_dtype = DType::Int32; // int32 or int64, [E + 1], when group_sizes is empty
  bool bias = false;                  // bias [E, N], out's dtype
  int64_t max_rows_per_group = -1;    // offsets path: an upper bound on one expert's rows if known
                                      // (a speed hint: <= 8 picks the 8-row kernel); -1 = unknown
  bool operator==(const GroupedGemmDescriptor& o) const;
  std::string str() const;
};

struct GroupedGemmTensors {
  TensorView out, x, w, offsets, bias;  // offsets / bias: data == nullptr when absent
};

class GroupedGemmPlan {
 public:
  static GroupedGemmPlan select(const GroupedGemmDescriptor& desc, const PlanPreference& pref = PlanPreference{});
  const KernelSku& sku() const;
  const GroupedGemmDescriptor& descriptor() const;
  int64_t workspace_bytes() const;
  void run(const GroupedGemmTensors& t, void* workspace = nullptr, int64_t workspace_size = 0,
           StreamHandle stream = nullptr) const;

  struct Impl;
  explicit GroupedGemmPlan(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
 private:
  std::shared_ptr<Impl> impl_;
};

// Where cuBLASLt (and cuBLAS, for tf32) were loaded from and cuBLASLt's version, or why they could
// not be ("" path).
struct GemmBackendInfo {
  bool cublaslt_available;
  std::string cublaslt_path;
  int64_t cublaslt_version;   // e.g. 130100
  std::string error;          // cuBLASLt's
  bool cublas_available;
  std::string cublas_path;
  std::string cublas_error;
};
GemmBackendInfo gemm_backend_info();

FamilyInfo gemm_family_info();

}  // namespace baracuda
