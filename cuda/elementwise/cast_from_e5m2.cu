// Casts from e5m2 to every dtype.
#include "elementwise/cast_impl.cuh"

namespace baracuda::kernels {
template void cast_launch<e5m2>(const elementwise::EwLaunch&, void*);
}  // namespace baracuda::kernels
