// Casts from u32 to every dtype.
#include "elementwise/cast_impl.cuh"

namespace baracuda::kernels {
template void cast_launch<uint32_t>(const elementwise::EwLaunch&, void*);
}  // namespace baracuda::kernels
