// Pointwise losses and nll_loss for double storage.
#include "loss/pw_kernels.cuh"
#include "loss/nll_kernels.cuh"

namespace baracuda::loss::detail {
template void pw_launch_typed<double>(const PwLaunch&, cudaStream_t);
template void nll_launch_typed<double>(const NllLaunch&, cudaStream_t);
}  // namespace baracuda::loss::detail
