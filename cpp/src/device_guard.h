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

}  // namespace baracuda
