// var / std: Welford per thread, Chan's merge across threads and splits.
#include "reduction/tu_common.cuh"

namespace baracuda::reduction {
using namespace kernels;
using namespace kern;

void launch_var(const RedLaunch& L, void* stream) {
  auto st = static_cast<cudaStream_t>(stream);
  dispatch_dtype(L.in_dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (is_fp_v<T>) {
      if (L.out_dtype == L.in_dtype) {
        VarR<T, T> r;
        r.correction = facc_t<T>(L.p0);
        r.take_sqrt = L.kind == RedKind::Std;
        return launch_reduction(r, L, st);
      }
    }
    no_kernel(L, "var/std");
  });
}

}  // namespace baracuda::reduction
