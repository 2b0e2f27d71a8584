// logcumsumexp: floats, f32 math for f16 / bf16, f64 for f64.
#include "scan/tu_common.cuh"

namespace baracuda::scan {
using namespace kernels;
using namespace kern;

void launch_lcse(const ScanLaunch& L, void* stream) {
  auto st = static_cast<cudaStream_t>(stream);
  dispatch_dtype(L.in_dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (is_fp_v<T>) {
      if (L.out_dtype == L.in_dtype) return launch_op<LcseOp<T>, T, T>(L, st);
    }
    no_kernel(L, "logcumsumexp");
  });
}

}  // namespace baracuda::scan
