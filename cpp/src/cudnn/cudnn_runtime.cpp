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

#define BARACUDA_STR2(x) #x
#define BARACUDA_STR(x) BARACUDA_STR2(x)
// The major version the headers we compiled against belong to (the ABI we speak).
constexpr const char* kSoname = "libcudnn.so." BARACUDA_STR(CUDNN_MAJOR);

struct Loaded {
  decltype(&cudnnCreate) Create = nullptr;
  decltype(&cudnnGetVersion) GetVersion = nullptr;
  decltype(&cudnnGetErrorString) GetErrorString = nullptr;
  bool ok = false;
  std::string path, error;
};

Loaded load() {
  Loaded L;
  dynlib::Opened o = dynlib::open(kSoname, "BARACUDA_CUDNN");
  if (!o.handle) {
    L.error = std::string("cuDNN (") + kSoname + ") could not be loaded; tried:" + o.tried +
              "\nInstall it with `pip install nvidia-cudnn-cu13` (torch brings it), or set BARACUDA_CUDNN to the "
              "library's path.";
    return L;
  }
  L.path = o.path;
  std::string missing;
  dynlib::bind(o.handle, "cudnnCreate", L.Create, missing);
  dynlib::bind(o.handle, "cudnnGetVersion", L.GetVersion, missing);
  dynlib::bind(o.handle, "cudnnGetErrorString", L.GetErrorString, missing);
  if (!missing.empty()) {
    L.error = L.path + " lacks " + missing;
    return L;
  }
  if (L.GetVersion() / 10000 != CUDNN_MAJOR) {
    L.error = L.path + " is cuDNN " + std::to_string(L.GetVersion()) + "; this build speaks cuDNN " +
              BARACUDA_STR(CUDNN_MAJOR) + ".x";
    return L;
  }
  cudnn_frontend::cudnn_dlhandle = o.handle;
  L.ok = true;
  return L;
}

const Loaded& loaded() {
  static const Loaded L = load();  // a function-local static: initialised once, thread-safe
  return L;
}

}  // namespace

bool available() { return loaded().ok; }
std::string load_error() { return loaded().error; }
std::string library_path() { return loaded().ok ? loaded().path : ""; }
int64_t version() { return loaded().ok ? loaded().GetVersion() : 0; }

cudnnHandle_t handle(int device) {
  const Loaded& L = loaded();
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
  const cudnnStatus_t s = L.Create(&h);
  if (prev != device) cudaSetDevice(prev);
  if (s != CUDNN_STATUS_SUCCESS) throw CudaError(std::string("cudnnCreate failed: ") + L.GetErrorString(s));
  handles.emplace(device, h);
  return h;
}

}  // namespace baracuda::cudnn
