// Pointwise losses and nll_loss for float storage.
#include "loss/pw_kernels.cuh"
#include "loss/nll_kernels.cuh"

namespace baracuda::loss::detail {
template void pw_launch_typed<float>(const PwLaunch&, cudaStream_t);
template void nll_launch_typed<float>(const NllLaunch&, cudaStream_t);
}  // namespace baracuda::loss::detail
