// Cast launcher: one instantiation per (input, output) dtype pair, split by input dtype
// across cast_*.cu so the 169 pairs compile in parallel.
#pragma once
#include "elementwise/launchers.h"
#include "elementwise/launch.cuh"
#include "elementwise/misc_ops.cuh"

namespace baracuda::elementwise::kern {

using namespace baracuda::kernels;  // the shared vocabulary (cuda/common)

template <class Tin> void cast_launch(const elementwise::EwLaunch& L, void* s) {
  const bool saturate = L.p[0] != 0.0;
  dispatch_dtype(L.out_dtype, [&](auto tag) {
    using Tout = typename decltype(tag)::type;
    launch_map<Tout, Tin>(CastFn<Tin, Tout>{saturate}, L, s, "ew_cast");
  });
}

}  // namespace baracuda::elementwise::kern
