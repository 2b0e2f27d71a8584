// Runtime dtype -> the launcher instantiated for it.
#include "common/dtype_traits.cuh"
#include "norm/launchers.h"

namespace baracuda::norm {

namespace {
// The dtypes with norm kernels (f32, f64, f16, bf16).
template <class T> constexpr bool kHasNormKernel = std::is_same_v<T, float> || std::is_same_v<T, double> ||
                                                   std::is_same_v<T, kernels::f16> || std::is_same_v<T, kernels::bf16>;
}  // namespace

void launch(const NormLaunch& L, void* stream) {
  kernels::dispatch_dtype(L.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (kHasNormKernel<T>) {
      if (L.backward) launch_backward<T>(L, stream);
      else launch_forward<T>(L, stream);
    } else {
      throw Unsupported(std::string("norm: no kernel for ") + dtype_name(L.dtype));
    }
  });
}

int bwd_cluster_resident(DType t, const Config& c) {
  int n = 0;
  kernels::dispatch_dtype(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (kHasNormKernel<T>) n = kern::bwd_cluster_resident<T>(c);
  });
  return n;
}

double device_bytes_per_sm_cycle() {
  int dev = 0, mem_khz = 0, bus_bits = 0, sms = 0, sm_khz = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&mem_khz, cudaDevAttrMemoryClockRate, dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&sm_khz, cudaDevAttrClockRate, dev) != cudaSuccess) {
    (void)cudaGetLastError();  // no device here (a host-only plan): not an error of this call
    return 0;
  }
  if (sms <= 0 || sm_khz <= 0) return 0;
  return 2.0 * double(mem_khz) * (double(bus_bits) / 8) / (double(sms) * double(sm_khz));  // (double data rate)
}

}  // namespace baracuda::norm
