// Sum and mean of floating inputs: f32 accumulation for f16 / bf16 / f32, f64 for f64.
#include "reduction/tu_common.cuh"

namespace baracuda::reduction {
using namespace kernels;
using namespace kern;

void launch_sum_float(const RedLaunch& L, void* stream) {
  auto st = static_cast<cudaStream_t>(stream);
  dispatch_dtype(L.in_dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (is_half_v<T>) {  // out: the input's type or f32, one kernel set
      SumHalfR<T> r;
      r.mean = L.kind == RedKind::Mean;
      r.out_f32 = L.out_dtype == DType::Float32;
      if (r.out_f32 || L.out_dtype == L.in_dtype) return launch_reduction(r, L, st);
    } else if constexpr (is_fp_v<T>) {
      SumR<T, T> r;
      r.mean = L.kind == RedKind::Mean;
      if (L.out_dtype == L.in_dtype) return launch_reduction(r, L, st);
    }
    no_kernel(L, "sum");
  });
}

}  // namespace baracuda::reduction
