// Casts from i16 to every dtype.
#include "elementwise/cast_impl.cuh"

namespace baracuda::kernels {
template void cast_launch<int16_t>(const elementwise::EwLaunch&, void*);
}  // namespace baracuda::kernels
