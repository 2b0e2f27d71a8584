// rows_block / rows_cluster kernels (softmax_reg.cuh) for bf16, fwdward: every knob value.
#include "softmax/softmax_reg.cuh"

namespace baracuda::softmax::detail {
template void launch_reg<bf16, false>(const SmLaunch&, const RowGeo&, cudaStream_t);
}  // namespace baracuda::softmax::detail
