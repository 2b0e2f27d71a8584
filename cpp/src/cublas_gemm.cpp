// Finding and loading cuBLAS (see cublas_gemm.h).
#include "cublas_gemm.h"

#include <memory>
#include <mutex>
#include <vector>

#include "dynlib.h"

#include "baracuda/errors.h"

namespace baracuda::cublas {

namespace {

constexpr const char* kSoname = "libcublas.so." BARACUDA_STR(CUBLAS_VER_MAJOR);

const dynlib::Loaded<Api>& loaded() {
  static const dynlib::Loaded<Api> L = dynlib::load<Api>(
      kSoname, nullptr, "cuBLAS",
      "Install it with `pip install " BARACUDA_CUBLAS_WHEEL "` (torch and JAX bring it).",
      [](void* lib, Api& a, std::string& missing) {
        dynlib::bind(lib, "cublasCreate_v2", a.Create, missing);
        dynlib::bind(lib, "cublasSetStream_v2", a.SetStream, missing);
        dynlib::bind(lib, "cublasSetWorkspace_v2", a.SetWorkspace, missing);
        dynlib::bind(lib, "cublasGemmStridedBatchedEx_64", a.GemmStridedBatchedEx, missing);
        dynlib::bind(lib, "cublasGetStatusName", a.GetStatusName, missing);
        dynlib::bind(lib, "cublasGetStatusString", a.GetStatusString, missing);
      });
  return L;
}

struct Handle {
  std::mutex mu;
  cublasHandle_t h = nullptr;
};

void check(const Api& a, cublasStatus_t s, const char* call) {
  if (s == CUBLAS_STATUS_SUCCESS) return;
  const std::string msg = std::string(call) + " failed: " + a.GetStatusName(s) + " (" + a.GetStatusString(s) + ")";
  if (s == CUBLAS_STATUS_ALLOC_FAILED) throw OutOfMemory(msg);
  throw CudaError(msg);
}

// The device's handle, created on first use (its calls serialised by Handle::mu).
Handle& handle(const Api& a, int device) {
  static dynlib::PerDevice<Handle> handles;
  return handles.get(device, "cublas handle", [&](int, Handle& h) { check(a, a.Create(&h.h), "cublasCreate"); });
}

}  // namespace

const Api* api() { return loaded().ok ? &loaded().api : nullptr; }
std::string load_error() { return loaded().error; }
std::string library_path() { return loaded().ok ? loaded().path : ""; }

void prepare(const std::string& op, int device) {
  const Api* api_ = api();
  if (!api_) throw Unsupported(op + ": needs cuBLAS, which is not available: " + load_error());
  handle(*api_, device);
}

void gemm_f32(const std::string& op, int device, void* stream, void* workspace, size_t workspace_size,
              const StridedGemm& g, float alpha, const void* a, const void* b, float beta, void* c) {
  const Api* api_ = api();
  if (!api_) throw Unsupported(op + ": needs cuBLAS, which is not available: " + load_error());
  Handle& h = handle(*api_, device);
  std::lock_guard<std::mutex> lock(h.mu);
  // SetStream resets the workspace to cuBLAS's own pool, so the workspace comes after it; set every
  // call, as a pointer left from an earlier call may since have been freed.
  check(*api_, api_->SetStream(h.h, static_cast<cudaStream_t>(stream)), "cublasSetStream");
  check(*api_, api_->SetWorkspace(h.h, workspace_size ? workspace : nullptr, workspace ? workspace_size : 0),
        "cublasSetWorkspace");
  check(*api_,
        api_->GemmStridedBatchedEx(h.h, g.opa, g.opb, g.m, g.n, g.k, &alpha, a, CUDA_R_32F, g.lda, g.stride_a, b,
                                   CUDA_R_32F, g.ldb, g.stride_b, &beta, c, CUDA_R_32F, g.ldc, g.stride_c, g.batch,
                                   g.compute, CUBLAS_GEMM_DEFAULT),
        "cublasGemmStridedBatchedEx");
}

}  // namespace baracuda::cublas
