// Definitions of the binary-shaped launchers; included by the per-dtype translation units.
#pragma once
#include "elementwise/binary_ops.cuh"
#include "elementwise/launchers.h"
#include "elementwise/launch.cuh"
#include "elementwise/map_reduce.cuh"

namespace baracuda::elementwise::kern {

using namespace baracuda::kernels;  // the shared vocabulary (cuda/common)

template <class T> void binary_launch(const elementwise::EwLaunch& L, void* s) {
  const auto kind = static_cast<elementwise::BinaryKind>(L.kind);
  if constexpr (is_fp_v<T>) {
    const bool hot = dispatch_hot<elementwise::kHotBinary>(L.kind, [&](auto k) {
      launch_map<T, T, T>(BinaryFloatFn<T, decltype(k)::value>{kind, compute_t<T>(L.p[0])}, L, s, "ew_binary_fixed");
    });
    if (!hot) launch_map<T, T, T>(BinaryFloatFn<T>{kind, compute_t<T>(L.p[0])}, L, s, "ew_binary");
  } else launch_map<T, T, T>(BinaryIntFn<T>{kind, L.p[0]}, L, s, "ew_binary_int");
}

template <class T> void compare_launch(const elementwise::EwLaunch& L, void* s) {
  launch_map<bool, T, T>(CompareFn<T>{static_cast<elementwise::CompareKind>(L.kind)}, L, s, "ew_compare");
}

template <class T> void binary_backward_launch(const elementwise::EwLaunch& L, void* s) {
  const auto kind = static_cast<elementwise::BinaryKind>(L.kind);
  using A = acc_t<T>;
  // Straight into the gradient, or summed (in f32 / f64) over the broadcast dimensions.
  if (L.map_reduce)
    launch_map_reduce<A, T, T, T, T>(BinaryBackwardFn<T, A>{kind, compute_t<T>(L.p[0]), L.wrt}, L, s);
  else
    launch_map<T, T, T, T>(BinaryBackwardFn<T, T>{kind, compute_t<T>(L.p[0]), L.wrt}, L, s, "ew_binary_backward");
}

}  // namespace baracuda::elementwise::kern
