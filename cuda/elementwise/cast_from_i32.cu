// Casts from i32 to every dtype.
#include "elementwise/cast_impl.cuh"

namespace baracuda::kernels {
template void cast_launch<int32_t>(const elementwise::EwLaunch&, void*);
}  // namespace baracuda::kernels
