// Unary kernels for integers and bool, and predicates (bool outputs) for every real dtype.
#include "elementwise/unary_impl.cuh"

namespace baracuda::elementwise::kern {

using namespace baracuda::kernels;  // the shared vocabulary (cuda/common)
template void unary_launch<bool>(const elementwise::EwLaunch&, void*);
template void unary_launch<int8_t>(const elementwise::EwLaunch&, void*);
template void unary_launch<uint8_t>(const elementwise::EwLaunch&, void*);
template void unary_launch<int16_t>(const elementwise::EwLaunch&, void*);
template void unary_launch<int32_t>(const elementwise::EwLaunch&, void*);
template void unary_launch<int64_t>(const elementwise::EwLaunch&, void*);
template void unary_launch<uint32_t>(const elementwise::EwLaunch&, void*);

template void predicate_launch<bool>(const elementwise::EwLaunch&, void*);
template void predicate_launch<int8_t>(const elementwise::EwLaunch&, void*);
template void predicate_launch<uint8_t>(const elementwise::EwLaunch&, void*);
template void predicate_launch<int16_t>(const elementwise::EwLaunch&, void*);
template void predicate_launch<int32_t>(const elementwise::EwLaunch&, void*);
template void predicate_launch<int64_t>(const elementwise::EwLaunch&, void*);
template void predicate_launch<uint32_t>(const elementwise::EwLaunch&, void*);
template void predicate_launch<f16>(const elementwise::EwLaunch&, void*);
template void predicate_launch<bf16>(const elementwise::EwLaunch&, void*);
template void predicate_launch<float>(const elementwise::EwLaunch&, void*);
template void predicate_launch<double>(const elementwise::EwLaunch&, void*);
}  // namespace baracuda::elementwise::kern
