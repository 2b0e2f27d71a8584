// Device memory and stream helpers of the core, for callers that link no CUDA runtime.
#pragma once
#include <cstdint>
#include <string>

#include "baracuda/plan.h"

namespace baracuda {

void* device_malloc(int64_t bytes, int device);   // throws OutOfMemory / CudaError
void device_free(void* ptr) noexcept;
void synchronize_stream(StreamHandle stream);     // throws CudaError naming the call
// True while `stream` captures a CUDA graph (work enqueued now is recorded for replay), or when the
// query itself fails (the legacy stream during another stream's global capture): callers then
// take the path that is right under capture.
bool stream_is_capturing(StreamHandle stream) noexcept;
void copy_to_device(void* dst, const void* src, int64_t bytes);   // synchronous
void copy_to_host(void* dst, const void* src, int64_t bytes);     // synchronous
// A directory to look for the libraries loaded at run time (libcublasLt, libcudnn) in, after the
// loader's own path; the Python package registers the nvidia-* wheels'. Only affects libraries not
// loaded yet.
void add_library_dir(const std::string& dir);

}  // namespace baracuda
