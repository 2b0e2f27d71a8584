// Casts from f64 to every dtype.
#include "elementwise/cast_impl.cuh"

namespace baracuda::kernels {
template void cast_launch<double>(const elementwise::EwLaunch&, void*);
}  // namespace baracuda::kernels
