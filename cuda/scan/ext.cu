// cummax / cummin: values (exact) and int64 indices, torch's tie and NaN rules.
#include "scan/tu_common.cuh"

namespace baracuda::scan {
using namespace kernels;
using namespace kern;

void launch_ext(const ScanLaunch& L, void* stream) {
  auto st = static_cast<cudaStream_t>(stream);
  const bool mx = L.kind == ScanKind::Cummax;
  dispatch_dtype(L.in_dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (is_fp_v<T> || (is_int_v<T> && !std::is_same_v<T, uint32_t>)) {
      if (L.out_dtype == L.in_dtype)
        return mx ? launch_op<ExtOp<T, true>, T, T>(L, st) : launch_op<ExtOp<T, false>, T, T>(L, st);
    }
    no_kernel(L, mx ? "cummax" : "cummin");
  });
}

}  // namespace baracuda::scan
