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
      SumIntR<T> r;
      r.as_input = !std::is_same_v<T, bool> && L.out_dtype == L.in_dtype;
      if (L.out_dtype == DType::Int64 || r.as_input) return launch_reduction(r, L, st);
    }
    no_kernel(L, "sum");
  });
}

}  // namespace baracuda::reduction
