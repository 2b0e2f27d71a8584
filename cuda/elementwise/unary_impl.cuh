// Definitions of the unary-shaped launchers; included by the per-dtype translation units.
#pragma once
#include "elementwise/launchers.h"
#include "elementwise/launch.cuh"
#include "elementwise/unary_ops.cuh"

namespace baracuda::elementwise::kern {

using namespace baracuda::kernels;  // the shared vocabulary (cuda/common)

template <class T> void unary_launch(const elementwise::EwLaunch& L, void* s) {
  const auto kind = static_cast<elementwise::UnaryKind>(L.kind);
  const compute_t<T> p0 = compute_t<T>(L.p[0]), p1 = compute_t<T>(L.p[1]);
  if constexpr (is_fp_v<T>) {
    const bool hot = dispatch_hot<elementwise::kHotUnary>(L.kind, [&](auto k) {
      launch_map<T, T>(UnaryFloatFn<T, decltype(k)::value>{kind, p0, p1}, L, s, "ew_unary_fixed");
    });
    if (!hot) launch_map<T, T>(UnaryFloatFn<T>{kind, p0, p1}, L, s, "ew_unary");
  } else {
    launch_map<T, T>(UnaryIntFn<T>{kind, float(L.p[0]), float(L.p[1])}, L, s, "ew_unary_int");
  }
}

template <class T> void unary_backward_launch(const elementwise::EwLaunch& L, void* s) {
  const auto kind = static_cast<elementwise::UnaryKind>(L.kind);
  const compute_t<T> p0 = compute_t<T>(L.p[0]), p1 = compute_t<T>(L.p[1]);
  const bool hot = dispatch_hot<elementwise::kHotUnaryBackward>(L.kind, [&](auto k) {
    launch_map<T, T, T>(UnaryBackwardFn<T, decltype(k)::value>{kind, p0, p1}, L, s, "ew_unary_backward_fixed");
  });
  if (!hot) launch_map<T, T, T>(UnaryBackwardFn<T>{kind, p0, p1}, L, s, "ew_unary_backward");
}

template <class T> void predicate_launch(const elementwise::EwLaunch& L, void* s) {
  launch_map<bool, T>(PredicateFn<T>{static_cast<elementwise::PredicateKind>(L.kind)}, L, s, "ew_predicate");
}

}  // namespace baracuda::elementwise::kern
