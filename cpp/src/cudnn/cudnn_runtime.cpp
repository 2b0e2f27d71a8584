// Finding and loading cuDNN (see cudnn_runtime.h).
#include "cudnn/cudnn_runtime.h"

#include <cuda_runtime.h>

#include <unordered_map>

#include "baracuda/errors.h"
#include "dynlib.h"

// The handle cudnn-frontend's dynamic-loading shim resolves every cuDNN symbol through.
namespace cudnn_frontend {
void* cudnn_dlhandle = nullptr;
}

namespace baracuda::cudnn {

namespace {

// The major version the headers we compiled against belong to (the ABI we speak).
constexpr const char* kSoname = "libcudnn.so." BARACUDA_STR(CUDNN_MAJOR);

struct Api {
  decltype(&cudnnCreate) Create = nullptr;
  decltype(&cudnnGetVersion) GetVersion = nullptr;
  decltype(&cudnnGetErrorString) GetErrorString = nullptr;
};

dynlib::Loaded<Api> load() {
  auto L = dynlib::load<Api>(kSoname, "BARACUDA_CUDNN", "cuDNN",
                             "Install it with `pip install " BARACUDA_CUDNN_WHEEL "` (torch brings it), or set "
                             "BARACUDA_CUDNN to the library's path.",
                             [](void* lib, Api& a, std::string& missing) {
                               dynlib::bind(lib, "cudnnCreate", a.Create, missing);
                               dynlib::bind(lib, "cudnnGetVersion", a.GetVersion, missing);
                               dynlib::bind(lib, "cudnnGetErrorString", a.GetErrorString, missing);
                             });
  if (L.ok && L.api.GetVersion() / 10000 != CUDNN_MAJOR) {
    L.ok = false;
    L.error = L.path + " is cuDNN " + std::to_string(L.api.GetVersion()) + "; this build speaks cuDNN " +
              BARACUDA_STR(CUDNN_MAJOR) + ".x";
  }
  if (L.ok) cudnn_frontend::cudnn_dlhandle = L.handle;
  return L;
}

const dynlib::Loaded<Api>& loaded() {
  static const dynlib::Loaded<Api> L = load();  // a function-local static: loaded once, thread-safe
  return L;
}

}  // namespace

bool available() { return loaded().ok; }
std::string load_error() { return loaded().error; }
std::string library_path() { return loaded().ok ? loaded().path : ""; }

int build_device(std::string& why) {
  if (!available()) {
    why = load_error();
    return -1;
  }
  int device = -1;
  if (cudaGetDevice(&device) != cudaSuccess) {
    cudaGetLastError();
    why = "no CUDA device to build the cuDNN graph on";
    return -1;
  }
  return device;
}
int64_t version() { return loaded().ok ? loaded().api.GetVersion() : 0; }

cudnnHandle_t handle(int device) {
  const auto& L = loaded();
  if (!L.ok) throw Unsupported("cuDNN is not available: " + L.error);
  // Per thread: cudnnSetStream + execute on a shared handle would race between threads. Handles
  // live until exit (destroying them at static teardown races the driver).
  thread_local std::unordered_map<int, cudnnHandle_t> handles;
  auto it = handles.find(device);
  if (it != handles.end()) return it->second;
  int prev = -1;
  if (cudaGetDevice(&prev) != cudaSuccess) throw CudaError("cudaGetDevice failed while creating a cuDNN handle");
  if (prev != device && cudaSetDevice(device) != cudaSuccess)
    throw CudaError("cudaSetDevice(" + std::to_string(device) + ") failed while creating a cuDNN handle");
  cudnnHandle_t h = nullptr;
  const cudnnStatus_t s = L.api.Create(&h);
  if (prev != device) cudaSetDevice(prev);
  if (s != CUDNN_STATUS_SUCCESS) throw CudaError(std::string("cudnnCreate failed: ") + L.api.GetErrorString(s));
  handles.emplace(device, h);
  return h;
}

}  // namespace baracuda::cudnn
