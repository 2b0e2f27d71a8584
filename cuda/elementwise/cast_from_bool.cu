// Casts from bool to every dtype.
#include "elementwise/cast_impl.cuh"

namespace baracuda::kernels {
template void cast_launch<bool>(const elementwise::EwLaunch&, void*);
}  // namespace baracuda::kernels
