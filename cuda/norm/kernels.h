// Declarations of the per-dtype norm launchers, explicitly instantiated in norm_<dtype>.cu and
// dispatched by runtime dtype in dispatch.cu. No CUDA types.
#pragma once
#include "norm/norm_launch.h"

namespace baracuda::norm {
template <class T> void launch_forward(const NormLaunch& L, void* stream);
template <class T> void launch_backward(const NormLaunch& L, void* stream);
}  // namespace baracuda::norm
