// cuBLAS (the classic API), loaded at run time like cuBLASLt (cublaslt_api.h) and from the same places.
// Only its strided-batched GEMM is used: for tf32, where cuBLAS's own kernel selection reaches
// Hopper's tf32 kernels in layouts for which cuBLASLt's heuristic offers none (docs/benchmarks.md, GEMM).
#pragma once
#include <cublas_v2.h>  // defines CUBLASAPI, then includes cublas_api.h (CUDA 12 requires it)

#include <string>

namespace baracuda::cublas {

struct Api {
  decltype(&cublasCreate_v2) Create;
  decltype(&cublasSetStream_v2) SetStream;
  decltype(&cublasSetWorkspace_v2) SetWorkspace;
  decltype(&cublasGemmStridedBatchedEx_64) GemmStridedBatchedEx;
  decltype(&cublasGetStatusName) GetStatusName;
  decltype(&cublasGetStatusString) GetStatusString;
};

// The loaded API, or nullptr (then load_error() says what was tried).
const Api* api();
std::string load_error();
std::string library_path();  // the file the API was loaded from ("" if not loaded)

// One GEMM, C = alpha op(A) op(B) + beta C, column-major, `batch` entries apart by the strides (0:
// the same matrix for every entry). f32 in, f32 out, `compute` (e.g. CUBLAS_COMPUTE_32F_FAST_TF32).
struct StridedGemm {
  cublasOperation_t opa = CUBLAS_OP_N, opb = CUBLAS_OP_N;
  int64_t m = 0, n = 0, k = 0, lda = 0, ldb = 0, ldc = 0;
  int64_t stride_a = 0, stride_b = 0, stride_c = 0, batch = 1;
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
};

// Loads cuBLAS and creates `device`'s handle (which allocates device memory, so not under a CUDA graph
// capture: plans call it at select). Throws Unsupported naming `op` when cuBLAS is not available.
void prepare(const std::string& op, int device);

// Runs g on `device`'s handle (created on first use) bound to `stream` and `workspace` (nullptr / 0:
// none). cuBLAS keeps the stream and workspace in the handle, so the call holds the handle's lock.
// Throws Unsupported naming `op` when cuBLAS is not available, CudaError when the call fails.
void gemm_f32(const std::string& op, int device, void* stream, void* workspace, size_t workspace_size,
              const StridedGemm& g, float alpha, const void* a, const void* b, float beta, void* c);

}  // namespace baracuda::cublas
