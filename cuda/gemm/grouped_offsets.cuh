// The group boundary the grouped (mixture-of-experts) kernels read: offsets[i] (int32 or int64, on
// the device) clamped to [0, T], so that no offsets array can send them outside x / out (gemm_launch.h).
#pragma once
#include <cstdint>

namespace baracuda::gemm {

__device__ __forceinline__ int64_t clamped_group_offset(const void* offsets, bool int64, int64_t i, int64_t T) {
  const int64_t v = int64 ? static_cast<const int64_t*>(offsets)[i] : int64_t(static_cast<const int32_t*>(offsets)[i]);
  return v < 0 ? 0 : (v > T ? T : v);
}

}  // namespace baracuda::gemm
