// Cross-entropy kernels for f64 logits.
#include "loss/ce_kernels.cuh"

namespace baracuda::loss::detail {
template void ce_launch_typed<double>(const CeLaunch&, cudaStream_t);
}  // namespace baracuda::loss::detail
