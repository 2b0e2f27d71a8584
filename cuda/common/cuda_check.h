// Turning CUDA runtime status codes into typed errors that name the failing call.
#pragma once
#include <cuda_runtime.h>

#include <string>

#include "baracuda/errors.h"

namespace baracuda {

[[noreturn]] inline void throw_cuda_error(cudaError_t e, const char* call) {
  std::string msg = std::string(call) + " failed: " + cudaGetErrorName(e) + " (" +
                    cudaGetErrorString(e) + ")";
  if (e == cudaErrorMemoryAllocation) throw OutOfMemory(msg);
  throw CudaError(msg);
}
inline void cuda_check(cudaError_t e, const char* call) {
  if (e != cudaSuccess) {
    // A failed call (a launch refused, say) also leaves its status as the "last error": clear a
    // non-sticky one so the next launch's check_launch does not report it under another name.
    (void)cudaGetLastError();
    throw_cuda_error(e, call);
  }
}
// After a launch: surface launch-configuration errors with the kernel's name.
inline void check_launch(const char* kernel) {
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) throw_cuda_error(e, (std::string("launch of ") + kernel).c_str());
}

}  // namespace baracuda
