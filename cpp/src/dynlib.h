// Libraries loaded at run time (cuBLASLt, cuDNN): one search order for all of them, so the
// core links none and `import baracuda` costs nothing until a plan needs one.
#pragma once
#include <dlfcn.h>

#include <string>
#include <vector>

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

// Resolves `name` in `lib` into the function pointer `f`; a missing symbol is appended to `missing`.
template <class F>
bool bind(void* lib, const char* name, F& f, std::string& missing) {
  f = reinterpret_cast<F>(dlsym(lib, name));
  if (!f) missing += std::string(missing.empty() ? "" : ", ") + name;
  return f != nullptr;
}

}  // namespace baracuda::dynlib
