// Small runtime helpers for plans: switch to the tensors' device for a launch.
#pragma once
#include <cuda_runtime.h>

#include "common/cuda_check.h"

namespace baracuda {

class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    cuda_check(cudaGetDevice(&prev_), "cudaGetDevice");
    if (prev_ != device) cuda_check(cudaSetDevice(device), "cudaSetDevice");
    switched_ = prev_ != device;
  }
  ~DeviceGuard() {
    if (switched_) cudaSetDevice(prev_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;
 private:
  int prev_ = 0;
  bool switched_ = false;
};

// Sets every byte of a dense view (its elements fill one byte range) to `byte`, on `stream`.
// Returns false, writing nothing, when the view is not dense.
inline bool fill_dense_bytes(void* data, int64_t numel, int64_t elem_bytes, int64_t span_bytes, int byte,
                             void* stream) {
  if (numel <= 0 || data == nullptr) return true;
  if (span_bytes != numel * elem_bytes) return false;
  cuda_check(cudaMemsetAsync(data, byte, size_t(span_bytes), static_cast<cudaStream_t>(stream)), "cudaMemsetAsync");
  return true;
}

}  // namespace baracuda
