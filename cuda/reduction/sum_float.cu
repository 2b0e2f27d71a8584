// Sum and mean of floating inputs: f32 accumulation for f16 / bf16 / f32, f64 for f64.
#include "reduction/tu_common.cuh"

namespace baracuda::reduction {
using namespace kernels;
using namespace kern;

template <class T, class O> static void go(const RedLaunch& L, cudaStream_t st) {
  SumR<T, O> r;
  r.mean = L.kind == RedKind::Mean;
  launch_reduction(r, L, st);
}

void launch_sum_float(const RedLaunch& L, void* stream) {
  auto st = static_cast<cudaStream_t>(stream);
  dispatch_dtype(L.in_dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (is_fp_v<T>) {
      if (L.out_dtype == L.in_dtype) return go<T, T>(L, st);
      if constexpr (is_half_v<T>)
        if (L.out_dtype == DType::Float32) return go<T, float>(L, st);
    }
    no_kernel(L, "sum");
  });
}

}  // namespace baracuda::reduction
