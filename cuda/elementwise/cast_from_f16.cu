// Casts from f16 to every dtype.
#include "elementwise/cast_impl.cuh"

namespace baracuda::kernels {
template void cast_launch<f16>(const elementwise::EwLaunch&, void*);
}  // namespace baracuda::kernels
