// Casts from f16 to every dtype.
#include "elementwise/cast_impl.cuh"

namespace baracuda::elementwise::kern {

using namespace baracuda::kernels;  // the shared vocabulary (cuda/common)
template void cast_launch<f16>(const elementwise::EwLaunch&, void*);
}  // namespace baracuda::elementwise::kern
