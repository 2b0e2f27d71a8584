// CTC loss kernels for f64 log_probs.
#include "loss/ctc_kernels.cuh"

namespace baracuda::loss::detail {
template void ctc_launch_typed<double>(const CtcLaunch&, cudaStream_t);
}  // namespace baracuda::loss::detail
