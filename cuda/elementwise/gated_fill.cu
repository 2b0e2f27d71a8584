// Gated activations (swiglu, geglu, reglu, glu) with their backward, and fill.
#include "elementwise/launchers.h"
#include "elementwise/launch.cuh"
#include "elementwise/misc_ops.cuh"

namespace baracuda::elementwise::kern {

using namespace baracuda::kernels;  // the shared vocabulary (cuda/common)

template <class T> void gated_launch(const elementwise::EwLaunch& L, void* s) {
  // in[0] and in[1] are the two halves of one tensor (views set up by the plan).
  launch_map<T, T, T>(GatedFn<T>{static_cast<elementwise::GatedKind>(L.kind)}, L, s, "ew_gated");
}
template <class T> void gated_backward_launch(const elementwise::EwLaunch& L, void* s) {
  launch_map<T, T, T, T>(GatedBackwardFn<T>{static_cast<elementwise::GatedKind>(L.kind), L.wrt}, L, s, "ew_gated_backward");
}

template <class T> struct FillValueFn {
  double value;
  template <int N> __device__ __forceinline__ void map(T (&y)[N]) const {
    const T v = convert<double, T>(value, true);
#pragma unroll
    for (int i = 0; i < N; ++i) y[i] = v;
  }
};
template <class T> void fill_launch(const elementwise::EwLaunch& L, void* s) {
  launch_map<T>(FillValueFn<T>{L.p[0]}, L, s, "ew_fill");
}

template void gated_launch<f16>(const elementwise::EwLaunch&, void*);
template void gated_launch<bf16>(const elementwise::EwLaunch&, void*);
template void gated_launch<float>(const elementwise::EwLaunch&, void*);
template void gated_launch<double>(const elementwise::EwLaunch&, void*);
template void gated_backward_launch<f16>(const elementwise::EwLaunch&, void*);
template void gated_backward_launch<bf16>(const elementwise::EwLaunch&, void*);
template void gated_backward_launch<float>(const elementwise::EwLaunch&, void*);
template void gated_backward_launch<double>(const elementwise::EwLaunch&, void*);
template void fill_launch<bool>(const elementwise::EwLaunch&, void*);
template void fill_launch<int8_t>(const elementwise::EwLaunch&, void*);
template void fill_launch<uint8_t>(const elementwise::EwLaunch&, void*);
template void fill_launch<int16_t>(const elementwise::EwLaunch&, void*);
template void fill_launch<int32_t>(const elementwise::EwLaunch&, void*);
template void fill_launch<int64_t>(const elementwise::EwLaunch&, void*);
template void fill_launch<uint32_t>(const elementwise::EwLaunch&, void*);
template void fill_launch<f16>(const elementwise::EwLaunch&, void*);
template void fill_launch<bf16>(const elementwise::EwLaunch&, void*);
template void fill_launch<float>(const elementwise::EwLaunch&, void*);
template void fill_launch<double>(const elementwise::EwLaunch&, void*);
template void fill_launch<e4m3>(const elementwise::EwLaunch&, void*);
template void fill_launch<e5m2>(const elementwise::EwLaunch&, void*);

}  // namespace baracuda::elementwise::kern
