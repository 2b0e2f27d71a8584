#include "baracuda/runtime.h"

#include "dynlib.h"

#include <cuda_runtime.h>

#include <algorithm>

#include "common/cuda_check.h"
#include "device_guard.h"

namespace baracuda {

void* device_malloc(int64_t bytes, int device) {
  DeviceGuard guard(device);
  void* p = nullptr;
  cuda_check(cudaMalloc(&p, size_t(std::max<int64_t>(bytes, 1))), "cudaMalloc");
  return p;
}

void device_free(void* ptr) noexcept { cudaFree(ptr); }

void synchronize_stream(StreamHandle stream) {
  cuda_check(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)), "cudaStreamSynchronize");
}

bool stream_is_capturing(StreamHandle stream) noexcept {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(static_cast<cudaStream_t>(stream), &status) != cudaSuccess) {
    cudaGetLastError();  // not sticky: clear it so a later check does not report it
    return true;
  }
  return status != cudaStreamCaptureStatusNone;
}

void copy_to_device(void* dst, const void* src, int64_t bytes) {
  cuda_check(cudaMemcpy(dst, src, size_t(bytes), cudaMemcpyHostToDevice), "cudaMemcpy (host to device)");
}

void copy_to_host(void* dst, const void* src, int64_t bytes) {
  cuda_check(cudaMemcpy(dst, src, size_t(bytes), cudaMemcpyDeviceToHost), "cudaMemcpy (device to host)");
}

void add_library_dir(const std::string& dir) { dynlib::add_dir(dir); }

}  // namespace baracuda
