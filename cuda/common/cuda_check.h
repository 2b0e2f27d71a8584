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

// Dynamic shared memory past the default 48 KiB per block (static arrays included) needs the
// kernel's attribute raised first. Asked for from 40 KiB on: the kernels' own static arrays (a few
// KiB at most) count towards the 48.
template <class F> inline void allow_dynamic_smem(F* kernel, size_t bytes, const char* what) {
  if (bytes > 40 * 1024)
    cuda_check(cudaFuncSetAttribute(reinterpret_cast<const void*>(kernel), cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    int(bytes)),
               what);
}

}  // namespace baracuda
