// Declarations of the per-dtype norm launchers, explicitly instantiated in norm_<dtype>.cu and
// dispatched by runtime dtype in dispatch.cu. No CUDA types.
#pragma once
#include "norm/norm_launch.h"

namespace baracuda::norm {
template <class T> void launch_forward(const NormLaunch& L, void* stream);
template <class T> void launch_backward(const NormLaunch& L, void* stream);
namespace kern {
template <class T> int bwd_cluster_resident(const Config& c);  // fwd_cluster.cuh
}
}  // namespace baracuda::norm
