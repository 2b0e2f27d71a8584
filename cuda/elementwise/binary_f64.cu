// Binary kernels and binary derivatives for double (one unit per float dtype: they compile in parallel).
#include "elementwise/binary_impl.cuh"

namespace baracuda::elementwise::kern {

template void binary_launch<double>(const elementwise::EwLaunch&, void*);
template void binary_backward_launch<double>(const elementwise::EwLaunch&, void*);

}  // namespace baracuda::elementwise::kern
