// The ternary kernels' derivatives for the float dtypes (the forward kernels are in ternary.cu).
#include "elementwise/ternary_impl.cuh"

namespace baracuda::elementwise::kern {

template void ternary_backward_launch<f16>(const elementwise::EwLaunch&, void*);
template void ternary_backward_launch<bf16>(const elementwise::EwLaunch&, void*);
template void ternary_backward_launch<float>(const elementwise::EwLaunch&, void*);
template void ternary_backward_launch<double>(const elementwise::EwLaunch&, void*);

}  // namespace baracuda::elementwise::kern
