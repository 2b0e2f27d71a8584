// CUB's radix sort of (key, value) pairs, in its own translation unit: it is the slowest template
// to compile, and one instantiation serves every family.
#include "common/radix_sort.h"

#include <cub/device/device_radix_sort.cuh>

#include <string>

#include "common/cuda_check.h"

namespace baracuda::radix_sort {

int bits_for(int64_t max_key) {
  int b = 1;
  while (b < 32 && (int64_t(1) << b) <= max_key) ++b;
  return b;
}

int64_t scratch_bytes(int64_t n, int bits) {
  size_t bytes = 0;
  const cudaError_t e = cub::DeviceRadixSort::SortPairs(nullptr, bytes, static_cast<const uint32_t*>(nullptr),
                                                        static_cast<uint32_t*>(nullptr),
                                                        static_cast<const int32_t*>(nullptr),
                                                        static_cast<int32_t*>(nullptr), n, 0, bits);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return -1;
  }
  return int64_t(bytes);
}

int64_t scratch_bytes_or_estimate(int64_t n, int bits, bool& known) {
  const int64_t b = scratch_bytes(n, bits);
  known = b >= 0;
  // CUB's onesweep scratch is a few histograms and a tile status per pass: well under this.
  return known ? b : n * 8 + (int64_t(1) << 20);
}

void sort_pairs(const uint32_t* keys_in, uint32_t* keys_out, const int32_t* vals_in, int32_t* vals_out, int64_t n,
                int bits, void* scratch, int64_t scratch_size, cudaStream_t stream, const char* what) {
  size_t bytes = size_t(scratch_size);
  cuda_check(cub::DeviceRadixSort::SortPairs(scratch, bytes, keys_in, keys_out, vals_in, vals_out, n, 0, bits, stream),
             (std::string(what) + ": cub::DeviceRadixSort::SortPairs").c_str());
}

}  // namespace baracuda::radix_sort
