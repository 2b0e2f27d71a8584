// Libraries loaded at run time (cuBLASLt, cuDNN): one search order for all of them, so the
// core links none and `import baracuda` costs nothing until a plan needs one.
#pragma once
#include <dlfcn.h>

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "baracuda/errors.h"

// A macro's value as a string literal: the headers' major version in a soname
// ("libcudnn.so." BARACUDA_STR(CUDNN_MAJOR)).
#define BARACUDA_STR2(x) #x
#define BARACUDA_STR(x) BARACUDA_STR2(x)

// The pip wheels of NVIDIA's libraries for the CUDA major version this build targets, named in the
// "install it with" hints: from CUDA 13 cuBLAS is one package ("nvidia-cublas"), before it one per
// major ("nvidia-cublas-cu12"); cuDNN is per major in both ("nvidia-cudnn-cu12", "-cu13").
#include <cuda_runtime_api.h>
#if CUDART_VERSION >= 13000
#define BARACUDA_CUDA_MAJOR_STR "13"
#define BARACUDA_CUBLAS_WHEEL "nvidia-cublas"
#else
#define BARACUDA_CUDA_MAJOR_STR "12"
#define BARACUDA_CUBLAS_WHEEL "nvidia-cublas-cu12"
#endif
#define BARACUDA_CUDNN_WHEEL "nvidia-cudnn-cu" BARACUDA_CUDA_MAJOR_STR

namespace baracuda::dynlib {

// A directory searched after the loader's own path (the Python package registers the nvidia-*
// wheels' lib directories). Only affects libraries not loaded yet.
void add_dir(const std::string& dir);

struct Opened {
  void* handle = nullptr;
  std::string path;   // what was opened
  std::string tried;  // each candidate and why it failed, one per line (when handle is null)
};

// Opens `soname`: the path in environment variable `env_override` if set, then `soname` itself
// (already loaded by torch / JAX, or on the loader's path), then each registered directory, then
// $CUDA_HOME/lib64 and /usr/local/cuda/lib64. RTLD_NOW | RTLD_GLOBAL.
Opened open(const std::string& soname, const char* env_override);

// A run-time library's state: its API table (function pointers) and where it came from, or why it
// is not there.
template <class Api>
struct Loaded {
  Api api{};
  bool ok = false;
  void* handle = nullptr;
  std::string path, error;
};

// Opens `soname` (see open) and fills its API with `bind_all(lib, api, missing)` (a bind per symbol).
// On failure `error` names `what`, each candidate tried, and `fix` (how to install it).
template <class Api, class BindAll>
Loaded<Api> load(const std::string& soname, const char* env_override, const std::string& what, const std::string& fix,
                 BindAll bind_all) {
  Loaded<Api> L;
  Opened o = open(soname, env_override);
  if (!o.handle) {
    L.error = what + " (" + soname + ") could not be loaded; tried:" + o.tried + "\n" + fix;
    return L;
  }
  L.handle = o.handle;
  L.path = o.path;
  std::string missing;
  bind_all(o.handle, L.api, missing);
  if (!missing.empty()) {
    L.error = L.path + " lacks " + missing;
    return L;
  }
  L.ok = true;
  return L;
}

// One T per device (a library handle and what guards it), made by `make(device, t)` on first use and
// kept until exit: destroying at static teardown races the driver. Thread-safe lookup; the T itself
// is the caller's to guard.
template <class T>
class PerDevice {
 public:
  template <class Make>
  T& get(int device, const char* what, Make&& make) {
    std::lock_guard<std::mutex> g(mu_);
    if (device < 0) throw InvalidArgument(std::string(what) + ": negative device");
    if (size_t(device) >= items_.size()) items_.resize(size_t(device) + 1);
    if (!items_[size_t(device)]) {
      auto t = std::make_unique<T>();
      make(device, *t);  // a throw leaves the slot empty for the next call
      items_[size_t(device)] = std::move(t);
    }
    return *items_[size_t(device)];
  }

 private:
  std::mutex mu_;
  std::vector<std::unique_ptr<T>> items_;
};

// Resolves `name` in `lib` into the function pointer `f`; a missing symbol is appended to `missing`.
template <class F>
bool bind(void* lib, const char* name, F& f, std::string& missing) {
  f = reinterpret_cast<F>(dlsym(lib, name));
  if (!f) missing += std::string(missing.empty() ? "" : ", ") + name;
  return f != nullptr;
}

}  // namespace baracuda::dynlib
