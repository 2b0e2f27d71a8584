// The reverse scans of cumprod's and logcumsumexp's backward: floats.
#include "scan/tu_common.cuh"

namespace baracuda::scan {
using namespace kernels;
using namespace kern;

void launch_bwd(const ScanLaunch& L, void* stream) {
  auto st = static_cast<cudaStream_t>(stream);
  const bool prod = L.kind == ScanKind::CumprodBackward;
  dispatch_dtype(L.in_dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (is_fp_v<T>) {
      if (L.out_dtype == L.in_dtype)
        return prod ? launch_op<CumprodBwdOp<T>, T, T>(L, st) : launch_op<LcseBwdOp<T>, T, T>(L, st);
    }
    no_kernel(L, prod ? "cumprod_backward" : "logcumsumexp_backward");
  });
}

}  // namespace baracuda::scan
