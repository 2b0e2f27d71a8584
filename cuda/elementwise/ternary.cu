// Ternary kernels (where for every real dtype; clamp/lerp/addcmul/addcdiv/fma) and their
// derivatives for the float dtypes.
#include "elementwise/launchers.h"
#include "elementwise/launch.cuh"
#include "elementwise/map_reduce.cuh"
#include "elementwise/ternary_ops.cuh"

namespace baracuda::elementwise::kern {

using namespace baracuda::kernels;  // the shared vocabulary (cuda/common)

template <class T> void ternary_launch(const elementwise::EwLaunch& L, void* s) {
  const auto kind = static_cast<elementwise::TernaryKind>(L.kind);
  using B = bits_t<T>;  // where selects bits: one kernel set per width serves every dtype of it
  if (kind == elementwise::TernaryKind::Where) launch_map<B, bool, B, B>(WhereFn<B>{}, L, s, "ew_where");
  else launch_map<T, T, T, T>(TernaryFn<T>{kind, compute_t<T>(L.p[0])}, L, s, "ew_ternary");
}

template <class T> void ternary_backward_launch(const elementwise::EwLaunch& L, void* s) {
  const auto kind = static_cast<elementwise::TernaryKind>(L.kind);
  using A = acc_t<T>;
  const compute_t<T> value = compute_t<T>(L.p[0]);
  if (kind == elementwise::TernaryKind::Where) {  // inputs: (gy, cond)
    if (L.map_reduce) launch_map_reduce<A, T, T, bool>(WhereBackwardFn<T, A>{L.wrt}, L, s);
    else launch_map<T, T, bool>(WhereBackwardFn<T, T>{L.wrt}, L, s, "ew_where_backward");
  } else {
    if (L.map_reduce) launch_map_reduce<A, T, T, T, T, T>(TernaryBackwardFn<T, A>{kind, value, L.wrt}, L, s);
    else launch_map<T, T, T, T, T>(TernaryBackwardFn<T, T>{kind, value, L.wrt}, L, s, "ew_ternary_backward");
  }
}

template void ternary_launch<bool>(const elementwise::EwLaunch&, void*);
template void ternary_launch<int8_t>(const elementwise::EwLaunch&, void*);
template void ternary_launch<uint8_t>(const elementwise::EwLaunch&, void*);
template void ternary_launch<int16_t>(const elementwise::EwLaunch&, void*);
template void ternary_launch<int32_t>(const elementwise::EwLaunch&, void*);
template void ternary_launch<int64_t>(const elementwise::EwLaunch&, void*);
template void ternary_launch<uint32_t>(const elementwise::EwLaunch&, void*);
template void ternary_launch<f16>(const elementwise::EwLaunch&, void*);
template void ternary_launch<bf16>(const elementwise::EwLaunch&, void*);
template void ternary_launch<float>(const elementwise::EwLaunch&, void*);
template void ternary_launch<double>(const elementwise::EwLaunch&, void*);
template void ternary_backward_launch<f16>(const elementwise::EwLaunch&, void*);
template void ternary_backward_launch<bf16>(const elementwise::EwLaunch&, void*);
template void ternary_backward_launch<float>(const elementwise::EwLaunch&, void*);
template void ternary_backward_launch<double>(const elementwise::EwLaunch&, void*);

}  // namespace baracuda::elementwise::kern
