#include "dynlib.h"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>

namespace baracuda::dynlib {

namespace {
std::mutex& mu() {
  static std::mutex m;
  return m;
}
std::vector<std::string>& dirs() {
  static std::vector<std::string> d;
  return d;
}
}  // namespace

void add_dir(const std::string& dir) {
  std::lock_guard<std::mutex> g(mu());
  for (const auto& d : dirs())
    if (d == dir) return;
  dirs().push_back(dir);
}

Opened open(const std::string& soname, const char* env_override) {
  std::vector<std::string> candidates;
  if (const char* env = env_override ? std::getenv(env_override) : nullptr) candidates.push_back(env);
  candidates.push_back(soname);
  {
    std::lock_guard<std::mutex> g(mu());
    for (const auto& d : dirs()) candidates.push_back(d + "/" + soname);
  }
  if (const char* home = std::getenv("CUDA_HOME")) candidates.push_back(std::string(home) + "/lib64/" + soname);
  candidates.push_back("/usr/local/cuda/lib64/" + soname);
  Opened o;
  for (const auto& c : candidates) {
    o.handle = dlopen(c.c_str(), RTLD_NOW | RTLD_GLOBAL);
    if (o.handle) {
      o.path = c;
      return o;
    }
    const char* err = dlerror();
    o.tried += "\n  " + c + ": " + (err ? err : "not found");
  }
  return o;
}

}  // namespace baracuda::dynlib
