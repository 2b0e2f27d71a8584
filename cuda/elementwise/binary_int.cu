// Binary kernels for integers and bool; comparisons for every real dtype.
#include "elementwise/binary_impl.cuh"

namespace baracuda::elementwise::kern {

using namespace baracuda::kernels;  // the shared vocabulary (cuda/common)
template void binary_launch<bool>(const elementwise::EwLaunch&, void*);
template void binary_launch<int8_t>(const elementwise::EwLaunch&, void*);
template void binary_launch<uint8_t>(const elementwise::EwLaunch&, void*);
template void binary_launch<int16_t>(const elementwise::EwLaunch&, void*);
template void binary_launch<int32_t>(const elementwise::EwLaunch&, void*);
template void binary_launch<int64_t>(const elementwise::EwLaunch&, void*);
template void binary_launch<uint32_t>(const elementwise::EwLaunch&, void*);

template void compare_launch<bool>(const elementwise::EwLaunch&, void*);
template void compare_launch<int8_t>(const elementwise::EwLaunch&, void*);
template void compare_launch<uint8_t>(const elementwise::EwLaunch&, void*);
template void compare_launch<int16_t>(const elementwise::EwLaunch&, void*);
template void compare_launch<int32_t>(const elementwise::EwLaunch&, void*);
template void compare_launch<int64_t>(const elementwise::EwLaunch&, void*);
template void compare_launch<uint32_t>(const elementwise::EwLaunch&, void*);
template void compare_launch<f16>(const elementwise::EwLaunch&, void*);
template void compare_launch<bf16>(const elementwise::EwLaunch&, void*);
template void compare_launch<float>(const elementwise::EwLaunch&, void*);
template void compare_launch<double>(const elementwise::EwLaunch&, void*);
}  // namespace baracuda::elementwise::kern
