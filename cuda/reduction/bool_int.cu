// any / all (bool out) and count_nonzero (int64 out) of int inputs. NaN counts as nonzero.
#include "reduction/tu_common.cuh"

namespace baracuda::reduction {
using namespace kernels;
using namespace kern;

void launch_bool_int(const RedLaunch& L, void* stream) {
  auto st = static_cast<cudaStream_t>(stream);
  dispatch_dtype(L.in_dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (is_intlike_v<T>) {
      if (L.kind == RedKind::Any && L.out_dtype == DType::Bool) return launch_reduction(BoolR<T, bool, 0>{}, L, st);
      if (L.kind == RedKind::All && L.out_dtype == DType::Bool) return launch_reduction(BoolR<T, bool, 1>{}, L, st);
      if (L.kind == RedKind::CountNonzero && L.out_dtype == DType::Int64)
        return launch_reduction(BoolR<T, int64_t, 2>{}, L, st);
    }
    no_kernel(L, "any/all/count_nonzero");
  });
}

}  // namespace baracuda::reduction
