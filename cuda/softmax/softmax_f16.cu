// Softmax kernels for f16 (every path, forward and backward).
#include "softmax/softmax_kernels.cuh"

namespace baracuda::softmax::detail {
template void launch_typed<f16>(const SmLaunch&, cudaStream_t);
}  // namespace baracuda::softmax::detail
