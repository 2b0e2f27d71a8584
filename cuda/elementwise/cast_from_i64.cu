// Casts from i64 to every dtype.
#include "elementwise/cast_impl.cuh"

namespace baracuda::kernels {
template void cast_launch<int64_t>(const elementwise::EwLaunch&, void*);
}  // namespace baracuda::kernels
