// Ternary kernels (where for every real dtype; clamp/lerp/addcmul/addcdiv/fma) and their
// derivatives for the float dtypes.
#include "elementwise/kernels.h"
#include "elementwise/launch.cuh"
#include "elementwise/ternary_ops.cuh"

namespace baracuda::kernels {

template <class T> void ternary_launch(const ew::EwLaunch& L, void* s) {
  const auto kind = static_cast<ew::TernaryKind>(L.kind);
  if (kind == ew::TernaryKind::Where) launch_map<T, bool, T, T>(WhereFn<T>{}, L, s, "ew_where");
  else launch_map<T, T, T, T>(TernaryFn<T>{kind, float(L.p[0])}, L, s, "ew_ternary");
}

template <class T, class Tout> void ternary_backward_as(const ew::EwLaunch& L, void* s) {
  const auto kind = static_cast<ew::TernaryKind>(L.kind);
  if (kind == ew::TernaryKind::Where)  // inputs: (gy, cond)
    launch_map<Tout, T, bool>(WhereBackwardFn<T, Tout>{L.wrt}, L, s, "ew_where_backward");
  else
    launch_map<Tout, T, T, T, T>(TernaryBackwardFn<T, Tout>{kind, float(L.p[0]), L.wrt}, L, s, "ew_ternary_backward");
}

template <class T> void ternary_backward_launch(const ew::EwLaunch& L, void* s) {
  if (L.out_dtype == L.in_dtype[0]) ternary_backward_as<T, T>(L, s);
  else if constexpr (!std::is_same_v<T, acc_t<T>>) ternary_backward_as<T, acc_t<T>>(L, s);
}

template void ternary_launch<bool>(const ew::EwLaunch&, void*);
template void ternary_launch<int8_t>(const ew::EwLaunch&, void*);
template void ternary_launch<uint8_t>(const ew::EwLaunch&, void*);
template void ternary_launch<int16_t>(const ew::EwLaunch&, void*);
template void ternary_launch<int32_t>(const ew::EwLaunch&, void*);
template void ternary_launch<int64_t>(const ew::EwLaunch&, void*);
template void ternary_launch<uint32_t>(const ew::EwLaunch&, void*);
template void ternary_launch<f16>(const ew::EwLaunch&, void*);
template void ternary_launch<bf16>(const ew::EwLaunch&, void*);
template void ternary_launch<float>(const ew::EwLaunch&, void*);
template void ternary_launch<double>(const ew::EwLaunch&, void*);
template void ternary_backward_launch<f16>(const ew::EwLaunch&, void*);
template void ternary_backward_launch<bf16>(const ew::EwLaunch&, void*);
template void ternary_backward_launch<float>(const ew::EwLaunch&, void*);
template void ternary_backward_launch<double>(const ew::EwLaunch&, void*);

}  // namespace baracuda::kernels
