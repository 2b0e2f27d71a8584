// Cross-entropy kernels for bf16 logits.
#include "loss/ce_kernels.cuh"

namespace baracuda::loss::detail {
template void ce_launch_typed<bf16>(const CeLaunch&, cudaStream_t);
}  // namespace baracuda::loss::detail
