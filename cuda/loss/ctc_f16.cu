// CTC loss kernels for f16 log_probs.
#include "loss/ctc_kernels.cuh"

namespace baracuda::loss::detail {
template void ctc_launch_typed<kernels::f16>(const CtcLaunch&, cudaStream_t);
}  // namespace baracuda::loss::detail
