// Runtime dtype -> the launcher instantiated for it.
#include "common/dtype_traits.cuh"
#include "norm/kernels.h"

namespace baracuda::norm {

namespace {
// The dtypes with norm kernels (f32, f64, f16, bf16).
template <class T> constexpr bool kHasNormKernel = std::is_same_v<T, float> || std::is_same_v<T, double> ||
                                                   std::is_same_v<T, kernels::f16> || std::is_same_v<T, kernels::bf16>;
}  // namespace

void launch(const NormLaunch& L, void* stream) {
  kernels::dispatch_dtype(L.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (kHasNormKernel<T>) {
      if (L.backward) launch_backward<T>(L, stream);
      else launch_forward<T>(L, stream);
    } else {
      throw Unsupported(std::string("norm: no kernel for ") + dtype_name(L.dtype));
    }
  });
}

int bwd_cluster_resident(DType t, const Config& c) {
  int n = 0;
  kernels::dispatch_dtype(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (kHasNormKernel<T>) n = kern::bwd_cluster_resident<T>(c);
  });
  return n;
}

}  // namespace baracuda::norm
