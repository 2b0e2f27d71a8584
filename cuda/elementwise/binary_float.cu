// Binary kernels and binary derivatives for the float dtypes.
#include "elementwise/binary_impl.cuh"

namespace baracuda::elementwise::kern {

using namespace baracuda::kernels;  // the shared vocabulary (cuda/common)
template void binary_launch<f16>(const elementwise::EwLaunch&, void*);
template void binary_launch<bf16>(const elementwise::EwLaunch&, void*);
template void binary_launch<float>(const elementwise::EwLaunch&, void*);
template void binary_launch<double>(const elementwise::EwLaunch&, void*);
template void binary_backward_launch<f16>(const elementwise::EwLaunch&, void*);
template void binary_backward_launch<bf16>(const elementwise::EwLaunch&, void*);
template void binary_backward_launch<float>(const elementwise::EwLaunch&, void*);
template void binary_backward_launch<double>(const elementwise::EwLaunch&, void*);
}  // namespace baracuda::elementwise::kern
