// Softmax kernels for f32 (every path, forward and backward).
#include "softmax/softmax_kernels.cuh"

namespace baracuda::softmax::detail {
template void launch_typed<float>(const SmLaunch&, cudaStream_t);
}  // namespace baracuda::softmax::detail
