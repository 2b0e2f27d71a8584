// Sum of integer and bool inputs, accumulated in int64 (out int64, or the input dtype for
// sum_to_shape, wrapping as two's complement).
#include "reduction/tu_common.cuh"

namespace baracuda::reduction {
using namespace kernels;
using namespace kern;

void launch_sum_int(const RedLaunch& L, void* stream) {
  auto st = static_cast<cudaStream_t>(stream);
  dispatch_dtype(L.in_dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (is_intlike_v<T>) {
      if (L.out_dtype == DType::Int64) return launch_reduction(SumR<T, int64_t>{}, L, st);
      if constexpr (!std::is_same_v<T, bool>)
        if (L.out_dtype == L.in_dtype) return launch_reduction(SumR<T, T>{}, L, st);
    }
    no_kernel(L, "sum");
  });
}

}  // namespace baracuda::reduction
