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

// The input dtypes of one translation unit (an op group's kernels split by input kind so that they
// compile in parallel).
struct FloatInputs {
  template <class T> static constexpr bool admits = is_fp_v<T>;
};
struct IntLikeInputs {  // integers and bool
  template <class T> static constexpr bool admits = is_intlike_v<T>;
};
// argmax / argmin in four units, so that none is among the build's longest (docs/benchmarks.md,
// build times).
struct HalfInputs {  // f16, bf16
  template <class T> static constexpr bool admits = kernels::is_half_v<T>;
};
struct WideFloatInputs {  // f32, f64
  template <class T> static constexpr bool admits = std::is_same_v<T, float> || std::is_same_v<T, double>;
};
struct NarrowIntInputs {  // int8, uint8, int16
  template <class T> static constexpr bool admits = kernels::is_int_v<T> && sizeof(T) <= 2;
};
struct WideIntInputs {  // int32, int64, uint32
  template <class T> static constexpr bool admits = kernels::is_int_v<T> && sizeof(T) >= 4;
};

// argmax / argmin over the inputs `In` admits: (value, index) pairs, int64 or int32 out.
template <class In> void launch_arg_group(const RedLaunch& L, void* stream) {
  auto st = static_cast<cudaStream_t>(stream);
  kernels::dispatch_dtype(L.in_dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (In::template admits<T>) {
      const bool out32 = L.out_dtype == DType::Int32;
      if (out32 || L.out_dtype == DType::Int64)
        return L.kind == RedKind::Argmax ? kern::launch_reduction(kern::ArgR<T, true>{out32}, L, st)
                                         : kern::launch_reduction(kern::ArgR<T, false>{out32}, L, st);
    }
    no_kernel(L, "argmax/argmin");
  });
}

// any / all / count_nonzero see only whether an element is zero, so integers and bool of one width
// share a kernel (bool and uint8 run int8's, uint32 int32's): the same bytes, the same answers.
template <class T>
using bool_group_input_t = std::conditional_t<std::is_integral_v<T>, std::make_signed_t<kernels::bits_t<T>>, T>;

// any / all (bool out) and count_nonzero (int64 out) over the inputs `In` admits.
template <class In> void launch_bool_group(const RedLaunch& L, void* stream) {
  auto st = static_cast<cudaStream_t>(stream);
  kernels::dispatch_dtype(L.in_dtype, [&](auto tag) {
    using Src = typename decltype(tag)::type;
    using T = bool_group_input_t<Src>;  // the kernel's element type
    if constexpr (In::template admits<Src>) {
      if (L.kind == RedKind::Any && L.out_dtype == DType::Bool)
        return kern::launch_reduction(kern::BoolR<T, bool, 0>{}, L, st);
      if (L.kind == RedKind::All && L.out_dtype == DType::Bool)
        return kern::launch_reduction(kern::BoolR<T, bool, 1>{}, L, st);
      if (L.kind == RedKind::CountNonzero && L.out_dtype == DType::Int64)
        return kern::launch_reduction(kern::BoolR<T, int64_t, 2>{}, L, st);
    }
    no_kernel(L, "any/all/count_nonzero");
  });
}

}  // namespace baracuda::reduction
