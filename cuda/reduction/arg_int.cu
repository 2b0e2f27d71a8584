// argmax / argmin of int inputs: (value, index) pairs; NaN is the extreme; ties take the
// first index. Output int64 or int32.
#include "reduction/tu_common.cuh"

namespace baracuda::reduction {
using namespace kernels;
using namespace kern;

template <class T, class O> static void go(const RedLaunch& L, cudaStream_t st) {
  if (L.kind == RedKind::Argmax) return launch_reduction(ArgR<T, O, true>{}, L, st);
  return launch_reduction(ArgR<T, O, false>{}, L, st);
}

void launch_arg_int(const RedLaunch& L, void* stream) {
  auto st = static_cast<cudaStream_t>(stream);
  dispatch_dtype(L.in_dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (is_int_v<T>) {
      if (L.out_dtype == DType::Int64) return go<T, int64_t>(L, st);
      if (L.out_dtype == DType::Int32) return go<T, int32_t>(L, st);
    }
    no_kernel(L, "argmax/argmin");
  });
}

}  // namespace baracuda::reduction
