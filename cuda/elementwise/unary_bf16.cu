// Unary kernels for bf16 (all UnaryKind values in one kernel per layout).
#include "elementwise/unary_impl.cuh"

namespace baracuda::elementwise::kern {

using namespace baracuda::kernels;  // the shared vocabulary (cuda/common)
template void unary_launch<bf16>(const elementwise::EwLaunch&, void*);
template void unary_backward_launch<bf16>(const elementwise::EwLaunch&, void*);
}  // namespace baracuda::elementwise::kern
