// Finding and loading cuBLASLt (see cublaslt_api.h).
#include "cublaslt_api.h"

#include <mutex>
#include <vector>

#include "dynlib.h"

#include "baracuda/errors.h"

namespace baracuda::cublaslt {

namespace {

// The major version the headers we compiled against belong to (the ABI we speak).
constexpr const char* kSoname = "libcublasLt.so." BARACUDA_STR(CUBLAS_VER_MAJOR);

const dynlib::Loaded<Api>& loaded() {
  // a function-local static: loaded once, thread-safe
  static const dynlib::Loaded<Api> L = dynlib::load<Api>(
      kSoname, "BARACUDA_CUBLASLT", "cuBLASLt",
      "Install it with `pip install " BARACUDA_CUBLAS_WHEEL "` (torch and JAX bring it), or set BARACUDA_CUBLASLT to the "
      "library's path.",
      [](void* lib, Api& a, std::string& missing) {
        dynlib::bind(lib, "cublasLtCreate", a.Create, missing);
        dynlib::bind(lib, "cublasLtDestroy", a.Destroy, missing);
        dynlib::bind(lib, "cublasLtGetVersion", a.GetVersion, missing);
        dynlib::bind(lib, "cublasLtGetStatusName", a.GetStatusName, missing);
        dynlib::bind(lib, "cublasLtGetStatusString", a.GetStatusString, missing);
        dynlib::bind(lib, "cublasLtMatmul", a.Matmul, missing);
        dynlib::bind(lib, "cublasLtMatmulDescCreate", a.MatmulDescCreate, missing);
        dynlib::bind(lib, "cublasLtMatmulDescDestroy", a.MatmulDescDestroy, missing);
        dynlib::bind(lib, "cublasLtMatmulDescSetAttribute", a.MatmulDescSetAttribute, missing);
        dynlib::bind(lib, "cublasLtMatrixLayoutCreate", a.MatrixLayoutCreate, missing);
        dynlib::bind(lib, "cublasLtMatrixLayoutDestroy", a.MatrixLayoutDestroy, missing);
        dynlib::bind(lib, "cublasLtMatrixLayoutSetAttribute", a.MatrixLayoutSetAttribute, missing);
        dynlib::bind(lib, "cublasLtMatmulPreferenceCreate", a.MatmulPreferenceCreate, missing);
        dynlib::bind(lib, "cublasLtMatmulPreferenceDestroy", a.MatmulPreferenceDestroy, missing);
        dynlib::bind(lib, "cublasLtMatmulPreferenceSetAttribute", a.MatmulPreferenceSetAttribute, missing);
        dynlib::bind(lib, "cublasLtMatmulAlgoGetHeuristic", a.MatmulAlgoGetHeuristic, missing);
        dynlib::bind(lib, "cublasLtMatmulAlgoConfigGetAttribute", a.MatmulAlgoConfigGetAttribute, missing);
      });
  return L;
}

}  // namespace

const Api* api() { return loaded().ok ? &loaded().api : nullptr; }
std::string load_error() { return loaded().error; }
std::string library_path() { return loaded().ok ? loaded().path : ""; }

const Api& require(const std::string& op) {
  if (const Api* a = api()) return *a;
  throw Unsupported(op + ": needs cuBLASLt, which is not available: " + load_error());
}

cublasLtHandle_t handle(int device) {
  static dynlib::PerDevice<cublasLtHandle_t> handles;
  return handles.get(device, "cublasLt handle",
                     [](int, cublasLtHandle_t& h) { check(require("gemm").Create(&h), "cublasLtCreate"); });
}

void check(cublasStatus_t s, const char* call) {
  if (s == CUBLAS_STATUS_SUCCESS) return;
  const Api* a = api();
  std::string msg = std::string(call) + " failed: " + (a ? a->GetStatusName(s) : "status") + " (" +
                    (a ? a->GetStatusString(s) : std::to_string(int(s))) + ")";
  if (s == CUBLAS_STATUS_ALLOC_FAILED) throw OutOfMemory(msg);
  throw CudaError(msg);
}

}  // namespace baracuda::cublaslt
