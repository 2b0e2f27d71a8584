// Binary kernels and binary derivatives for bf16 (one unit per float dtype: they compile in parallel).
#include "elementwise/binary_impl.cuh"

namespace baracuda::elementwise::kern {

template void binary_launch<bf16>(const elementwise::EwLaunch&, void*);
template void binary_backward_launch<bf16>(const elementwise::EwLaunch&, void*);

}  // namespace baracuda::elementwise::kern
