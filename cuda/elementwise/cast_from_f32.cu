// Casts from f32 to every dtype.
#include "elementwise/cast_impl.cuh"

namespace baracuda::kernels {
template void cast_launch<float>(const elementwise::EwLaunch&, void*);
}  // namespace baracuda::kernels
