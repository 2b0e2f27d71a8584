// Pointwise losses and nll_loss for bf16 storage.
#include "loss/pw_kernels.cuh"
#include "loss/nll_kernels.cuh"

namespace baracuda::loss::detail {
template void pw_launch_typed<bf16>(const PwLaunch&, cudaStream_t);
template void nll_launch_typed<bf16>(const NllLaunch&, cudaStream_t);
}  // namespace baracuda::loss::detail
