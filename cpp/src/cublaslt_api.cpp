// Finding and loading cuBLASLt (see cublaslt_api.h).
#include "cublaslt_api.h"

#include <dlfcn.h>

#include <cstdlib>
#include <memory>
#include <mutex>
#include <vector>

#include "baracuda/errors.h"

namespace baracuda::cublaslt {

namespace {

#define BARACUDA_STR2(x) #x
#define BARACUDA_STR(x) BARACUDA_STR2(x)
// The major version the headers we compiled against belong to (the ABI we speak).
constexpr const char* kSoname = "libcublasLt.so." BARACUDA_STR(CUBLAS_VER_MAJOR);

std::mutex& mu() {
  static std::mutex m;
  return m;
}
std::vector<std::string>& dirs() {
  static std::vector<std::string> d;
  return d;
}

struct Loaded {
  Api api{};
  bool ok = false;
  std::string path, error;
};

template <class F>
bool sym(void* lib, const char* name, F& f, std::string& missing) {
  f = reinterpret_cast<F>(dlsym(lib, name));
  if (!f) missing += std::string(missing.empty() ? "" : ", ") + name;
  return f != nullptr;
}

Loaded load() {
  Loaded L;
  std::vector<std::string> candidates;
  if (const char* env = std::getenv("BARACUDA_CUBLASLT")) candidates.push_back(env);
  candidates.push_back(kSoname);  // already loaded (torch, JAX) or on the loader's path
  for (const auto& d : dirs()) candidates.push_back(d + "/" + kSoname);
  if (const char* home = std::getenv("CUDA_HOME")) candidates.push_back(std::string(home) + "/lib64/" + kSoname);
  candidates.push_back(std::string("/usr/local/cuda/lib64/") + kSoname);
  std::string tried;
  void* lib = nullptr;
  for (const auto& c : candidates) {
    lib = dlopen(c.c_str(), RTLD_NOW | RTLD_GLOBAL);
    if (lib) {
      L.path = c;
      break;
    }
    tried += "\n  " + c + ": " + dlerror();
  }
  if (!lib) {
    L.error = std::string("cuBLASLt (") + kSoname + ") could not be loaded; tried:" + tried +
              "\nInstall it with `pip install nvidia-cublas` (torch and JAX bring it), or set BARACUDA_CUBLASLT "
              "to the library's path.";
    return L;
  }
  std::string missing;
  Api& a = L.api;
  sym(lib, "cublasLtCreate", a.Create, missing);
  sym(lib, "cublasLtDestroy", a.Destroy, missing);
  sym(lib, "cublasLtGetVersion", a.GetVersion, missing);
  sym(lib, "cublasLtGetStatusName", a.GetStatusName, missing);
  sym(lib, "cublasLtGetStatusString", a.GetStatusString, missing);
  sym(lib, "cublasLtMatmul", a.Matmul, missing);
  sym(lib, "cublasLtMatmulDescCreate", a.MatmulDescCreate, missing);
  sym(lib, "cublasLtMatmulDescDestroy", a.MatmulDescDestroy, missing);
  sym(lib, "cublasLtMatmulDescSetAttribute", a.MatmulDescSetAttribute, missing);
  sym(lib, "cublasLtMatrixLayoutCreate", a.MatrixLayoutCreate, missing);
  sym(lib, "cublasLtMatrixLayoutDestroy", a.MatrixLayoutDestroy, missing);
  sym(lib, "cublasLtMatrixLayoutSetAttribute", a.MatrixLayoutSetAttribute, missing);
  sym(lib, "cublasLtMatmulPreferenceCreate", a.MatmulPreferenceCreate, missing);
  sym(lib, "cublasLtMatmulPreferenceDestroy", a.MatmulPreferenceDestroy, missing);
  sym(lib, "cublasLtMatmulPreferenceSetAttribute", a.MatmulPreferenceSetAttribute, missing);
  sym(lib, "cublasLtMatmulAlgoGetHeuristic", a.MatmulAlgoGetHeuristic, missing);
  sym(lib, "cublasLtMatmulAlgoConfigGetAttribute", a.MatmulAlgoConfigGetAttribute, missing);
  if (!missing.empty()) {
    L.error = L.path + " lacks " + missing;
    return L;
  }
  L.ok = true;
  return L;
}

const Loaded& loaded() {
  static const Loaded L = [] {
    std::lock_guard<std::mutex> g(mu());
    return load();
  }();
  return L;
}

}  // namespace

void add_library_dir(const std::string& dir) {
  std::lock_guard<std::mutex> g(mu());
  dirs().push_back(dir);
}

const Api* api() { return loaded().ok ? &loaded().api : nullptr; }
std::string load_error() { return loaded().error; }
std::string library_path() { return loaded().ok ? loaded().path : ""; }

const Api& require(const std::string& op) {
  if (const Api* a = api()) return *a;
  throw Unsupported(op + ": needs cuBLASLt, which is not available: " + load_error());
}

cublasLtHandle_t handle(int device) {
  static std::mutex m;
  static std::vector<cublasLtHandle_t> handles;
  std::lock_guard<std::mutex> g(m);
  if (device < 0) throw InvalidArgument("cublasLt handle: negative device");
  if (size_t(device) >= handles.size()) handles.resize(device + 1, nullptr);
  if (!handles[device]) check(require("gemm").Create(&handles[device]), "cublasLtCreate");
  return handles[device];  // lives until exit: destroying at static teardown races the driver
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
