// cumsum of floats (f32 accumulation for f16 / bf16, f64 for f64) and cumsum's backward (the
// same scan, reversed).
#include "scan/tu_common.cuh"

namespace baracuda::scan {
using namespace kernels;
using namespace kern;

void launch_sum_float(const ScanLaunch& L, void* stream) {
  auto st = static_cast<cudaStream_t>(stream);
  dispatch_dtype(L.in_dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (is_fp_v<T>) {
      if (L.out_dtype == L.in_dtype) return launch_op<SumOp<T, T>, T, T>(L, st);
      if constexpr (is_half_v<T>)
        if (L.out_dtype == DType::Float32 && L.kind == ScanKind::Cumsum) return launch_op<SumOp<T, float>, T, float>(L, st);
    }
    no_kernel(L, "cumsum");
  });
}

}  // namespace baracuda::scan
