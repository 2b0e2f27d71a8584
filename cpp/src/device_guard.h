// Small runtime helpers for plans: switch to the tensors' device for a launch.
#pragma once
#include <cuda_runtime.h>

#include "baracuda/tensor.h"
#include "common/cuda_check.h"
#include "plan_util.h"

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
// Returns false, writing nothing, when the view is not dense; an absent or empty view is done.
inline bool fill_dense_bytes(const TensorView& v, int byte, void* stream) {
  if (v.data == nullptr || v.numel() <= 0) return true;
  const auto span = byte_range(v);
  const int64_t bytes = int64_t(span.second - span.first);
  if (bytes != v.numel() * int64_t(dtype_size(v.dtype))) return false;
  cuda_check(cudaMemsetAsync(reinterpret_cast<void*>(span.first), byte, size_t(bytes), static_cast<cudaStream_t>(stream)),
             "cudaMemsetAsync");
  return true;
}

}  // namespace baracuda
