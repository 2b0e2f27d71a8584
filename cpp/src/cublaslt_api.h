// cuBLASLt, loaded at run time. The core links no cuBLAS: the library is found when a GEMM
// plan first needs it (already loaded by torch / JAX, the loader's path, BARACUDA_CUBLASLT,
// or a directory registered with baracuda::add_library_dir, e.g. the nvidia-cublas wheel's), so
// `import baracuda` costs nothing and the rest of the library works without it.
#pragma once
#include <cublasLt.h>

#include <string>

namespace baracuda::cublaslt {

struct Api {
  decltype(&cublasLtCreate) Create;
  decltype(&cublasLtDestroy) Destroy;
  decltype(&cublasLtGetVersion) GetVersion;
  decltype(&cublasLtGetStatusName) GetStatusName;
  decltype(&cublasLtGetStatusString) GetStatusString;
  decltype(&cublasLtMatmul) Matmul;
  decltype(&cublasLtMatmulDescCreate) MatmulDescCreate;
  decltype(&cublasLtMatmulDescDestroy) MatmulDescDestroy;
  decltype(&cublasLtMatmulDescSetAttribute) MatmulDescSetAttribute;
  decltype(&cublasLtMatrixLayoutCreate) MatrixLayoutCreate;
  decltype(&cublasLtMatrixLayoutDestroy) MatrixLayoutDestroy;
  decltype(&cublasLtMatrixLayoutSetAttribute) MatrixLayoutSetAttribute;
  decltype(&cublasLtMatmulPreferenceCreate) MatmulPreferenceCreate;
  decltype(&cublasLtMatmulPreferenceDestroy) MatmulPreferenceDestroy;
  decltype(&cublasLtMatmulPreferenceSetAttribute) MatmulPreferenceSetAttribute;
  decltype(&cublasLtMatmulAlgoGetHeuristic) MatmulAlgoGetHeuristic;
  decltype(&cublasLtMatmulAlgoConfigGetAttribute) MatmulAlgoConfigGetAttribute;
};

// The loaded API, or nullptr (then load_error() says what was tried).
const Api* api();
// api(), or throws Unsupported naming `op`, what was tried and how to fix it.
const Api& require(const std::string& op);
std::string load_error();
std::string library_path();  // the file the API was loaded from ("" if not loaded)

// One handle per device, created on first use; thread-safe.
cublasLtHandle_t handle(int device);

// Throws CudaError naming `call` and cuBLASLt's status name and text.
void check(cublasStatus_t s, const char* call);

}  // namespace baracuda::cublaslt
