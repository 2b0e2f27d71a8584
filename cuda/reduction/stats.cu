// The statistics backward plans compute first (into the workspace): mean (var / std), the
// extreme and its tie count (amax / amin), the product of the nonzeros and the zero count (prod).
#include "reduction/tu_common.cuh"

namespace baracuda::reduction {
using namespace kernels;
using namespace kern;

void launch_stats(const RedLaunch& L, void* stream) {
  auto st = static_cast<cudaStream_t>(stream);
  dispatch_dtype(L.in_dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (is_fp_v<T>) {
      switch (L.kind) {
        case RedKind::MeanStat: return launch_reduction(MeanStatR<T>{}, L, st);
        case RedKind::MaxCountStat: return launch_reduction(ExtremeCountStatR<T, true>{}, L, st);
        case RedKind::MinCountStat: return launch_reduction(ExtremeCountStatR<T, false>{}, L, st);
        case RedKind::ProdZeroStat: return launch_reduction(ProdZeroStatR<T>{}, L, st);
        default: break;
      }
    }
    no_kernel(L, "backward statistics");
  });
}

}  // namespace baracuda::reduction
