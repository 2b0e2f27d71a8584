// amax / amin (NaN propagates), exact in the input's own type (f32 for halves).
#include "reduction/tu_common.cuh"

namespace baracuda::reduction {
using namespace kernels;
using namespace kern;

void launch_extreme(const RedLaunch& L, void* stream) {
  auto st = static_cast<cudaStream_t>(stream);
  dispatch_dtype(L.in_dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (is_fp_v<T> || is_int_v<T>) {
      if (L.out_dtype == L.in_dtype) {
        if (L.kind == RedKind::Amax) return launch_reduction(ExtremeR<T, T, true>{}, L, st);
        return launch_reduction(ExtremeR<T, T, false>{}, L, st);
      }
    }
    no_kernel(L, "amax/amin");
  });
}

}  // namespace baracuda::reduction
