// Dynamic shared memory past the default 48 KiB per block: one mechanism for every launch site.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <functional>
#include <mutex>
#include <unordered_map>

#include "common/cuda_check.h"

namespace baracuda {

// A launch whose dynamic shared memory plus the kernel's static arrays passes 48 KiB needs the kernel's
// attribute raised first, per device. One entry per kernel and device keeps the dynamic bytes allowed
// so far (at first 48 KiB less the static size, read once), so the driver is called only for more.
inline void opt_in_dynamic_smem(const void* kernel, size_t bytes, const char* what) {
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
template <class F> void opt_in_dynamic_smem(F* kernel, size_t bytes, const char* what) {
  opt_in_dynamic_smem(reinterpret_cast<const void*>(kernel), bytes, what);
}

}  // namespace baracuda
