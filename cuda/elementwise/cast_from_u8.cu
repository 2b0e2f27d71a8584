// Casts from u8 to every dtype.
#include "elementwise/cast_impl.cuh"

namespace baracuda::kernels {
template void cast_launch<uint8_t>(const elementwise::EwLaunch&, void*);
}  // namespace baracuda::kernels
