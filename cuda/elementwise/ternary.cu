// Ternary kernels: where for every real dtype, clamp / lerp / addcmul / addcdiv / fma for the float
// ones (their derivatives are in ternary_backward.cu, a unit of its own so the two compile in parallel).
#include "elementwise/ternary_impl.cuh"

namespace baracuda::elementwise::kern {

template void ternary_launch<bool>(const elementwise::EwLaunch&, void*);
template void ternary_launch<int8_t>(const elementwise::EwLaunch&, void*);
template void ternary_launch<uint8_t>(const elementwise::EwLaunch&, void*);
template void ternary_launch<int16_t>(const elementwise::EwLaunch&, void*);
template void ternary_launch<int32_t>(const elementwise::EwLaunch&, void*);
template void ternary_launch<int64_t>(const elementwise::EwLaunch&, void*);
template void ternary_launch<uint32_t>(const elementwise::EwLaunch&, void*);
template void ternary_launch<f16>(const elementwise::EwLaunch&, void*);
template void ternary_launch<bf16>(const elementwise::EwLaunch&, void*);
template void ternary_launch<float>(const elementwise::EwLaunch&, void*);
template void ternary_launch<double>(const elementwise::EwLaunch&, void*);

}  // namespace baracuda::elementwise::kern
