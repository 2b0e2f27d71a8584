// Cross-entropy kernels for f32 logits.
#include "loss/ce_kernels.cuh"

namespace baracuda::loss::detail {
template void ce_launch_typed<float>(const CeLaunch&, cudaStream_t);
}  // namespace baracuda::loss::detail
