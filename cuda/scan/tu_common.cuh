// Shared by the per-op-group translation units: dtype dispatch with a typed refusal.
#pragma once
#include <string>

#include "scan/kernels.cuh"
#include "scan/launchers.h"

namespace baracuda::scan {

[[noreturn]] inline void no_kernel(const ScanLaunch& L, const char* group) {
  throw Unsupported(std::string("scan (") + group + "): no kernel for input " + dtype_name(L.in_dtype) +
                    " and output " + dtype_name(L.out_dtype));
}

template <class T> constexpr bool is_fp_v = std::is_same_v<T, float> || std::is_same_v<T, double> ||
                                            kernels::is_half_v<T>;
template <class T> constexpr bool is_intlike_v = kernels::is_int_v<T> || std::is_same_v<T, bool>;

// cummax (MAX) or cummin: values (exact) and int64 indices, torch's tie and NaN rules; one unit
// per direction (cummax.cu, cummin.cu) so the two compile in parallel.
template <bool MAX> void launch_ext(const ScanLaunch& L, void* stream) {
  auto st = static_cast<cudaStream_t>(stream);
  kernels::dispatch_dtype(L.in_dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (is_fp_v<T> || (kernels::is_int_v<T> && !std::is_same_v<T, uint32_t>)) {
      if (L.out_dtype == L.in_dtype) return kern::launch_op<kern::ExtOp<T, MAX>, T, T>(L, st);
    }
    no_kernel(L, MAX ? "cummax" : "cummin");
  });
}

}  // namespace baracuda::scan
