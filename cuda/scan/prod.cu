// cumprod: floats (f32 products for f16 / bf16, f64 for f64); integers and bool into int64.
#include "scan/tu_common.cuh"

namespace baracuda::scan {
using namespace kernels;
using namespace kern;

void launch_prod(const ScanLaunch& L, void* stream) {
  auto st = static_cast<cudaStream_t>(stream);
  dispatch_dtype(L.in_dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (is_fp_v<T>) {
      if (L.out_dtype == L.in_dtype) return launch_op<ProdOp<T, T>, T, T>(L, st);
    } else if constexpr (is_intlike_v<T> && !std::is_same_v<T, uint32_t>) {
      if (L.out_dtype == DType::Int64) return launch_op<ProdOp<T, int64_t>, T, int64_t>(L, st);
    }
    no_kernel(L, "cumprod");
  });
}

}  // namespace baracuda::scan
