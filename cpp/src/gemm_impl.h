// What gemm.cpp (select) and gemm_run.cpp (run) share: GemmPlan::Impl and the cuBLASLt pieces it
// holds. Private to the core.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>

#include "baracuda/elementwise.h"
#include "baracuda/gemm.h"
#include "cublas_gemm.h"
#include "cublaslt_api.h"
#include "gemm/gemm_launch.h"

namespace baracuda {
namespace gemm_detail {

constexpr const char* kOp = "gemm";
constexpr int64_t kDefaultWorkspace = 32ll << 20;  // cuBLASLt's recommendation for Hopper

// The batch: out's leading dims; a and b broadcast to them. Each operand's batch dims must
// flatten into one stride (0 = the same matrix for every entry).
struct Batch {
  int64_t count = 1;
  int64_t stride_a = 0, stride_b = 0, stride_out = 0;
};

// RAII for the cuBLASLt descriptors of one plan.
struct LtDescs {
  const cublaslt::Api* api = nullptr;
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  ~LtDescs() {
    if (!api) return;
    if (op) api->MatmulDescDestroy(op);
    for (auto l : {a, b, c})
      if (l) api->MatrixLayoutDestroy(l);
  }
};

struct Algo {
  cublasLtMatmulAlgo_t algo;
  int64_t workspace = 0;
  std::string name;
};

enum class Path { Empty, KZero, Lt, Cublas, GemvLowM };

template <class T>
inline void set_attr(const cublaslt::Api& api, cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t attr, const T& v,
              const char* what) {
  cublaslt::check(api.MatmulDescSetAttribute(d, attr, &v, sizeof v), what);
}
template <class T>
inline void set_layout(const cublaslt::Api& api, cublasLtMatrixLayout_t l, cublasLtMatrixLayoutAttribute_t attr, const T& v) {
  cublaslt::check(api.MatrixLayoutSetAttribute(l, attr, &v, sizeof v), "cublasLtMatrixLayoutSetAttribute");
}

}  // namespace gemm_detail

struct GemmPlan::Impl {
  using Algo = gemm_detail::Algo;
  using Batch = gemm_detail::Batch;
  using LtDescs = gemm_detail::LtDescs;
  using Path = gemm_detail::Path;
  GemmDescriptor desc;
  PlanPreference pref;
  KernelSku sku;
  Path path = Path::Lt;
  int64_t M = 0, N = 0, K = 0;
  Batch batch;
  bool out_row_major = true;  // the formulation: cuBLASLt computes out^T = b^T a^T
  int64_t ld_out = 0, ld_aux = 0;
  int64_t workspace_limit = gemm_detail::kDefaultWorkspace;
  int algo_index = 0;         // which of cuBLASLt's heuristic candidates (tuning "algo"; 0: its first)
  int64_t workspace = 0;      // what run() needs (cuBLASLt's + int32 accumulators)
  int64_t acc_bytes = 0;      // int8 dequant: int32 [M, N] accumulators at the workspace's end
  cublasLtEpilogue_t lt_epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  std::unique_ptr<LtDescs> lt;
  std::mutex mu;                              // guards the Lt descriptor's pointer attributes and the cache
  std::map<std::tuple<int, int, int64_t>, Algo> algos;  // (device, alignment, workspace cap) -> algorithm
  std::unique_ptr<ElementwisePlan> activation;  // gelu / silu after cuBLASLt
  std::unique_ptr<ElementwisePlan> k_zero;      // out = beta * out when K == 0
  std::unique_ptr<ElementwisePlan> bias_add;    // Path::Cublas with a bias: out += bias after the GEMM
  gemm::GemvLowMArgs gemv{};
  cublas::StridedGemm cublas_gemm{};          // Path::Cublas: the call, in cuBLASLt's formulation

  // Lowest alignment (bytes, <= 16) among the pointers of a run; 16 at select.
  Algo& algo_for(int device, int align, int64_t ws_cap);
  void fill_sku(const Algo* algo);
};

}  // namespace baracuda
