// norm2 (sqrt of the sum of squares) and logsumexp (running max and scaled sum).
#include "reduction/tu_common.cuh"

namespace baracuda::reduction {
using namespace kernels;
using namespace kern;

void launch_norm(const RedLaunch& L, void* stream) {
  auto st = static_cast<cudaStream_t>(stream);
  dispatch_dtype(L.in_dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (is_fp_v<T>) {
      if (L.out_dtype == L.in_dtype) {
        if (L.kind == RedKind::Norm2) return launch_reduction(Norm2R<T, T>{}, L, st);
        return launch_reduction(LogSumExpR<T, T>{}, L, st);
      }
    }
    no_kernel(L, "norm2/logsumexp");
  });
}

}  // namespace baracuda::reduction
