// Casts from e5m2 to every dtype.
#include "elementwise/cast_impl.cuh"

namespace baracuda::elementwise::kern {

using namespace baracuda::kernels;  // the shared vocabulary (cuda/common)
template void cast_launch<e5m2>(const elementwise::EwLaunch&, void*);
}  // namespace baracuda::elementwise::kern
