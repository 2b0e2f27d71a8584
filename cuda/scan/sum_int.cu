// cumsum of integers and bool: exact int64 accumulation into int64 (two's-complement wrap).
#include "scan/tu_common.cuh"

namespace baracuda::scan {
using namespace kernels;
using namespace kern;

void launch_sum_int(const ScanLaunch& L, void* stream) {
  auto st = static_cast<cudaStream_t>(stream);
  dispatch_dtype(L.in_dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (is_intlike_v<T> && !std::is_same_v<T, uint32_t>) {
      if (L.out_dtype == DType::Int64) return launch_op<SumOp<T, int64_t>, T, int64_t>(L, st);
    }
    no_kernel(L, "cumsum");
  });
}

}  // namespace baracuda::scan
