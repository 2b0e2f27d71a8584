// opt_in_dynamic_smem (cuda/common/smem_opt_in.h).
#include "common/smem_opt_in.h"

#include <cuda_runtime.h>

#include <functional>
#include <mutex>
#include <unordered_map>

#include "common/cuda_check.h"

namespace baracuda {

void opt_in_dynamic_smem(const void* kernel, size_t bytes, const char* what) {
  if (bytes == 0) return;
  int dev = 0;
  cuda_check(cudaGetDevice(&dev), "cudaGetDevice");
  struct Key {
    const void* kernel;
    int dev;
    bool operator==(const Key& o) const { return kernel == o.kernel && dev == o.dev; }
  };
  struct KeyHash {
    size_t operator()(const Key& k) const { return std::hash<const void*>()(k.kernel) ^ size_t(k.dev); }
  };
  static std::mutex mu;
  static std::unordered_map<Key, size_t, KeyHash> allowed;
  const std::lock_guard<std::mutex> lock(mu);
  auto it = allowed.find(Key{kernel, dev});
  if (it == allowed.end()) {
    cudaFuncAttributes attr{};
    cuda_check(cudaFuncGetAttributes(&attr, kernel), what);
    const size_t kDefault = 48 * 1024;
    it = allowed.emplace(Key{kernel, dev}, attr.sharedSizeBytes < kDefault ? kDefault - attr.sharedSizeBytes : 0)
             .first;
  }
  if (bytes <= it->second) return;
  cuda_check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)), what);
  it->second = bytes;
}

}  // namespace baracuda
