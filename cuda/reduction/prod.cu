// Products: f32 accumulation for half inputs, f64 for f64, int64 (wrapping) for integers / bool.
#include "reduction/tu_common.cuh"

namespace baracuda::reduction {
using namespace kernels;
using namespace kern;

void launch_prod(const RedLaunch& L, void* stream) {
  auto st = static_cast<cudaStream_t>(stream);
  dispatch_dtype(L.in_dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (is_fp_v<T>) {
      if (L.out_dtype == L.in_dtype) return launch_reduction(ProdR<T, T>{}, L, st);
    } else if constexpr (is_intlike_v<T>) {
      ProdIntR<T> r;
      r.as_input = !std::is_same_v<T, bool> && L.out_dtype == L.in_dtype;
      if (L.out_dtype == DType::Int64 || r.as_input) return launch_reduction(r, L, st);
    }
    no_kernel(L, "prod");
  });
}

}  // namespace baracuda::reduction
