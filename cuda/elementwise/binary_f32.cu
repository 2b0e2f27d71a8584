// Binary kernels and binary derivatives for float (one unit per float dtype: they compile in parallel).
#include "elementwise/binary_impl.cuh"

namespace baracuda::elementwise::kern {

template void binary_launch<float>(const elementwise::EwLaunch&, void*);
template void binary_backward_launch<float>(const elementwise::EwLaunch&, void*);

}  // namespace baracuda::elementwise::kern
