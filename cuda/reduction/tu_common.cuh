// Shared by the per-op-group translation units: dtype dispatch with a typed refusal.
#pragma once
#include <string>

#include "reduction/kernels.cuh"
#include "reduction/launchers.h"

namespace baracuda::reduction {

[[noreturn]] inline void no_kernel(const RedLaunch& L, const char* group) {
  throw Unsupported(std::string("reduction (") + group + "): no kernel for input " + dtype_name(L.in_dtype) +
                    " and output " + dtype_name(L.out_dtype));
}

template <class T> constexpr bool is_fp_v = std::is_same_v<T, float> || std::is_same_v<T, double> ||
                                            kernels::is_half_v<T>;
template <class T> constexpr bool is_intlike_v = kernels::is_int_v<T> || std::is_same_v<T, bool>;

}  // namespace baracuda::reduction
