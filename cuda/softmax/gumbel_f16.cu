// gumbel_softmax forward / backward kernels (gumbel.cuh) for f16: every path.
#include "softmax/gumbel.cuh"

namespace baracuda::softmax::rowops {
template void gumbel_launch<kernels::f16>(const RowOpLaunch&, cudaStream_t);
}  // namespace baracuda::softmax::rowops
