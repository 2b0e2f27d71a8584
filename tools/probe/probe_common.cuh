// What the kernel probes' harnesses (tools/probe/*.cu, built and run by probe.sh) share: a checked
// CUDA call, the median time of a launch with L2 flushed before each, the device's copy bandwidth,
// and a checksum of bytes (variants that keep the math must write the same bits).
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define PROBE_CHECK(x)                                                                 \
  do {                                                                                 \
    cudaError_t e_ = (x);                                                              \
    if (e_ != cudaSuccess) {                                                           \
      std::fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_));                    \
      std::exit(1);                                                                    \
    }                                                                                  \
  } while (0)

namespace probe {

// Microseconds, the median of `samples` launches after 5 warm-ups, `flush` (bytes past L2)
// overwritten before each.
template <class F> double median_us(F&& launch, void* flush, size_t flush_bytes, int samples = 50) {
  cudaEvent_t a, b;
  PROBE_CHECK(cudaEventCreate(&a));
  PROBE_CHECK(cudaEventCreate(&b));
  std::vector<float> t;
  for (int i = 0; i < samples + 5; ++i) {
    PROBE_CHECK(cudaMemsetAsync(flush, i, flush_bytes));
    PROBE_CHECK(cudaEventRecord(a));
    launch();
    PROBE_CHECK(cudaEventRecord(b));
    PROBE_CHECK(cudaEventSynchronize(b));
    float ms = 0;
    PROBE_CHECK(cudaEventElapsedTime(&ms, a, b));
    if (i >= 5) t.push_back(ms * 1000.f);
  }
  PROBE_CHECK(cudaEventDestroy(a));
  PROBE_CHECK(cudaEventDestroy(b));
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// The device's copy bandwidth (GB/s, bytes read plus written) over a 1 GiB buffer.
inline double copy_gbs(void* flush, size_t flush_bytes) {
  const size_t n = size_t(1) << 30;
  void *src, *dst;
  PROBE_CHECK(cudaMalloc(&src, n));
  PROBE_CHECK(cudaMalloc(&dst, n));
  const double us =
      median_us([&] { PROBE_CHECK(cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToDevice)); }, flush, flush_bytes);
  PROBE_CHECK(cudaFree(src));
  PROBE_CHECK(cudaFree(dst));
  return 2.0 * n / us / 1e3;
}

// What every case needs: a buffer to flush L2 with and the device's copy bandwidth (printed).
struct Setup {
  void* flush = nullptr;
  size_t flush_bytes = size_t(256) << 20;  // past L2 (60 MB on an H200)
  double copy_gbs = 0;
};
inline Setup setup() {
  Setup s;
  PROBE_CHECK(cudaMalloc(&s.flush, s.flush_bytes));
  s.copy_gbs = copy_gbs(s.flush, s.flush_bytes);
  std::printf("device copy %.0f GB/s\n", s.copy_gbs);
  return s;
}

// FNV-1a over a device buffer's bytes, and its running form over host bytes.
inline uint64_t fnv(const void* host, size_t bytes, uint64_t x = 1469598103934665603ull) {
  const auto* p = static_cast<const uint8_t*>(host);
  for (size_t i = 0; i < bytes; ++i) x = (x ^ p[i]) * 1099511628211ull;
  return x;
}
// n elements of type T copied from the device.
template <class T> std::vector<T> to_host(const void* d, size_t n) {
  std::vector<T> h(n);
  PROBE_CHECK(cudaMemcpy(h.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost));
  return h;
}
inline uint64_t device_fnv(const void* d, size_t bytes) {
  const std::vector<uint8_t> h = to_host<uint8_t>(d, bytes);
  return fnv(h.data(), bytes);
}

}  // namespace probe
