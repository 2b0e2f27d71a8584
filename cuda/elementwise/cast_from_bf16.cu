// Casts from bf16 to every dtype.
#include "elementwise/cast_impl.cuh"

namespace baracuda::kernels {
template void cast_launch<bf16>(const elementwise::EwLaunch&, void*);
}  // namespace baracuda::kernels
